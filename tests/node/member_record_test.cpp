// A data dir names the member it belongs to (written at its first start): a node never
// serves another member's data, nor its own under another Raft id after the member list
// was reordered in its config; either would let it vote with a log it never wrote.
#include <catch2/catch.hpp>

#include <fstream>

#include "loopback_ports.h"
#include "node/process.h"
#include "node/support.h"

using namespace dueq::test;

namespace {

// A config for member `self` of a three-member cluster listed in `order` (node ids).
std::string write_config(const std::filesystem::path& dir, const std::string& name,
                         const std::string& self, const std::vector<std::string>& order,
                         const std::vector<std::uint16_t>& ports,
                         const std::filesystem::path& data) {
    std::ofstream(dir / "secret") << "a-test-secret-of-enough-length-0123456789\n";
    std::string members;
    for (std::size_t i = 0; i < order.size(); ++i)
        members += "  { id = \"" + order[i] + "\", peer = \"127.0.0.1:" + std::to_string(ports[i]) +
                   "\", client = \"127.0.0.1:" + std::to_string(ports[3 + i]) + "\" },\n";
    const auto path = dir / name;
    std::ofstream(path) << "[node]\nid = \"" << self << "\"\nclient_listen = \"127.0.0.1:0\"\n"
                        << "data_dir = \"" << data.string() << "\"\n\n[cluster]\nid = \"mr\"\n"
                        << "secret_file = \"" << (dir / "secret").string() << "\"\n"
                        << "members = [\n"
                        << members << "]\n[tls]\npeers = \"off\"\n";
    return path.string();
}

CommandRun refused_start(const std::string& config) {
    // In a group, so that its stderr (where dueqd says why) joins the output run_command reads.
    // Bounded: a node that wrongly accepts the data dir would serve until killed.
    return run_command("{ timeout 20 " + std::string(DUEQD_BINARY) + " --config " + config +
                       " 2>&1; }");
}

}  // namespace

TEST_CASE("a node refuses a data dir that belongs to another member or Raft id") {
    const auto dir = fresh_dir("member-record");
    const auto ports = free_loopback_ports(6);
    // ports: peers of the members in the order n1, n2, n3, then their client ports.
    const std::vector<std::string> order{"n1", "n2", "n3"};
    const auto data = dir / "data-n1";
    const std::string log = (dir / "dueqd.log").string();
    const auto n1 = write_config(dir, "n1.toml", "n1", order, ports, data);
    {
        DueqdProcess node(DUEQD_BINARY, {"--config", n1}, log);  // writes the record
        node.terminate();
    }
    SECTION("the same member starts again") {
        DueqdProcess node(DUEQD_BINARY, {"--config", n1}, log);
        CHECK(node.alive());
        node.terminate();
    }
    SECTION("another member on n1's data") {
        const auto n2 = write_config(dir, "n2.toml", "n2", order, ports, data);
        const auto run = refused_start(n2);
        CHECK(run.status != 0);
        CHECK_THAT(run.out, Catch::Contains("refusing to serve") &&
                                Catch::Contains("member=n1 raft_id=1") &&
                                Catch::Contains("member=n2 raft_id=2"));
    }
    SECTION("n1 under another Raft id: the member list reordered") {
        const auto moved =
            write_config(dir, "moved.toml", "n1", {"n2", "n1", "n3"},
                         {ports[1], ports[0], ports[2], ports[4], ports[3], ports[5]}, data);
        const auto run = refused_start(moved);
        CHECK(run.status != 0);
        CHECK_THAT(run.out, Catch::Contains("member=n1 raft_id=2") &&
                                Catch::Contains("same order on every node"));
    }
}
