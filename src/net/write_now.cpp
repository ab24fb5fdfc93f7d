#include "net/write_now.h"

#include <boost/asio/error.hpp>

#include <algorithm>

#include "net/buffer_view.h"

namespace dueq::net {

namespace asio = boost::asio;

bool write_now(asio::ip::tcp::socket& socket, std::vector<asio::const_buffer>& bufs,
               boost::system::error_code& ec) {
    ec = {};
    std::size_t done = 0;  // buffers written whole
    while (done < bufs.size()) {
        // One sendmsg takes at most 64 buffers (Asio's limit); the loop sends the rest.
        const std::size_t stop = std::min(bufs.size(), done + 64);
        std::size_t offered = 0;
        for (std::size_t i = done; i < stop; ++i)
            offered += bufs[i].size();
        std::size_t n = socket.write_some(
            BufferView{bufs.begin() + std::ptrdiff_t(done), bufs.begin() + std::ptrdiff_t(stop)},
            ec);
        if (ec == asio::error::would_block || ec == asio::error::try_again) {
            ec = {};
            break;
        }
        if (ec) return false;
        const bool full = n < offered;  // another try would only fail
        for (; done < stop && n >= bufs[done].size(); ++done)
            n -= bufs[done].size();
        if (n > 0) bufs[done] += n;  // done < stop: n never exceeds what was offered
        if (full) break;
    }
    bufs.erase(bufs.begin(), bufs.begin() + std::ptrdiff_t(done));
    return true;
}

}  // namespace dueq::net
