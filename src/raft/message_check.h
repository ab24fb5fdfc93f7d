// A sanity check of a Raft message that came from the network, before the core sees it.
//
// The core trusts its peers to follow the protocol (Raft is not Byzantine-tolerant), and
// some of its arithmetic relies on that: an append whose entries are not numbered
// prev+1, prev+2, ... sends maybe_append past the end of its vector. Peers are
// authenticated (net/peer_handshake.h), so a bad message means a bug, a corrupted
// stream or a member that lost its mind; either way it is dropped, not stepped.
#pragma once

#include <string>

#include "raft/message.h"

namespace dueq::raft {

// Indexes and terms beyond this are refused: no real log gets near it, and it leaves
// room for index + count arithmetic without overflow.
inline constexpr std::uint64_t kMaxSaneIndex = std::uint64_t(1) << 62;

// Empty when `m`, received on the link from `from` by node `self`, may be stepped;
// otherwise why not (for the log). Snapshot messages never arrive as messages: they
// are streamed (node/snapshot_transfer.h), so the message path refuses them.
std::string message_problem(const Message& m, NodeId from, NodeId self);

}  // namespace dueq::raft
