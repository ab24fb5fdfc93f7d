#include "node/json_log.h"

#include <spdlog/pattern_formatter.h>

namespace dueq::node {

namespace {

void append_escaped(spdlog::memory_buf_t& dest, std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            dest.push_back('\\');
            dest.push_back(char(c));
        } else if (c == '\n') {
            dest.append(std::string_view("\\n"));
        } else if (c < 0x20) {
            const char esc[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
            dest.append(esc, esc + sizeof esc);
        } else {
            dest.push_back(char(c));
        }
    }
}

// %j: the message, escaped for a JSON string.
class EscapedMessage final : public spdlog::custom_flag_formatter {
  public:
    void format(const spdlog::details::log_msg& msg, const std::tm&,
                spdlog::memory_buf_t& dest) override {
        append_escaped(dest, std::string_view(msg.payload.data(), msg.payload.size()));
    }
    std::unique_ptr<custom_flag_formatter> clone() const override {
        return std::make_unique<EscapedMessage>();
    }
};

}  // namespace

std::unique_ptr<spdlog::formatter> json_log_formatter(const std::string& node_id) {
    spdlog::memory_buf_t id;
    append_escaped(id, node_id);
    auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    f->add_flag<EscapedMessage>('j');
    std::string literal_id;  // '%' starts a flag in a pattern
    for (char c : std::string_view(id.data(), id.size()))
        literal_id += c == '%' ? std::string("%%") : std::string(1, c);
    f->set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","node":")" + literal_id +
                   R"(","msg":"%j"})");
    return f;
}

}  // namespace dueq::node
