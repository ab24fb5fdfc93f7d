// Who the members of this node's Raft group are, by name and address: the directory that
// travels with each membership in the log (raft::Membership::directory). The Raft core
// knows members by id only; this says which id is which machine, where its peers and
// clients reach it, and which id a new member gets (ids are never reused).
//
// A cluster starts from its config's [cluster] members, with ids by position (1, 2, ...);
// from the first membership change on, the directory in the log is the one in force and
// the config's list only seeds a new cluster (docs/operations.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "node/config.h"
#include "raft/membership.h"

namespace dueq::node {

struct MemberEntry {
    std::uint64_t raft_id = 0;
    std::string name;    // the member's [node] id
    std::string peer;    // host:port its peers dial
    std::string client;  // host:port clients are redirected to
    std::string admin;   // host:port of its HTTP admin listener; may be empty
    // Its data dir's id (the member record's, net/peer_handshake.h): peers refuse a node
    // that comes back as this member with another one. 0: not recorded yet.
    std::uint64_t data_id = 0;
    bool operator==(const MemberEntry&) const = default;
};

struct MemberDirectory {
    std::uint64_t next_id = 1;  // the id the next member added gets
    std::vector<MemberEntry> members;

    const MemberEntry* by_id(std::uint64_t raft_id) const;
    const MemberEntry* by_name(std::string_view name) const;
    bool operator==(const MemberDirectory&) const = default;
};

std::string encode_directory(const MemberDirectory& d);
// nullopt when `text` is not an encoded directory.
std::optional<MemberDirectory> decode_directory(std::string_view text);

// The membership a cluster starts from: the config's members as voters, ids by position
// (a standalone node is member 1 of itself).
raft::Membership seed_membership(const Config& c);

// The directory a membership carries, or the seed's when it carries none (a cluster whose
// membership never changed, or a joining node that has not learned it yet).
MemberDirectory directory_of(const raft::Membership& m, const Config& c);

}  // namespace dueq::node
