// The simulator's replicated state machine: the set of command ids applied, plus a
// running digest of every applied entry (index, term, payload), so that two replicas
// that applied different sequences cannot look equal.
#pragma once

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

#include "raft/types.h"

namespace dueq::sim {

inline std::uint64_t fnv1a(std::string_view bytes, std::uint64_t h = 0xcbf29ce484222325ULL) {
    for (unsigned char c : bytes) {
        h ^= c;
        h *= 0x100000001b3ULL;
    }
    return h;
}

inline std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

// A workload command is its 8-byte id followed by padding.
inline std::string encode_command(std::uint64_t id, std::size_t padding) {
    std::string s(8 + padding, '\0');
    std::memcpy(s.data(), &id, 8);
    for (std::size_t k = 0; k < padding; ++k)
        s[8 + k] = static_cast<char>('a' + (id + k) % 26);
    return s;
}

inline bool decode_command(std::string_view data, std::uint64_t& id) {
    if (data.size() < 8) return false;
    std::memcpy(&id, data.data(), 8);
    return true;
}

struct SimStateMachine {
    raft::Index applied = 0;
    raft::Millis last_time = 0;
    std::uint64_t digest = 0;
    std::set<std::uint64_t> ids;

    void apply(const raft::Entry& e) {
        digest = mix(mix(mix(digest, e.index), e.term), fnv1a(e.data));
        std::uint64_t id;
        if (e.type == raft::EntryType::normal && decode_command(e.data, id)) ids.insert(id);
        applied = e.index;
        last_time = e.time;
    }

    std::string serialize() const {
        std::string out;
        auto put = [&](std::uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); };
        put(applied);
        put(last_time);
        put(digest);
        put(ids.size());
        for (auto id : ids)
            put(id);
        return out;
    }

    static SimStateMachine restore(std::string_view data) {
        SimStateMachine sm;
        if (data.size() < 32) return sm;
        auto get = [&](std::size_t k) {
            std::uint64_t v;
            std::memcpy(&v, data.data() + 8 * k, 8);
            return v;
        };
        sm.applied = get(0);
        sm.last_time = get(1);
        sm.digest = get(2);
        std::uint64_t n = get(3);
        for (std::uint64_t k = 0; k < n && 8 * (4 + k) + 8 <= data.size(); ++k)
            sm.ids.insert(get(4 + k));
        return sm;
    }
};

}  // namespace dueq::sim
