// A msgpack-c packer buffer that appends straight to a std::string.
//
// msgpack::sbuffer starts at 8 KiB: glibc serves a request that large from its large
// bins, and first merges every freed small chunk (malloc_consolidate), on each command or
// Raft message encoded; the encoding was then copied out into a string as well. Packing
// into the string the caller keeps does one allocation of the size asked for (reserve),
// and no copy.
#pragma once

#include <cstddef>
#include <string>

namespace dueq {

struct StringSink {
    std::string& out;
    void write(const char* data, std::size_t n) { out.append(data, n); }
};

}  // namespace dueq
