// [log] format = "json": one JSON object per line, for log shippers.
#pragma once

#include <spdlog/formatter.h>

#include <memory>
#include <string>

namespace dueq::node {

// {"time":"2026-11-25T10:00:00.123Z","level":"info","node":"n1","msg":"..."}; the message is
// escaped, so a peer name or an error text cannot break the line.
std::unique_ptr<spdlog::formatter> json_log_formatter(const std::string& node_id);

}  // namespace dueq::node
