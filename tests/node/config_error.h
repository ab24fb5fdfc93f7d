// The message parse_config refuses a config with ("" if it accepts it).
#pragma once

#include <string>

#include "node/config.h"

namespace dueq::test {
inline std::string config_error(const std::string& toml) {
    try {
        node::parse_config(toml, "test.toml");
    } catch (const node::ConfigError& e) {
        return e.what();
    }
    return "";
}
}  // namespace dueq::test
