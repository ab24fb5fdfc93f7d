// The backends' constructors and the helpers they share (internal to dueq-bench).
#pragma once

#include <msgpack.hpp>

#include <string>

#include "backend.h"
#include "client/credentials.h"
#include "stream.h"

namespace dueq::bench {

// How dueq connections are made from now on: TLS and the hello token
// (client/credentials.h). "" or why the files do not load.
std::string set_dueq_credentials(const client::Credentials& credentials);
std::shared_ptr<Connection> connect_dueq(boost::asio::io_context& io, const std::string& address,
                                         int timeout_ms);
std::shared_ptr<Connection> connect_tarantool(boost::asio::io_context& io,
                                              const std::string& address, int timeout_ms);
std::shared_ptr<Connection> connect_etcd(boost::asio::io_context& io, const std::string& address,
                                         int timeout_ms);

// A msgpack::packer target that appends to a std::string.
struct StringSink {
    std::string bytes;
    void write(const char* data, std::size_t size) { bytes.append(data, size); }
};

}  // namespace dueq::bench
