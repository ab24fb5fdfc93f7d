#include "history.h"

#include <chrono>

#include "client/payload.h"

namespace dueq::chaos {

std::int64_t wall_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

bool definitely_not_applied(client::Code code) {
    switch (code) {
        case client::Code::not_leader:
        case client::Code::no_quorum:
        case client::Code::lease_mismatch:
        case client::Code::not_found:
        case client::Code::exists:
        case client::Code::bad_request:
        case client::Code::too_large:
        case client::Code::unauthorized:
            return true;
        default:
            return false;
    }
}

std::string payload_text(const std::string& msgpack) {
    auto json = client::payload_to_json(msgpack);
    if (!json) return "?";
    auto j = Json::parse(*json, nullptr, false);
    return j.is_string() ? j.get<std::string>() : *json;
}

History::History(const std::string& path) : out_(path, std::ios::app) {}

void History::write(Json event) {
    if (!event.contains("t")) event["t"] = wall_ms();
    const std::string line = event.dump(-1, ' ', false, Json::error_handler_t::replace);
    std::lock_guard lock(mu_);
    out_ << line << '\n';
    out_.flush();
}

Json invoke(int process, const char* f, const std::string& node) {
    return Json{{"type", "invoke"}, {"process", process}, {"f", f}, {"node", node}};
}

Json completion(const Json& inv, const client::Error* error) {
    Json e{{"process", inv["process"]}, {"f", inv["f"]}, {"node", inv["node"]}};
    if (inv.contains("key")) e["key"] = inv["key"];
    if (inv.contains("lease")) e["lease"] = inv["lease"];
    if (!error) {
        e["type"] = "ok";
    } else {
        e["type"] = definitely_not_applied(error->code) ? "fail" : "info";
        e["error"] = error->code_name;
    }
    return e;
}

}  // namespace dueq::chaos
