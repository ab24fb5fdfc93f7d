#include "storage/pairs.h"

namespace dueq::storage {

void append_pair(std::string& out, std::string_view key, std::string_view value) {
    auto put32 = [&](std::size_t n) {
        for (int i = 3; i >= 0; --i)
            out.push_back(char(n >> (8 * i)));
    };
    put32(key.size());
    out.append(key);
    put32(value.size());
    out.append(value);
}

bool split_pairs(std::string_view chunk, std::vector<std::pair<std::string, std::string>>& out) {
    return for_each_pair(chunk, [&](std::string_view k, std::string_view v) {
        out.emplace_back(std::string(k), std::string(v));
    });
}

}  // namespace dueq::storage
