#include "output.h"

#include <algorithm>
#include <iostream>

#include "client/payload.h"
#include "context.h"
#include "client/time_spec.h"

namespace dueq::dueqctl {

void Table::print() const {
    std::vector<std::size_t> width(header_.size(), 0);
    auto measure = [&](const std::vector<std::string>& row) {
        for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
            width[i] = std::max(width[i], row[i].size());
        }
    };
    measure(header_);
    for (const auto& row : rows_) measure(row);
    auto emit = [&](const std::vector<std::string>& row) {
        std::string line;
        for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
            line += row[i];
            if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
        }
        std::cout << line << '\n';
    };
    emit(header_);
    for (const auto& row : rows_) emit(row);
}

void print_fields(const std::vector<std::pair<std::string, std::string>>& fields) {
    std::size_t width = 0;
    for (const auto& [k, v] : fields) width = std::max(width, k.size());
    for (const auto& [k, v] : fields) {
        std::cout << k << std::string(width - k.size() + 2, ' ') << v << '\n';
    }
}

Json payload_json(const std::string& msgpack) {
    auto text = client::payload_to_json(msgpack);
    if (!text.ok()) return "<" + text.error().message + ">";
    return Json::parse(*text, nullptr, false);
}

std::string payload_text(const std::string& msgpack, std::size_t max_chars) {
    auto text = client::payload_to_json(msgpack);
    std::string s = text.ok() ? *text : "<" + text.error().message + ">";
    if (max_chars > 3 && s.size() > max_chars) s = s.substr(0, max_chars - 3) + "...";
    return s;
}

std::string when(int64_t time_ms, int64_t now_ms) {
    std::string out = client::format_time_ms(time_ms);
    const int64_t delta = time_ms - now_ms;
    if (delta >= 0) {
        out += " (in " + client::format_duration_ms(delta) + ")";
    } else {
        out += " (" + client::format_duration_ms(-delta) + " ago)";
    }
    return out;
}

int report(const client::Error& error) {
    std::cerr << "dueqctl: " << error.to_string() << '\n';
    using client::Code;
    if (error.unreachable) return kExitCannotConnect;
    if (error.code == Code::not_found) return kExitNotFound;
    if (error.code == Code::timeout || error.maybe_applied) return kExitUnknown;
    if (error.code == Code::not_leader || error.code == Code::no_quorum ||
        error.code == Code::unavailable || error.code == Code::store_full ||
        error.code == Code::moving)
        return kExitNotApplied;
    return kExitRefused;
}

namespace {
bool json_lines = false;
}  // namespace

void set_json_lines(bool on) {
    json_lines = on;
}

void print_json(const Json& j) {
    auto line = [](const Json& v) {
        std::cout << v.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
    };
    if (json_lines && j.is_object()) {
        const Json* list = nullptr;
        std::size_t arrays = 0;
        for (const auto& [k, v] : j.items())
            if (v.is_array()) ++arrays, list = &v;
        if (arrays == 1) {
            for (const auto& item : *list)
                line(item);
            return;
        }
    }
    line(j);
}

}  // namespace dueq::dueqctl
