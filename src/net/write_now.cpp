#include "net/write_now.h"

#include <boost/asio/error.hpp>

#include <algorithm>

namespace dueq::net {

namespace asio = boost::asio;

namespace {
// A stretch of the caller's buffers, as a buffer sequence that copies none of them.
struct BufferRange {
    using value_type = asio::const_buffer;
    using const_iterator = std::vector<asio::const_buffer>::const_iterator;
    const_iterator first, last;
    const_iterator begin() const { return first; }
    const_iterator end() const { return last; }
};
}  // namespace

bool write_now(asio::ip::tcp::socket& socket, std::vector<asio::const_buffer>& bufs,
               boost::system::error_code& ec) {
    ec = {};
    std::size_t done = 0;  // buffers written whole
    bool full = false;
    while (done < bufs.size() && !full) {
        // One sendmsg takes at most 64 buffers (Asio's limit); the loop sends the rest.
        const std::size_t stop = std::min(bufs.size(), done + 64);
        std::size_t offered = 0;
        for (std::size_t i = done; i < stop; ++i)
            offered += bufs[i].size();
        std::size_t n = socket.write_some(
            BufferRange{bufs.begin() + std::ptrdiff_t(done), bufs.begin() + std::ptrdiff_t(stop)},
            ec);
        if (ec == asio::error::would_block || ec == asio::error::try_again) {
            ec = {};
            break;
        }
        if (ec) return false;
        full = n < offered;  // the socket's buffer is full: another try would only fail
        for (; done < stop && n >= bufs[done].size(); ++done)
            n -= bufs[done].size();
        if (n > 0) bufs[done] += n;  // done < stop: n never exceeds what was offered
    }
    bufs.erase(bufs.begin(), bufs.begin() + std::ptrdiff_t(done));
    return true;
}

}  // namespace dueq::net
