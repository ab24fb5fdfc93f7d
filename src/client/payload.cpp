#include "client/payload.h"

#include <msgpack.hpp>
#include <nlohmann/json.hpp>

#include "client/codec.h"

namespace dueq::client {
namespace {

std::string base64(const char* data, std::size_t n) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((n + 2) / 3 * 4);
    for (std::size_t i = 0; i < n; i += 3) {
        uint32_t v = static_cast<uint8_t>(data[i]) << 16;
        if (i + 1 < n) v |= static_cast<uint8_t>(data[i + 1]) << 8;
        if (i + 2 < n) v |= static_cast<uint8_t>(data[i + 2]);
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
        out += i + 2 < n ? kAlphabet[v & 63] : '=';
    }
    return out;
}

nlohmann::json to_json(const msgpack::object& o) {
    using msgpack::type::object_type;
    switch (o.type) {
        case object_type::NIL: return nullptr;
        case object_type::BOOLEAN: return o.via.boolean;
        case object_type::POSITIVE_INTEGER: return o.via.u64;
        case object_type::NEGATIVE_INTEGER: return o.via.i64;
        case object_type::FLOAT32:
        case object_type::FLOAT64: return o.via.f64;
        case object_type::STR: return std::string(o.via.str.ptr, o.via.str.size);
        case object_type::BIN:
            return nlohmann::json{{"$bin", base64(o.via.bin.ptr, o.via.bin.size)}};
        case object_type::EXT:
            return nlohmann::json{{"$ext", o.via.ext.type()},
                                  {"data", base64(o.via.ext.data(), o.via.ext.size)}};
        case object_type::ARRAY: {
            auto arr = nlohmann::json::array();
            for (uint32_t i = 0; i < o.via.array.size; ++i) arr.push_back(to_json(o.via.array.ptr[i]));
            return arr;
        }
        case object_type::MAP: {
            auto obj = nlohmann::json::object();
            for (uint32_t i = 0; i < o.via.map.size; ++i) {
                const auto& kv = o.via.map.ptr[i];
                std::string key = kv.key.type == object_type::STR
                                      ? std::string(kv.key.via.str.ptr, kv.key.via.str.size)
                                      : to_json(kv.key).dump(-1, ' ', false,
                                                             nlohmann::json::error_handler_t::replace);
                obj[key] = to_json(kv.val);
            }
            return obj;
        }
    }
    return nullptr;
}

}  // namespace

Result<std::string> payload_from_json(std::string_view json) {
    auto parsed = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
    if (parsed.is_discarded()) {
        return Error(Code::bad_request, "payload is not valid JSON: " + std::string(json.substr(0, 80)));
    }
    std::vector<uint8_t> bytes = nlohmann::json::to_msgpack(parsed);
    return std::string(bytes.begin(), bytes.end());
}

Result<std::string> payload_to_json(std::string_view bytes, int indent) {
    Status st = check_msgpack_value(bytes, 64);
    if (!st.ok()) return st.error();
    try {
        auto handle = msgpack::unpack(bytes.data(), bytes.size());
        return to_json(handle.get()).dump(indent, ' ', false,
                                          nlohmann::json::error_handler_t::replace);
    } catch (const std::exception& e) {
        return Error(Code::bad_request, std::string("payload: ") + e.what());
    }
}

}  // namespace dueq::client
