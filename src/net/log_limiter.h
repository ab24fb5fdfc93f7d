// Keeps a hostile or broken peer from flooding the log: one line per key (an address, a
// peer id) per period, with the number of events left unsaid since the last line.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace dueq::net {

class LogLimiter {
  public:
    using Clock = std::chrono::steady_clock;
    explicit LogLimiter(Clock::duration period) : period_(period) {}

    // Whether to log this event now. When true, `suppressed` is how many events of this
    // key were not logged since the last one that was.
    bool allow(const std::string& key, std::uint64_t& suppressed, Clock::time_point now = Clock::now()) {
        if (seen_.size() >= kMaxKeys) forget_older_than(now - period_);
        if (seen_.size() >= kMaxKeys) seen_.clear();  // a flood of distinct keys: start over
        auto [it, fresh] = seen_.try_emplace(key, Seen{now, 0});
        if (!fresh && now - it->second.logged < period_) {
            ++it->second.suppressed;
            return false;
        }
        suppressed = fresh ? 0 : it->second.suppressed;
        it->second = Seen{now, 0};
        return true;
    }

    // What to append to the logged line: nothing, or how many were left unsaid.
    static std::string suppressed_note(std::uint64_t suppressed) {
        return suppressed ? " (" + std::to_string(suppressed) + " more since the last report)"
                          : std::string();
    }

  private:
    static constexpr std::size_t kMaxKeys = 4096;
    struct Seen {
        Clock::time_point logged;
        std::uint64_t suppressed;
    };
    void forget_older_than(Clock::time_point t) {
        std::erase_if(seen_, [t](const auto& kv) { return kv.second.logged < t; });
    }
    Clock::duration period_;
    std::unordered_map<std::string, Seen> seen_;
};

}  // namespace dueq::net
