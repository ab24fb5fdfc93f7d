// A buffer sequence that refers to a vector of buffers its owner keeps. async_write copies
// the sequence it is given into its operation: a std::vector would be copied (an
// allocation per write), this two pointers. The owner must leave the vector alone until
// the write completes.
#pragma once

#include <vector>

#include <boost/asio/buffer.hpp>

namespace dueq::net {

struct BufferView {
    using value_type = boost::asio::const_buffer;
    using const_iterator = std::vector<boost::asio::const_buffer>::const_iterator;
    const std::vector<boost::asio::const_buffer>* buffers;
    const_iterator begin() const { return buffers->begin(); }
    const_iterator end() const { return buffers->end(); }
};

}  // namespace dueq::net
