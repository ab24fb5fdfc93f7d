// One HTTP GET with a deadline (Boost.Beast): how a node's /cluster asks the other
// members for their /status, over HTTPS when their admin serves it. Runs on the given
// io_context; `done` is called exactly once, on that context.
#pragma once

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "net/tls.h"

namespace dueq::admin {

struct HttpGetResult {
    bool ok = false;    // a 200 answer arrived in time
    std::string body;   // when ok
    std::string error;  // when not: what went wrong
};

// `address` is host:port. Answers over 4 MiB are refused. With `tls` (a client context) the
// request goes over TLS, and the server's certificate must verify against its CA file.
void http_get(boost::asio::io_context& io, const std::string& address, const std::string& path,
              std::chrono::milliseconds deadline, std::function<void(HttpGetResult)> done,
              std::shared_ptr<const net::TlsContext> tls = nullptr);

}  // namespace dueq::admin
