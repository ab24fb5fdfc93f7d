#include <array>
#include <utility>

#include "client/messages.h"
#include "client/status.h"

namespace dueq::client {
namespace {

constexpr std::array<std::pair<Code, std::string_view>, 13> kNames = {{
    {Code::ok, "ok"},
    {Code::bad_request, "bad_request"},
    {Code::not_found, "not_found"},
    {Code::exists, "exists"},
    {Code::lease_mismatch, "lease_mismatch"},
    {Code::not_leader, "not_leader"},
    {Code::no_quorum, "no_quorum"},
    {Code::too_large, "too_large"},
    {Code::timeout, "timeout"},
    {Code::unavailable, "unavailable"},
    {Code::unauthorized, "unauthorized"},
    {Code::internal, "internal"},
    {Code::unknown, "unknown"},
}};

}  // namespace

std::string_view code_name(Code code) {
    for (const auto& [c, name] : kNames) {
        if (c == code) return name;
    }
    return "unknown";
}

Code code_from_name(std::string_view name) {
    for (const auto& [c, n] : kNames) {
        if (n == name) return c;
    }
    return Code::unknown;
}

std::string Error::to_string() const {
    std::string out = code_name.empty() ? std::string(client::code_name(code)) : code_name;
    if (!message.empty()) out += ": " + message;
    if (!leader.empty()) out += " (leader " + leader + ")";
    return out;
}

std::string_view put_mode_name(PutMode mode) {
    switch (mode) {
        case PutMode::upsert: return "upsert";
        case PutMode::insert: return "insert";
        case PutMode::update: return "update";
    }
    return "upsert";
}

}  // namespace dueq::client
