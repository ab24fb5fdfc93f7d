// Why: what a node does with the bytes of one peer connection before the Raft core sees
// them. The link cuts the stream into frames (4-byte big-endian length, then the
// payload: net/peer_link.h). The handshake comes first: the dialer's hello
// (net::decode_hello), then its proof (net::decode_proof). Each later frame starts with
// a kind byte: 'R' a Raft message (raft::decode_message, then raft::message_problem, the
// check before the core), 'S' a chunk of a snapshot stream (node::SnapshotTransfer::
// receive; a complete stream's records are loaded into a fresh store as
// Node::store_from does). Peers authenticate, but a corrupted stream or a broken member
// must still never crash a node (issue 10). A decoded hello, proof or message must
// encode back to what decodes to the same value.
#include <spdlog/spdlog.h>

#include <string>

#include "fuzz/fuzz_support.h"
#include "net/peer_handshake.h"
#include "node/snapshot_transfer.h"
#include "raft/message_check.h"
#include "raft/message_codec.h"
#include "storage/database.h"

namespace {

using namespace dueq;

constexpr std::uint64_t kFrom = 2, kSelf = 1;  // the input plays peer 2 talking to node 1

void hello(std::string_view frame) {
    if (frame.size() > net::kMaxPeerHelloBytes) return;  // the link closes before decoding
    const auto d = net::decode_hello(frame);
    if (!d.hello) {
        FUZZ_CHECK(!d.error.empty());
        return;
    }
    FUZZ_CHECK(d.hello->cluster_id.size() <= net::kMaxClusterIdBytes);
    FUZZ_CHECK(net::encode_hello(*d.hello) == frame);  // a fixed layout: exactly one encoding
}

void proof(std::string_view frame) {
    if (frame.size() > net::kMaxPeerHelloBytes) return;
    if (auto p = net::decode_proof(frame)) FUZZ_CHECK(net::encode_proof(*p) == frame);
}

void raft_message(std::string_view bytes) {
    auto m = raft::decode_message(bytes);
    if (!m) return;
    const std::string once = raft::encode_message(*m);
    auto again = raft::decode_message(once);
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(*again == *m);
    FUZZ_CHECK(raft::encode_message(*again) == once);
    (void)raft::message_problem(*m, kFrom, kSelf);
}

void snapshot_chunk(node::SnapshotTransfer& transfer, std::string_view chunk) {
    std::string problem;
    auto m = transfer.receive(kFrom, kSelf, chunk, problem);
    if (!m) return;
    FUZZ_CHECK(problem.empty());
    FUZZ_CHECK(m->type == raft::MessageType::snapshot && m->snapshot.has_value());
    FUZZ_CHECK(m->from == kFrom && m->to == kSelf);
    const storage::SnapshotInstall* records = transfer.received();
    FUZZ_CHECK(records != nullptr && records->meta == m->snapshot->meta);
    // As RaftIo::store_from: the store-wide record, then every task, into a fresh store; a
    // stream whose records do not load is discarded.
    queue::Store store;
    bool loads = storage::load_store_meta(store, records->store_meta_sealed);
    for (std::size_t i = 0; loads && i < records->tasks.size(); ++i)
        loads = storage::load_task_record(store, records->tasks[i].first, records->tasks[i].second);
    if (!loads) {
        transfer.discard_received();
        FUZZ_CHECK(transfer.received() == nullptr);
        return;
    }
    fuzz::check_store_round_trip(store);
    // The core accepts it (RaftShell::step_snapshot): its records wait for the install.
    transfer.accept_received();
    FUZZ_CHECK(transfer.received() == nullptr);
    FUZZ_CHECK(transfer.take_received(m->snapshot->meta).has_value());
}

}  // namespace

// SnapshotTransfer logs every stream it completes: millions of lines in a long run.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
    spdlog::set_level(spdlog::level::off);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::Reader in(fuzz::as_view(data, size));
    auto first = in.piece(fuzz::kPeerFrameLenBytes);
    if (!first) return 0;
    hello(*first);
    if (auto second = in.piece(fuzz::kPeerFrameLenBytes)) proof(*second);
    node::SnapshotTransfer transfer;
    while (auto frame = in.piece(fuzz::kPeerFrameLenBytes)) {
        if (frame->empty()) continue;  // a keep-alive
        if ((*frame)[0] == 'R')        // kRaftKind, node/replication.cpp
            raft_message(frame->substr(1));
        else if ((*frame)[0] == node::SnapshotTransfer::kKind)
            snapshot_chunk(transfer, *frame);
    }
    return 0;
}
