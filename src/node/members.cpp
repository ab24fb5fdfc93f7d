#include "node/members.h"

#include <nlohmann/json.hpp>

namespace dueq::node {

const MemberEntry* MemberDirectory::by_id(std::uint64_t raft_id) const {
    for (const auto& m : members)
        if (m.raft_id == raft_id) return &m;
    return nullptr;
}

const MemberEntry* MemberDirectory::by_name(std::string_view name) const {
    for (const auto& m : members)
        if (m.name == name) return &m;
    return nullptr;
}

std::string encode_directory(const MemberDirectory& d) {
    nlohmann::json members = nlohmann::json::array();
    for (const auto& m : d.members) {
        members.push_back({{"id", m.raft_id},
                           {"name", m.name},
                           {"peer", m.peer},
                           {"client", m.client},
                           {"admin", m.admin},
                           {"data", m.data_id}});
    }
    return nlohmann::json{{"next_id", d.next_id}, {"members", members}}.dump();
}

std::optional<MemberDirectory> decode_directory(std::string_view text) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    try {
        MemberDirectory d;
        d.next_id = j.at("next_id").get<std::uint64_t>();
        for (const auto& m : j.at("members")) {
            d.members.push_back({m.at("id").get<std::uint64_t>(), m.at("name").get<std::string>(),
                                 m.at("peer").get<std::string>(), m.at("client").get<std::string>(),
                                 m.at("admin").get<std::string>(),
                                 m.value("data", std::uint64_t(0))});
            if (d.members.back().raft_id == 0 || d.members.back().raft_id >= d.next_id)
                return std::nullopt;
        }
        return d;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

namespace {

MemberDirectory seed_directory(const Config& c) {
    MemberDirectory d;
    if (c.members.empty()) {
        d.members.push_back({1, c.node_id, c.peer_listen, c.client_advertise, c.admin_listen});
    } else {
        for (std::size_t i = 0; i < c.members.size(); ++i) {
            const Member& m = c.members[i];
            d.members.push_back({i + 1, m.id, m.peer, m.client, m.admin});
        }
    }
    d.next_id = d.members.size() + 1;
    return d;
}

}  // namespace

raft::Membership seed_membership(const Config& c) {
    raft::Membership m;
    const std::size_t n = std::max<std::size_t>(1, c.members.size());
    for (std::size_t i = 1; i <= n; ++i)
        m.voters.push_back(i);
    m.directory = encode_directory(seed_directory(c));
    return m;
}

MemberDirectory directory_of(const raft::Membership& m, const Config& c) {
    if (auto d = decode_directory(m.directory)) return *d;
    return seed_directory(c);
}

}  // namespace dueq::node
