#include "queue/command.h"

namespace dueq::queue {

const char* to_string(Status s) {
    switch (s) {
        case Status::ready:
            return "ready";
        case Status::taken:
            return "taken";
        case Status::buried:
            return "buried";
        case Status::done:
            return "done";
    }
    return "unknown";
}

const char* to_string(Code c) {
    return wire::code_name(c).data();  // the names are string literals
}

}  // namespace dueq::queue
