// How dueqctl shows results: aligned tables and key/value blocks for people, one JSON
// document per command for scripts (--json).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/status.h"

namespace dueq::dueqctl {

using Json = nlohmann::json;

class Table {
public:
    explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
    void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
    void print() const;  // to stdout

private:
    std::vector<std::string> header_;
    std::vector<std::vector<std::string>> rows_;
};

// Key/value lines, keys padded to one column.
void print_fields(const std::vector<std::pair<std::string, std::string>>& fields);

// The payload (msgpack bytes) as a JSON value; an undecodable one becomes a string
// describing the problem rather than failing the whole command.
Json payload_json(const std::string& msgpack);
// Compact JSON text of the payload, cut to max_chars with "..." (0: no limit).
std::string payload_text(const std::string& msgpack, std::size_t max_chars = 0);

// "2026-01-01T00:00:00.000Z (in 5m)" / "(12s late)", relative to now_ms.
std::string when(int64_t time_ms, int64_t now_ms);

// Prints "dueqctl: <code>: <message> (leader ...)" to stderr and returns exit code 1.
int report(const client::Error& error);

// One JSON document on one line; with set_json_lines(true) (--output jsonl) an answer that
// is a list (one array field: tasks, queues, members, ...) prints one line per item.
void print_json(const Json& j);
void set_json_lines(bool on);

}  // namespace dueq::dueqctl
