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
    switch (c) {
        case Code::ok:
            return "ok";
        case Code::bad_request:
            return "bad_request";
        case Code::not_found:
            return "not_found";
        case Code::exists:
            return "exists";
        case Code::lease_mismatch:
            return "lease_mismatch";
        case Code::not_leader:
            return "not_leader";
        case Code::no_quorum:
            return "no_quorum";
        case Code::too_large:
            return "too_large";
        case Code::timeout:
            return "timeout";
        case Code::unavailable:
            return "unavailable";
        case Code::unauthorized:
            return "unauthorized";
        case Code::internal:
            return "internal";
    }
    return "unknown";
}

}  // namespace dueq::queue
