// Failure messages of the simulator's checks.
#pragma once

#include <sstream>
#include <string>

namespace dueq::sim {

// Its arguments streamed into one string.
template <class... Args>
std::string cat(Args&&... args) {
    std::ostringstream os;
    (os << ... << args);
    return os.str();
}

}  // namespace dueq::sim
