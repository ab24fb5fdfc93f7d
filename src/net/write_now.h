// Writing to a non-blocking socket without going through the event loop.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <vector>

namespace dueq::net {

// Writes as much of `bufs` as the socket takes at once and drops what went out from the
// front of `bufs` (a buffer written in part is cut to its rest). The socket must be
// non-blocking. Returns false on an error other than a full socket buffer, with `ec` set.
//
// An answer usually fits the socket's buffer whole. Writing it here, where async_write
// would make the same system call and then queue its completion for another turn of the
// event loop, saves that turn; async_write is left for the rest once the buffer is full.
bool write_now(boost::asio::ip::tcp::socket& socket, std::vector<boost::asio::const_buffer>& bufs,
               boost::system::error_code& ec);

}  // namespace dueq::net
