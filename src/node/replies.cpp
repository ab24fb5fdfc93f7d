#include "node/replies.h"

#include <type_traits>
#include <variant>

#include "common/version.h"
#include "net/frame.h"
#include "wire/protocol.h"

namespace dueq::node {

namespace field = wire::field;

using net::FrameBuilder;

namespace {
// Room asked for up front, so that an answer is one allocation: its header ({"id", "ok"})
// fits in the first, and each task it carries in the second plus its key and payload.
constexpr std::size_t kAnswerBytes = 64, kTaskFieldBytes = 112;
std::size_t task_room(std::size_t key_bytes, std::size_t payload_bytes) {
    return kTaskFieldBytes + key_bytes + payload_bytes;
}
}  // namespace

namespace {
// The fields a task has in `get` and in `list`: key, status, time, attempts, and
// lease_until when taken (`extra` more fields follow; the caller packs them).
void pack_task_summary(FrameBuilder& f, std::string_view key, queue::Status status,
                       std::int64_t time, std::uint32_t attempts, std::int64_t lease_until,
                       std::uint32_t extra) {
    const bool taken = status == queue::Status::taken;
    f.pk().pack_map(4 + (taken ? 1 : 0) + extra);
    f.key(field::key);
    f.key_bytes(key);
    f.key(field::status);
    f.str(queue::to_string(status));
    f.key(field::time);
    f.pk().pack_int64(time);
    f.key(field::attempts);
    f.pk().pack_uint32(attempts);
    if (taken) {
        f.key(field::lease_until);
        f.pk().pack_int64(lease_until);
    }
}
}  // namespace

std::string get_reply(std::uint64_t id, const queue::TaskView& t) {
    FrameBuilder f(kAnswerBytes + task_room(t.key.size(), t.payload.size()));
    f.begin_ok(id, 1);
    f.key(field::task);
    pack_task_summary(f, t.key, t.status, t.time, t.attempts, t.lease_until, 2);
    f.key(field::payload);
    f.raw(t.payload);
    f.key(field::version);
    f.pk().pack_uint64(t.version);
    return f.finish();
}

namespace {
std::uint32_t stats_fields(const queue::QueueStats& s) {
    return 6 + (s.next_due ? 1 : 0) + (s.oldest_late ? 1 : 0);
}
// The entries only; the caller packs the map header (one queue's stats sit at the top
// level of the response, several queues' in an array of maps).
void pack_stats_entries(FrameBuilder& f, const std::string& name, const queue::QueueStats& s) {
    f.key(field::queue);
    f.str(name);
    f.key(field::ready);
    f.pk().pack_uint64(s.ready);
    f.key(field::taken);
    f.pk().pack_uint64(s.taken);
    f.key(field::buried);
    f.pk().pack_uint64(s.buried);
    f.key(field::done);
    f.pk().pack_uint64(s.done);
    f.key(field::due_now);
    f.pk().pack_uint64(s.due_now);
    if (s.next_due) {
        f.key(field::next_due);
        f.pk().pack_int64(*s.next_due);
    }
    if (s.oldest_late) {
        f.key(field::oldest_late);
        f.pk().pack_int64(*s.oldest_late);
    }
}
}  // namespace

std::string stats_reply(std::uint64_t id, const queue::Store& store, const std::string* queue,
                        std::int64_t now) {
    FrameBuilder f;
    if (queue) {
        const auto s = store.stats(*queue, now);
        f.begin_ok(id, stats_fields(s));
        pack_stats_entries(f, *queue, s);
        return f.finish();
    }
    const auto names = store.queue_names();
    f.begin_ok(id, 1);
    f.key(field::queues);
    f.pk().pack_array(std::uint32_t(names.size()));
    for (const auto& n : names) {
        const auto s = store.stats(n, now);
        f.pk().pack_map(stats_fields(s));
        pack_stats_entries(f, n, s);
    }
    return f.finish();
}

std::string list_reply(std::uint64_t id, const queue::ListPage& page) {
    std::size_t room = kAnswerBytes;
    for (const auto& t : page.tasks)
        room += kTaskFieldBytes + t.key.size();
    FrameBuilder f(room);
    const auto* last = page.more && !page.tasks.empty() ? &page.tasks.back() : nullptr;
    f.begin_ok(id, last ? 3 : 1);
    f.key(field::tasks);
    f.pk().pack_array(std::uint32_t(page.tasks.size()));
    for (const auto& t : page.tasks)
        pack_task_summary(f, t.key, t.status, t.time, t.attempts, t.lease_until, 0);
    if (last) {
        f.key(field::after);
        f.key_bytes(last->key);
        f.key(field::after_time);
        f.pk().pack_int64(last->order);
    }
    return f.finish();
}

std::string members_reply(std::uint64_t id, const MembersInfo& m) {
    FrameBuilder f;
    f.begin_ok(id, 4);
    f.key(field::members);
    f.pk().pack_array(std::uint32_t(m.members.size()));
    for (const auto& x : m.members) {
        f.pk().pack_map(9);
        f.key(field::name);
        f.str(x.name);
        f.key(field::raft_id);
        f.pk().pack_uint64(x.raft_id);
        f.key(field::role);
        f.str(x.voter ? wire::word::voter : wire::word::learner);
        f.key(field::peer);
        f.str(x.peer);
        f.key(field::client);
        f.str(x.client);
        f.key(field::admin);
        f.str(x.admin);
        f.key(field::connected);
        f.pk().pack(x.connected);
        f.key(field::match);
        f.pk().pack_uint64(x.match);
        f.key(field::lag);
        f.pk().pack_uint64(x.lag);
    }
    f.key(field::leader_id);
    f.str(m.leader_id);
    f.key(field::membership_index);
    f.pk().pack_uint64(m.membership_index);
    f.key(field::pending);
    f.pk().pack(m.pending);
    return f.finish();
}

std::string member_changed_reply(std::uint64_t id, const std::string& name, std::uint64_t raft_id) {
    FrameBuilder f;
    f.begin_ok(id, 2);
    f.key(field::name);
    f.str(name);
    f.key(field::raft_id);
    f.pk().pack_uint64(raft_id);
    return f.finish();
}

std::string backup_reply(std::uint64_t id, const BackupReply& b) {
    FrameBuilder f(4 * kAnswerBytes + b.data.size() + b.cluster.size() + b.node_id.size());
    f.begin_ok(id, 10);
    f.key(field::backup);
    f.pk().pack_uint64(b.backup);
    f.key(field::seq);
    f.pk().pack_uint32(b.seq);
    f.key(field::index);
    f.pk().pack_uint64(b.index);
    f.key(field::term);
    f.pk().pack_uint64(b.term);
    f.key(field::time);
    f.pk().pack_int64(b.time);
    f.key(field::cluster_id);
    f.str(b.cluster);
    f.key(field::node_id);
    f.str(b.node_id);
    f.key(field::version);
    f.str(dueq::build());
    f.key(field::records);
    f.pk().pack_bin(std::uint32_t(b.data.size()));
    f.pk().pack_bin_body(b.data.data(), std::uint32_t(b.data.size()));
    f.key(field::last);
    f.pk().pack(b.last);
    return f.finish();
}

std::string status_reply(std::uint64_t id, const StatusInfo& s) {
    FrameBuilder f;
    f.begin_ok(id, 16);
    f.key(field::version);
    f.str(dueq::build());
    f.key(field::node_id);
    f.str(s.node_id);
    f.key(field::role);
    f.str(s.role);
    f.key(field::term);
    f.pk().pack_uint64(s.term);
    f.key(field::leader);
    f.str(s.leader);
    f.key(field::leader_id);
    f.str(s.leader_id);
    f.key(field::commit_index);
    f.pk().pack_uint64(s.commit_index);
    f.key(field::applied_index);
    f.pk().pack_uint64(s.applied_index);
    f.key(field::last_index);
    f.pk().pack_uint64(s.last_index);
    f.key(field::peers);
    f.pk().pack_array(std::uint32_t(s.peers.size()));
    for (const auto& p : s.peers) {
        f.pk().pack_map(5);
        f.key(field::id);
        f.str(p.id);
        f.key(field::peer);
        f.str(p.peer);
        f.key(field::connected);
        f.pk().pack(p.connected);
        f.key(field::match);
        f.pk().pack_uint64(p.match);
        f.key(field::lag);
        f.pk().pack_uint64(p.lag);
    }
    f.key(field::mode);
    f.str(s.mode);
    f.key(field::mode_ms);
    f.pk().pack_int64(s.mode_ms);
    f.key(field::autonomy);
    f.pk().pack_map(6);
    f.key(field::overlay);
    f.pk().pack_uint64(s.overlay);
    f.key(field::served);
    f.pk().pack_uint64(s.served_autonomous);
    f.key(field::merged);
    f.pk().pack_uint64(s.merged);
    f.key(field::taken_over);
    f.pk().pack_uint64(s.merge_taken_over);
    f.key(field::kept);
    f.pk().pack_uint64(s.merge_kept);
    f.key(field::both_sides);
    f.pk().pack_uint64(s.merge_both_sides);
    f.key(field::tasks);
    f.pk().pack_uint64(s.tasks);
    f.key(field::pending);
    f.pk().pack_uint64(s.pending);
    f.key(field::peer_input_dropped);
    f.pk().pack_uint64(s.peer_input_dropped);
    return f.finish();
}

namespace {
void declare_fields(FrameBuilder& f, const queue::QueueSettings& s) {
    f.key(field::settings);
    f.pk().pack_map(6);
    f.key(field::lead_ms);
    f.pk().pack_int64(s.lead_ms);
    f.key(field::ttr_ms);
    f.pk().pack_int64(s.ttr_ms);
    f.key(field::max_attempts);
    f.pk().pack_uint32(s.max_attempts);
    f.key(field::retention_ms);
    f.pk().pack_int64(s.retention_ms);
    f.key(field::late_share);
    f.pk().pack_double(s.late_share);
    f.key(field::autonomous);
    f.pk().pack(s.autonomous);
}

void take_fields(FrameBuilder& f, const std::vector<queue::TakenTask>& tasks) {
    f.key(field::tasks);
    f.pk().pack_array(std::uint32_t(tasks.size()));
    for (const auto& t : tasks) {
        f.pk().pack_map(6);
        f.key(field::key);
        f.key_bytes(t.key);
        f.key(field::payload);
        f.raw(t.payload);
        f.key(field::time);
        f.pk().pack_int64(t.time);
        f.key(field::lease);
        f.pk().pack_uint64(t.lease);
        f.key(field::lease_until);
        f.pk().pack_int64(t.lease_until);
        f.key(field::attempts);
        f.pk().pack_uint32(t.attempts);
    }
}
}  // namespace

std::string result_reply(std::uint64_t id, const queue::Command& cmd, const queue::Result& r) {
    if (!r.ok()) return net::error_frame(id, r.code, r.message);
    std::size_t room = kAnswerBytes;  // a take's answer carries its tasks
    for (const auto& t : r.tasks)
        room += task_room(t.key.size(), t.payload.size());
    FrameBuilder f(room);
    std::visit(
        [&](const auto& c) {
            using C = std::decay_t<decltype(c)>;
            if constexpr (std::is_same_v<C, queue::Put> || std::is_same_v<C, queue::Ack>) {
                f.begin_ok(id, 1);
                f.key(field::version);
                f.pk().pack_uint64(r.version);
            } else if constexpr (std::is_same_v<C, queue::Touch>) {
                f.begin_ok(id, 1);
                f.key(field::lease_until);
                f.pk().pack_int64(r.lease_until);
            } else if constexpr (std::is_same_v<C, queue::Kick>) {
                f.begin_ok(id, 1);
                f.key(field::kicked);
                f.pk().pack_uint32(r.kicked);
            } else if constexpr (std::is_same_v<C, queue::Declare>) {
                f.begin_ok(id, 1);
                declare_fields(f, r.settings);
            } else if constexpr (std::is_same_v<C, queue::Take>) {
                f.begin_ok(id, 1);
                take_fields(f, r.tasks);
            } else {
                f.begin_ok(id, 0);
            }
        },
        cmd);
    return f.finish();
}

}  // namespace dueq::node
