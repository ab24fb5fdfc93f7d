// An Asio SSL context over a TlsContext's SSL_CTX, for the code that uses Asio's and Beast's
// SSL streams (the client library, the HTTP admin) rather than TlsSession.
#pragma once

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <openssl/ssl.h>
#include <boost/asio/ssl/context.hpp>

#include <memory>

#include "net/tls.h"

namespace dueq::net {

inline std::shared_ptr<boost::asio::ssl::context> asio_context(const TlsContext& ctx) {
    // Asio's context frees the SSL_CTX it wraps: it gets a reference of its own.
    SSL_CTX_up_ref(ctx.native());
    return std::make_shared<boost::asio::ssl::context>(ctx.native());
}

}  // namespace dueq::net
