// One home per limit (src/wire/limits.h): the config parser takes its defaults and ranges
// from it, and the two pages that state limits, docs/config.md ([limits]) and
// docs/protocol.md (§7, the fixed ones), say what it says.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "node/config.h"
#include "node/config_error.h"
#include "wire/limits.h"

using dueq::node::parse_config;
namespace limits = dueq::limits;

namespace {

std::string read_doc(const std::string& name) {
    std::ifstream in(std::string(DUEQ_SOURCE_DIR) + "/docs/" + name);
    REQUIRE(in);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Rows of docs/config.md's [limits] table: key -> (default, min, max).
std::map<std::string, limits::Range> config_md_rows(const std::string& text) {
    std::map<std::string, limits::Range> rows;
    const std::regex row(R"(\| `([a-z_]+)` \| (\d+)[^|]*\| (\d+)\.\.(\d+) \|)");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), row);
         it != std::sregex_iterator(); ++it)
        rows[(*it)[1]] = {std::stoull((*it)[2]), std::stoull((*it)[3]), std::stoull((*it)[4])};
    return rows;
}

// The value column of docs/protocol.md §7's table of fixed limits, by limit name.
std::map<std::string, std::uint64_t> protocol_md_fixed(const std::string& text) {
    std::map<std::string, std::uint64_t> rows;
    const auto from = text.find("No config changes these");
    REQUIRE(from != std::string::npos);
    const std::string section = text.substr(from, text.find("\n\n", text.find("|", from)) - from);
    const std::regex row(R"(\| ([^|]+?) \| (\d+)[^|]*\| [^|]+\|)");
    for (auto it = std::sregex_iterator(section.begin(), section.end(), row);
         it != std::sregex_iterator(); ++it)
        rows[(*it)[1]] = std::stoull((*it)[2]);
    return rows;
}

const auto& error_of = dueq::test::config_error;

}  // namespace

TEST_CASE("docs/config.md gives every [limits] key with the header's default and range") {
    const auto rows = config_md_rows(read_doc("config.md"));
    REQUIRE(rows.size() == limits::kConfigLimits.size());
    for (const auto& l : limits::kConfigLimits) {
        INFO(l.key);
        auto it = rows.find(std::string(l.key));
        REQUIRE(it != rows.end());
        CHECK(it->second.dflt == l.range.dflt);
        CHECK(it->second.min == l.range.min);
        CHECK(it->second.max == l.range.max);
    }
}

TEST_CASE("docs/protocol.md gives the fixed limits the header has") {
    const auto rows = protocol_md_fixed(read_doc("protocol.md"));
    CHECK(rows.at("queue name") == limits::kMaxQueueNameBytes);
    CHECK(rows.at("take `timeout_ms`") == std::uint64_t(limits::kMaxTakeTimeoutMs));
    CHECK(rows.at("kick count") == limits::kMaxKickCount);
    CHECK(rows.at("list count") == limits::kMaxListCount);
    CHECK(rows.at("msgpack nesting") == std::uint64_t(limits::kMaxDepth));
    CHECK(rows.at("a command as logged") == limits::kRecordPayloadBytes);
    CHECK(rows.at("leader reads waiting for the leader to confirm it leads") ==
          limits::kMaxPendingLeaderReads);
    CHECK(rows.at("backups streamed at once by one node") == limits::kMaxBackups);
    CHECK(rows.at("buckets in a shard map (`move`: `bucket` below it)") == limits::kMaxBuckets);
    CHECK(rows.at("buckets one `move` starts") == limits::kMaxMoveBuckets);
    CHECK(rows.at("a backup not asked for its next chunk") == std::uint64_t(limits::kBackupIdleMs));
    CHECK(rows.size() == 11);
}

TEST_CASE("the config parser takes its defaults and ranges from the header") {
    const auto dflt = parse_config("", "empty.toml");
    const auto builtin = parse_config(dueq::node::default_config_text(), "built-in");
    const std::map<std::string_view, std::uint64_t> parsed{
        {"max_frame_bytes", dflt.limits.max_frame_bytes},
        {"max_key_bytes", dflt.limits.max_key_bytes},
        {"max_payload_bytes", dflt.limits.max_payload_bytes},
        {"max_take_count", dflt.limits.max_take_count},
        {"max_waiting_takes", dflt.limits.max_waiting_takes},
        {"max_connections", dflt.limits.max_connections},
        {"max_connections_per_address", dflt.limits.max_connections_per_address},
        {"max_in_flight", dflt.limits.max_in_flight},
        {"frame_timeout_ms", dflt.limits.frame_timeout_ms},
        {"idle_timeout_ms", dflt.limits.idle_timeout_ms},
        {"max_store_bytes", dflt.limits.max_store_bytes}};
    for (const auto& l : limits::kConfigLimits) {
        INFO(l.key);
        CHECK(parsed.at(l.key) == l.range.dflt);
        // The frame must hold the payload and key: set it to its largest for the others.
        const std::string frame =
            l.key == "max_frame_bytes"
                ? ""
                : "max_frame_bytes = " + std::to_string(limits::kMaxFrameBytes.max) + "\n";
        const auto at = [&](std::uint64_t v) {
            return "[limits]\n" + frame + std::string(l.key) + " = " + std::to_string(v) + "\n";
        };
        CHECK(error_of(at(l.range.max)) == "");
        CHECK(error_of(at(l.range.min > 0 ? l.range.min : 0)).find("out of range") ==
              std::string::npos);
        if (l.range.min > 0)
            CHECK(error_of(at(l.range.min - 1)).find("out of range") != std::string::npos);
        if (l.key != "max_payload_bytes")
            CHECK(error_of(at(l.range.max + 1)).find("out of range") != std::string::npos);
    }
    CHECK(builtin.limits.max_frame_bytes == limits::kMaxFrameBytes.dflt);
    CHECK(builtin.limits.max_payload_bytes == limits::kMaxPayloadBytes.dflt);
}

TEST_CASE("a max_payload_bytes above what a log record holds is lowered to it, with a warning") {
    const auto c = parse_config(
        "[limits]\nmax_payload_bytes = 268435456\nmax_frame_bytes = 402653184\n", "big.toml");
    CHECK(c.limits.max_payload_bytes == limits::kRecordPayloadBytes);
    REQUIRE(c.warnings.size() == 1);
    CHECK(c.warnings[0].find("more than a log record holds") != std::string::npos);
    CHECK(parse_config("", "t").warnings.empty());
    CHECK(error_of("[limits]\nmax_payload_bytes = 1073741825\nmax_frame_bytes = 1073741824\n")
              .find("out of range") != std::string::npos);
}
