// An invariant of the code, checked in every build (an assert is compiled out of release
// builds). When one fails the process cannot go on safely, and going on quietly (clamping
// a value, skipping an entry) would hide a lost or corrupted log: it throws
// InvariantBroken. dueqd stops with the message and exit status 70; the simulator reports
// the seed as failed.
#pragma once

#include <stdexcept>
#include <string>

namespace dueq {

struct InvariantBroken : std::logic_error {
    using std::logic_error::logic_error;
};

[[noreturn]] inline void invariant_broken(const char* condition, const std::string& why,
                                          const char* file, int line) {
    throw InvariantBroken(std::string("invariant broken at ") + file + ":" + std::to_string(line) +
                          ": " + condition + ": " + why);
}

}  // namespace dueq

// `why` is evaluated only when `condition` is false.
#define DUEQ_INVARIANT(condition, why)                                       \
    do {                                                                     \
        if (!(condition)) [[unlikely]]                                       \
            ::dueq::invariant_broken(#condition, (why), __FILE__, __LINE__); \
    } while (0)
