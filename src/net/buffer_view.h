// A buffer sequence that refers to a stretch of a vector of buffers its owner keeps.
// async_write copies the sequence it is given into its operation: a std::vector would be
// copied (an allocation per write), this two iterators. The owner must leave the vector
// alone until the write completes.
#pragma once

#include <vector>

#include <boost/asio/buffer.hpp>

namespace dueq::net {

struct BufferView {
    using value_type = boost::asio::const_buffer;
    using const_iterator = std::vector<boost::asio::const_buffer>::const_iterator;
    const_iterator first, last;

    // All of `buffers`.
    explicit BufferView(const std::vector<boost::asio::const_buffer>* buffers)
        : first(buffers->begin()), last(buffers->end()) {}
    BufferView(const_iterator from, const_iterator to) : first(from), last(to) {}
    const_iterator begin() const { return first; }
    const_iterator end() const { return last; }
};

}  // namespace dueq::net
