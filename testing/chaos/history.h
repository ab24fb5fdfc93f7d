// The history of a chaos run: one JSON object per line (format in docs/reliability.md),
// appended by every workload process and read by testing/chaos/check.py.
#pragma once

#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "client/status.h"

namespace dueq::chaos {

using Json = nlohmann::json;

// Wall-clock ms of this machine's real clock (the workload never runs under faketime).
std::int64_t wall_ms();

// Whether an error proves the op was not applied (`fail`) or leaves it open (`info`).
// Client-side `unavailable` covers a connection that broke after the request was
// written, and `timeout` a proposal that may still commit: both are indeterminate.
bool definitely_not_applied(client::Code code);

// A payload as the history shows it: the string itself when it is a msgpack str (every
// value the workload writes is one), else its JSON text.
std::string payload_text(const std::string& msgpack);

class History {
  public:
    explicit History(const std::string& path);
    // Stamps `t` (unless set) and appends one line; thread-safe; flushed at once, so a
    // workload that is killed leaves a readable prefix.
    void write(Json event);
    bool good() const { return out_.good(); }

  private:
    std::mutex mu_;
    std::ofstream out_;
};

// Helpers for the op events: invoke, then exactly one of ok / fail / info.
Json invoke(int process, const char* f, const std::string& node);
Json completion(const Json& invoke_event, const client::Error* error);

}  // namespace dueq::chaos
