// The (key, value) pairs a checkpoint is read as (storage::Checkpoint::Reader): each is a
// be32 key length, the key, a be32 value length, the value. Snapshot streams between peers
// and backup files carry them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dueq::storage {

void append_pair(std::string& out, std::string_view key, std::string_view value);
// Splits `chunk` into pairs; false if it is malformed.
bool split_pairs(std::string_view chunk, std::vector<std::pair<std::string, std::string>>& out);
// Calls `each(key, value)` for every pair of `chunk`; false if it is malformed.
template <class Each>
bool for_each_pair(std::string_view chunk, Each&& each) {
    auto get32 = [&](std::size_t& n) {
        if (chunk.size() < 4) return false;
        n = 0;
        for (int i = 0; i < 4; ++i)
            n = (n << 8) | static_cast<unsigned char>(chunk[std::size_t(i)]);
        chunk.remove_prefix(4);
        return chunk.size() >= n;
    };
    while (!chunk.empty()) {
        std::size_t kn = 0, vn = 0;
        if (!get32(kn)) return false;
        const std::string_view key = chunk.substr(0, kn);
        chunk.remove_prefix(kn);
        if (!get32(vn)) return false;
        each(key, chunk.substr(0, vn));
        chunk.remove_prefix(vn);
    }
    return true;
}

}  // namespace dueq::storage
