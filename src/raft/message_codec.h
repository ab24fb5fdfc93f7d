// Bytes for a raft::Message, with msgpack-c: the peer transport (src/net) frames them.
//
// Layout (format 1), one msgpack array:
//   [1, type, from, to, term, index, log_term, commit, reject, hint_index, context,
//    entries: [[term, index, time, entry_type, data(bin)], ...],
//    snapshot: nil | [index, term, time, data(bin)]]
// A new field means a new format number; decode keeps reading the old ones.
//
// decode_message never trusts its input: sizes are capped before anything is
// allocated, every field's type and range is checked, and bad input yields
// Error::invalid, never a crash or an exception.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "raft/message.h"
#include "raft/status.h"

namespace dueq::raft {

std::string encode_message(const Message& m);

struct DecodeLimits {
    std::size_t max_entries = 1 << 20;   // entries in one append
    std::size_t max_bytes = 256u << 20;  // any single bin (entry data, snapshot)
};

Result<Message> decode_message(std::string_view bytes, const DecodeLimits& limits = {});

}  // namespace dueq::raft
