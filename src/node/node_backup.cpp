// The `backup` op on a node (docs/operations.md, "Backing up"): a consistent copy of the
// applied state, streamed a chunk per request from a checkpoint (backups.h).
#include <spdlog/spdlog.h>

#include "node/node.h"

namespace dueq::node {

using queue::Code;

namespace {
BackupReply reply_of(const Backups::Chunk& c, const Config& config) {
    return BackupReply{c.backup,          c.seq,          c.meta.index, c.meta.term, c.meta.time,
                       config.cluster_id, config.node_id, c.data,       c.last};
}
}  // namespace

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::BackupChunk& req) {
    if (req.backup != 0) {
        std::string problem;
        auto chunk = backups_.next(req.backup, conn->session, req.seq, now_ms(), problem);
        if (!chunk) {
            send_error(conn, id, Code::bad_request, problem);
            return Code::bad_request;
        }
        if (chunk->last)
            spdlog::info("backup {} at index {} sent to the end ({} chunks)", chunk->backup,
                         chunk->meta.index, chunk->seq + 1);
        conn->send(backup_reply(id, reply_of(*chunk, config_)));
        return Code::ok;
    }
    if (!backups_.reserve()) {
        send_error(conn, id, Code::unavailable,
                   std::to_string(limits::kMaxBackups) +
                       " backups are running on this node; retry once one has ended");
        return Code::unavailable;
    }
    // The applied state as it is now, unless this node serves autonomously: its store then
    // holds writes the majority has not seen, and the view of what was applied before is
    // the log's starting snapshot.
    raft::SnapshotMeta at;
    if (!shell_->fork()) {
        shell_->write_applied_state();
        at = shell_->applied();
    }
    std::weak_ptr<net::Connection> weak = conn;
    const std::uint64_t owner = conn->session;
    raft_io_->backup_checkpoint(at, [this, weak, owner, id](auto cp) {
        auto c = weak.lock();
        if (!cp || !c || !c->open() || stopped_) {
            backups_.unreserve();
            if (c && !cp)
                send_error(c, id, Code::unavailable,
                           "this node has no consistent view to back up yet; retry");
            return;
        }
        std::string problem;
        auto chunk = backups_.begin(std::move(cp), owner, now_ms(), problem);
        if (!chunk) return send_error(c, id, Code::internal, problem);
        spdlog::info("backup {} started at index {} (term {})", chunk->backup, chunk->meta.index,
                     chunk->meta.term);
        c->send(backup_reply(id, reply_of(*chunk, config_)));
    });
    return Code::ok;
}

}  // namespace dueq::node
