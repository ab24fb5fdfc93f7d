#include <stdexcept>

#include "backends.h"

namespace dueq::bench {

std::string_view backend_name(BackendKind kind) {
    switch (kind) {
        case BackendKind::dueq:
            return "dueq";
        case BackendKind::tarantool:
            return "tarantool";
        case BackendKind::etcd:
            return "etcd";
    }
    return "?";
}

std::shared_ptr<Connection> connect(BackendKind kind, boost::asio::io_context& io,
                                    const std::string& address, int timeout_ms) {
    switch (kind) {
        case BackendKind::dueq:
            return connect_dueq(io, address, timeout_ms);
        case BackendKind::tarantool:
            return connect_tarantool(io, address, timeout_ms);
        case BackendKind::etcd:
            return connect_etcd(io, address, timeout_ms);
    }
    throw std::logic_error("unknown backend");
}

}  // namespace dueq::bench
