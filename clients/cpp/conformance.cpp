// The C++ client's driver of the conformance suite (clients/conformance/README.md):
//   DUEQ_SEEDS=host:port,... dueq-conformance-cpp SCENARIOS.json
// Each step goes through Client::async_raw, which follows redirects and reconnects as a
// typed call of the same op does.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iostream>
#include <sstream>
#include <thread>

#include <msgpack.hpp>
#include <nlohmann/json.hpp>

#include "client/client.h"

using Json = nlohmann::json;
using namespace dueq;

namespace {

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

Json substitute(const Json& v, const Json& saved, int i) {
    if (v.is_object()) {
        Json out = Json::object();
        for (auto it = v.begin(); it != v.end(); ++it)
            out[it.key()] = substitute(it.value(), saved, i);
        return out;
    }
    if (v.is_array()) {
        Json out = Json::array();
        for (const auto& x : v)
            out.push_back(substitute(x, saved, i));
        return out;
    }
    if (!v.is_string()) return v;
    std::string s = v.get<std::string>();
    if (s.rfind("$now", 0) == 0) return now_ms() + (s.size() > 4 ? std::stoll(s.substr(4)) : 0);
    if (s.rfind("${", 0) != 0 && !s.empty() && s[0] == '$') return saved.at(s.substr(1));
    for (auto at = s.find("${i}"); at != std::string::npos; at = s.find("${i}"))
        s.replace(at, 4, std::to_string(i));
    return s;
}

void pack(msgpack::packer<msgpack::sbuffer>& pk, const Json& v) {
    switch (v.type()) {
        case Json::value_t::object:
            pk.pack_map(uint32_t(v.size()));
            for (auto it = v.begin(); it != v.end(); ++it) {
                pk.pack(it.key());
                pack(pk, it.value());
            }
            break;
        case Json::value_t::array:
            pk.pack_array(uint32_t(v.size()));
            for (const auto& x : v)
                pack(pk, x);
            break;
        case Json::value_t::string:
            pk.pack(v.get<std::string>());
            break;
        case Json::value_t::boolean:
            pk.pack(v.get<bool>());
            break;
        case Json::value_t::number_integer:
            pk.pack(v.get<int64_t>());
            break;
        case Json::value_t::number_unsigned:
            pk.pack(v.get<uint64_t>());
            break;
        case Json::value_t::number_float:
            pk.pack(v.get<double>());
            break;
        default:
            pk.pack_nil();
    }
}

Json to_json(const msgpack::object& o) {
    switch (o.type) {
        case msgpack::type::MAP: {
            Json out = Json::object();
            for (uint32_t i = 0; i < o.via.map.size; ++i) {
                const auto& k = o.via.map.ptr[i].key;
                const std::string key = k.type == msgpack::type::STR
                                            ? std::string(k.via.str.ptr, k.via.str.size)
                                            : std::to_string(k.via.u64);
                out[key] = to_json(o.via.map.ptr[i].val);
            }
            return out;
        }
        case msgpack::type::ARRAY: {
            Json out = Json::array();
            for (uint32_t i = 0; i < o.via.array.size; ++i)
                out.push_back(to_json(o.via.array.ptr[i]));
            return out;
        }
        case msgpack::type::STR:
            return std::string(o.via.str.ptr, o.via.str.size);
        case msgpack::type::BIN:
            return std::string(o.via.bin.ptr, o.via.bin.size);
        case msgpack::type::BOOLEAN:
            return o.via.boolean;
        case msgpack::type::POSITIVE_INTEGER:
            return o.via.u64;
        case msgpack::type::NEGATIVE_INTEGER:
            return o.via.i64;
        case msgpack::type::FLOAT32:
        case msgpack::type::FLOAT64:
            return o.via.f64;
        default:
            return nullptr;
    }
}

bool matches(const Json& want, const Json& got) {
    if (want.is_object()) {
        if (!got.is_object()) return false;
        for (auto it = want.begin(); it != want.end(); ++it)
            if (!got.contains(it.key()) || !matches(it.value(), got.at(it.key()))) return false;
        return true;
    }
    if (want.is_array()) {
        if (!got.is_array() || got.size() != want.size()) return false;
        for (std::size_t i = 0; i < want.size(); ++i)
            if (!matches(want[i], got[i])) return false;
        return true;
    }
    if (want.is_number() && got.is_number()) return want.get<double>() == got.get<double>();
    return want == got;
}

Json at_path(Json v, const std::string& path) {
    std::stringstream ss(path);
    for (std::string part; std::getline(ss, part, '.');)
        v = v.is_array() ? v.at(std::stoul(part)) : v.at(part);
    return v;
}

struct Answer {
    bool ok = false;
    Json result;
    client::Error error;
};

Answer call(client::Client& c, const std::string& op, Json fields) {
    fields["op"] = op;
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pack(pk, fields);
    auto handle = msgpack::unpack(buf.data(), buf.size());
    const auto wait = std::chrono::milliseconds(fields.value("timeout_ms", 0));
    std::promise<client::Result<client::ResponseFrame>> p;
    auto f = p.get_future();
    c.async_raw(
        op, handle.get(), [&p](auto r) { p.set_value(std::move(r)); }, {}, wait);
    auto r = f.get();
    Answer a;
    if (!r.ok()) {
        a.error = r.error();
        return a;
    }
    if (!r->ok) {
        a.error = r->error;
        return a;
    }
    a.ok = true;
    a.result = to_json(*r->map);
    a.result.erase("id"), a.result.erase("ok");
    return a;
}

std::string outcome_of(const Answer& a) {
    if (a.ok) return "applied";
    const std::string& code = a.error.code_name;
    if (a.error.maybe_applied || code == "timeout" || code == "internal") return "unknown";
    return "not_applied";
}

std::string run_step(client::Client& c, const Json& step, Json& saved, int i) {
    const std::string op = step.at("op");
    const Json fields = substitute(step.value("fields", Json::object()), saved, i);
    const Json expect = step.value("expect", Json{{"ok", true}});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    Answer a;
    for (;;) {
        a = call(c, op, fields);
        const std::string& code = a.error.code_name;
        const bool passing = code == "no_quorum" || code == "unavailable" || code == "not_leader";
        if (a.ok || !passing || a.error.maybe_applied || expect.value("code", Json()) == Json(code) ||
            std::chrono::steady_clock::now() > deadline)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (expect.contains("outcome")) {
        const std::string got = outcome_of(a);
        return got == expect["outcome"].get<std::string>() ? "" : "outcome " + got;
    }
    if (expect.value("ok", true)) {
        if (!a.ok) return op + ": " + a.error.to_string();
        if (expect.contains("result") && !matches(expect["result"], a.result))
            return op + ": answer " + a.result.dump() + " does not contain " +
                   expect["result"].dump();
        const Json lengths = expect.value("result_len", Json::object());
        for (auto& [name, n] : lengths.items())
            if (a.result.value(name, Json::array()).size() != n.get<std::size_t>())
                return op + ": " + name + " has the wrong length";
        const Json save = step.value("save", Json::object());
        for (auto& [var, path] : save.items())
            saved[var] = at_path(a.result, path.get<std::string>());
        return "";
    }
    Json codes = expect.at("code");
    if (!codes.is_array()) codes = Json::array({codes});
    if (a.ok) return op + ": ok " + a.result.dump() + ", wanted " + codes.dump();
    for (const auto& code : codes)
        if (code == Json(a.error.code_name)) return "";
    return op + ": " + a.error.code_name + ", wanted " + codes.dump();
}

std::string run_scenario(client::Client& c, const Json& scenario) {
    Json saved = Json::object();
    int n = 0;
    for (const auto& step : scenario.at("steps")) {
        std::string why;
        if (step.contains("action")) {
            std::cout << "ACTION " << step["action"].get<std::string>() << std::endl;
            std::string line;
            std::getline(std::cin, line);
            if (line != "DONE") why = "action: " + line;
        } else if (step.contains("sleep_ms")) {
            std::this_thread::sleep_for(std::chrono::milliseconds(step["sleep_ms"].get<int>()));
        } else {
            for (int i = 0; i < step.value("repeat", 1) && why.empty(); ++i)
                why = run_step(c, step, saved, i);
        }
        if (!why.empty()) return "step " + std::to_string(n) + ": " + why;
        ++n;
    }
    return "";
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2 || !std::getenv("DUEQ_SEEDS")) {
        std::cerr << "usage: DUEQ_SEEDS=host:port,... dueq-conformance-cpp SCENARIOS.json\n";
        return 2;
    }
    std::ifstream in(argv[1]);
    const Json doc = Json::parse(in);
    client::ClientOptions opts;
    std::stringstream seeds(std::getenv("DUEQ_SEEDS"));
    for (std::string s; std::getline(seeds, s, ',');)
        opts.seeds.push_back(s);
    opts.call_timeout = std::chrono::seconds(5);
    client::Client c(opts);
    for (const auto& s : doc.at("scenarios")) {
        std::string why;
        try {
            why = run_scenario(c, s);
        } catch (const std::exception& e) {
            why = std::string("driver: ") + e.what();
        }
        const std::string name = s.at("name");
        std::cout << (why.empty() ? "PASS " + name : "FAIL " + name + ": " + why) << std::endl;
    }
    return 0;
}
