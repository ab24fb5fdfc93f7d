// Hashes for the simulator's checks: a digest of a task store that two replicas share
// exactly when they hold the same tasks and the same store-wide state, kept up to date
// from the changes each applied entry makes instead of rehashing the whole store.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "queue/store.h"
#include "storage/writes.h"

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

class StoreDigest {
  public:
    // Starts over from every task of `store`.
    void reset(const queue::Store& store) {
        tasks_.clear();
        sum_ = 0;
        store.for_each_task([&](std::string_view q, std::string_view k, std::string_view enc) {
            set(std::string(q), std::string(k), enc);
        });
        meta_ = fnv1a(store.encode_meta());
    }
    void apply(std::span<const storage::TaskChange> changes, const queue::Store& store) {
        for (const auto& c : changes) {
            if (c.encoded)
                set(c.queue, c.key, *c.encoded);
            else
                erase(c.queue, c.key);
        }
        meta_ = fnv1a(store.encode_meta());
    }
    std::uint64_t value() const { return mix(sum_, meta_); }

  private:
    static std::uint64_t hash(std::string_view q, std::string_view k, std::string_view enc) {
        return mix(mix(fnv1a(q), fnv1a(k)), fnv1a(enc));
    }
    void set(std::string q, std::string k, std::string_view enc) {
        erase(q, k);
        const std::uint64_t h = hash(q, k, enc);
        sum_ += h;
        tasks_[{std::move(q), std::move(k)}] = h;
    }
    void erase(const std::string& q, const std::string& k) {
        auto it = tasks_.find({q, k});
        if (it == tasks_.end()) return;
        sum_ -= it->second;
        tasks_.erase(it);
    }
    std::map<std::pair<std::string, std::string>, std::uint64_t> tasks_;
    std::uint64_t sum_ = 0;
    std::uint64_t meta_ = 0;
};

}  // namespace dueq::sim
