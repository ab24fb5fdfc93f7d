#include <array>
#include <utility>

#include "client/messages.h"
#include "client/status.h"

namespace dueq::client {

std::string_view code_name(Code code) {
    return wire::code_name(code);
}

Code code_from_name(std::string_view name) {
    return wire::code_from_name(name);
}

std::string Error::to_string() const {
    std::string out = code_name.empty() ? std::string(client::code_name(code)) : code_name;
    if (!message.empty()) out += ": " + message;
    if (!leader.empty()) out += " (leader " + leader + ")";
    return out;
}

std::string_view put_mode_name(PutMode mode) {
    return wire::kPutModes.at(static_cast<std::size_t>(mode));  // in PutMode's order
}

}  // namespace dueq::client
