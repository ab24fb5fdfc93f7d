// One-shot requests for the scripts: wait until a restarted server serves its data, and
// ask a server for its store's own memory accounting.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "backend.h"

namespace dueq::bench {

// Polls every 10 ms (reconnecting as needed) until a get of `key` in `queue` finds the
// task. Returns the ms waited, or -1 after timeout_s.
double wait_ready(BackendKind kind, const std::string& address, const std::string& queue,
                  const std::string& key, double timeout_s);

// The store's bytes (data and indexes) where the backend reports them; nullopt otherwise.
std::optional<std::int64_t> store_bytes(BackendKind kind, const std::string& address);

// Asks the server to write a checkpoint (Tarantool: box.snapshot()), waiting up to
// timeout_s. Returns false with `error` set when it cannot.
bool checkpoint(BackendKind kind, const std::string& address, double timeout_s, std::string* error);

}  // namespace dueq::bench
