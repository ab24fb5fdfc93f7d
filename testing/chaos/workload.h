// The chaos workload: the token refresh cycle through the real C++ client, with every
// op recorded in a History. Per node ("side"): one front end that puts, gets and deletes
// tokens on its local node, and refreshers that take under a lease and ack with a new
// payload and a new due time; some of their takes are released, some abandoned (never
// acked: with release_on_disconnect the refresher also drops its connection).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "client/credentials.h"
#include "history.h"

namespace dueq::chaos {

struct NodeAddress {
    std::string id;       // "n1"
    std::string address;  // its client address, "127.0.0.1:7701"
};

struct WorkloadOptions {
    std::vector<NodeAddress> nodes;
    client::Credentials credentials;  // --token, --cacert, ... (cmd/common/credential_flags.h)
    std::string queue = "tokens";
    int keys = 200;
    int seconds = 30;
    std::uint64_t seed = 1;
    int refreshers_per_node = 2;  // the first takes with release_on_disconnect, the next without
    std::int64_t ttr_ms = 3000;
    std::int64_t refresh_ms = 2000;  // an acked token comes due again this much later
    std::int64_t call_timeout_ms = 2000;
    std::int64_t frontend_pause_ms = 20;
    int delete_percent = 2;  // of the front ends' ops (puts: 10%, gets: the rest)
    // Of the gets, this share asks consistency "leader" (judged by the checker's
    // leader_reads check); none in datacenter runs, whose cut-off writes merge later.
    double leader_read_share = 0.3;
    double abandon_share = 0.02;
    double release_share = 0.04;
    // Datacenter runs (testing/chaos/autonomy.py): only this node's front end and
    // refreshers run here ("" = every node's), and `via` is how this datacenter reaches
    // each node (through its own fault-proxy links). Then calls go to the local node, or
    // to the leader it names, never by the client library's redirects to an address
    // that would bypass the datacenter's links.
    std::string only_node;
    std::map<std::string, std::string> via;
    bool seed_keys = true;  // put every token first
};

std::string key_name(int i);

// Runs until opts.seconds have passed, then lets every op in flight finish (bounded by
// the call timeout) and returns the number of ok acks.
std::uint64_t run_workload(const WorkloadOptions& opts, History& history);

}  // namespace dueq::chaos
