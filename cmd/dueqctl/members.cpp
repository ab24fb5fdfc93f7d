// `dueqctl member list | add | promote | remove`: the membership of the Raft group of the
// node asked (docs/operations.md has the runbooks). Changes go to the leader (the client
// follows a not_leader redirect) and return once the change is applied there.
#include <iostream>
#include <memory>

#include "command_util.h"
#include "output.h"

namespace dueq::dueqctl {

namespace {

int run_list(Context& ctx) {
    auto r = ctx.client().members(ctx.call_options());
    if (!r.ok()) return report(r.error());
    if (ctx.json) {
        Json members = Json::array();
        for (const auto& m : r->members) {
            members.push_back({{"name", m.name},
                               {"raft_id", m.raft_id},
                               {"role", m.role},
                               {"peer", m.peer},
                               {"client", m.client},
                               {"admin", m.admin},
                               {"connected", m.connected},
                               {"match", m.match},
                               {"lag", m.lag}});
        }
        print_json({{"members", members},
                    {"leader_id", r->leader_id},
                    {"membership_index", r->membership_index},
                    {"pending", r->pending}});
        return 0;
    }
    Table t({"NAME", "ID", "ROLE", "PEER", "CLIENT", "LINK", "MATCH", "LAG"});
    for (const auto& m : r->members) {
        const bool leader = m.name == r->leader_id;
        t.add({m.name, std::to_string(m.raft_id), m.role + (leader ? " (leader)" : ""), m.peer,
               m.client, m.connected ? "up" : "down", std::to_string(m.match),
               std::to_string(m.lag)});
    }
    t.print();
    std::cout << "membership from index " << r->membership_index
              << (r->membership_index == 0 ? " (the config's member list)" : "")
              << (r->pending ? ", not committed yet" : "") << "\n";
    return 0;
}

int print_change(Context& ctx, const client::Result<client::MemberChangeResponse>& r,
                 const std::string& done, const std::string& next) {
    if (!r.ok()) return report(r.error());
    if (ctx.json) {
        print_json({{"name", r->name}, {"raft_id", r->raft_id}});
        return 0;
    }
    std::cout << r->name << " (raft id " << r->raft_id << ") " << done << "\n";
    if (!next.empty()) std::cout << next << "\n";
    return 0;
}

}  // namespace

void add_member_command(CLI::App& app, Context& ctx) {
    CLI::App* member = app.add_subcommand(
        "member", "List the members of the node's Raft group, add a learner, promote, remove.");
    member->require_subcommand(1);
    member->footer(
        "A new machine joins in three steps (docs/operations.md):\n"
        "  dueqctl member add dc4 --peer 10.4.0.10:7800 --client dc4.example:7700\n"
        "  dueqd --config dc4.toml --join 4      # on the new machine, empty data dir\n"
        "  dueqctl member promote dc4            # once `member list` shows its lag near 0\n"
        "and a member is taken out with: dueqctl member remove dc2");
    command(*member, ctx, "list",
            "Every member: its Raft id, voter or learner, addresses, link and replication lag "
            "(as the leader sees it; ask the leader for lag).",
            "  dueqctl member list\n  dueqctl --addr 10.1.0.10:7700 member list --json\n",
            [&ctx] { return run_list(ctx); });

    auto add = std::make_shared<client::MemberAddRequest>();
    auto* add_cmd = command(
        *member, ctx, "add",
        "Add a new member as a learner: it receives the log but does not vote until promoted. "
        "Prints the Raft id to start it with (dueqd --join ID).",
        "  dueqctl member add dc4 --peer 10.4.0.10:7800 --client dc4.example:7700\n", [&ctx, add] {
            auto r = ctx.client().member_add(*add, ctx.call_options());
            const std::string id = r.ok() ? std::to_string(r->raft_id) : "";
            return print_change(
                ctx, r, "added as a learner",
                "start it with an empty data dir: dueqd --config <its config> --join " + id +
                    "\nthen, once `dueqctl member list` shows its lag near 0: dueqctl member "
                    "promote " +
                    add->name);
        });
    add_cmd->add_option("name", add->name, "The new member's [node] id")->required();
    add_cmd->add_option("--peer", add->peer, "ip:port where the members reach its peer listener")
        ->required();
    add_cmd->add_option("--client", add->client, "host:port clients are redirected to")->required();
    add_cmd->add_option("--admin", add->admin, "host:port of its HTTP admin listener");

    auto promote = std::make_shared<client::MemberPromoteRequest>();
    auto* promote_cmd = command(
        *member, ctx, "promote",
        "Make a learner a voter. Refused (unavailable) while its log is far behind the leader's.",
        "  dueqctl member promote dc4\n", [&ctx, promote] {
            return print_change(ctx, ctx.client().member_promote(*promote, ctx.call_options()),
                                "is a voter", "");
        });
    promote_cmd->add_option("name", promote->name, "The learner's name")->required();

    auto remove = std::make_shared<client::MemberRemoveRequest>();
    auto* remove_cmd = command(
        *member, ctx, "remove",
        "Remove a member, voter or learner, the leader included (it hands over once the change "
        "commits). A removed node stops; its id is never used again.",
        "  dueqctl member remove dc2\n", [&ctx, remove] {
            return print_change(ctx, ctx.client().member_remove(*remove, ctx.call_options()),
                                "removed", "");
        });
    remove_cmd->add_option("name", remove->name, "The member's name")->required();
}

}  // namespace dueq::dueqctl
