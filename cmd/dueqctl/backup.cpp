// dueqctl backup: a consistent copy of one node's tasks in a file (the `backup` op, the
// file of storage/backup_file.h), which `dueqd --restore` seeds a fresh data dir from.
// docs/operations.md, "Backing up", says what a backup holds and what it does not.
#include <chrono>
#include <filesystem>
#include <iostream>

#include "client/time_spec.h"
#include "command_util.h"
#include "context.h"
#include "output.h"
#include "storage/backup_file.h"

namespace dueq::dueqctl {

namespace {

struct BackupArgs {
    std::string file;
    bool force = false, quiet = false;
};

std::string mib(std::uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
    return buf;
}

std::string fmt_seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f s", s);
    return buf;
}

// The file is written as FILE.partial and renamed once complete and synced.
int run_backup(Context& ctx, const BackupArgs& a) {
    if (std::filesystem::exists(a.file) && !a.force) {
        std::cerr << "dueqctl: " << a.file << " exists; pass --force to replace it\n";
        return kExitUsage;
    }
    // One node, one connection: the node streams the chunks of a backup only on the
    // connection that started it.
    auto opts = ctx.client_options({ctx.addrs.front()});
    opts.max_frame_bytes = std::size_t(storage::kMaxBackupChunkBytes) + (1 << 20);
    client::Client node(std::move(opts));
    const auto started = std::chrono::steady_clock::now();
    auto seconds = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    };
    storage::BackupFileWriter out;
    client::BackupRequest req;
    storage::BackupHeader header;
    auto last_progress = started;
    for (;;) {
        auto r = node.backup(req, ctx.call_options());
        if (!r.ok()) {
            out.abandon();
            return report(r.error());
        }
        if (req.backup == 0) {
            header =
                storage::BackupHeader{r->index,   r->term,    r->time,   client::wall_clock_ms(),
                                      r->cluster, r->node_id, r->version};
            if (!out.open(a.file, header)) {
                std::cerr << "dueqctl: " << out.error() << '\n';
                return kExitRefused;
            }
        } else if (r->backup != req.backup || r->seq != req.seq || r->index != header.index) {
            out.abandon();
            std::cerr << "dueqctl: the node answered chunk " << r->seq << " of backup " << r->backup
                      << " at index " << r->index << " when asked for chunk " << req.seq
                      << " of backup " << req.backup << "; nothing was kept\n";
            return kExitRefused;
        }
        // The last chunk may hold nothing: the node learns the view has ended only when it
        // reads past its end.
        if ((req.backup == 0 || !r->data.empty()) && !out.chunk(r->data)) {
            out.abandon();
            std::cerr << "dueqctl: " << out.error() << '\n';
            return kExitRefused;
        }
        if (r->last) break;
        req.backup = r->backup;
        req.seq = r->seq + 1;
        const auto now = std::chrono::steady_clock::now();
        if (!a.quiet && now - last_progress >= std::chrono::seconds(1)) {
            last_progress = now;
            std::cerr << "backup: " << out.tasks() << " tasks, " << mib(out.bytes()) << ", "
                      << int(seconds()) << " s\n";
        }
    }
    if (!out.finish()) {
        std::cerr << "dueqctl: " << out.error() << '\n';
        return kExitRefused;
    }
    const double took = seconds();
    if (ctx.json) {
        print_json({{"file", a.file},
                    {"tasks", out.tasks()},
                    {"bytes", out.bytes()},
                    {"index", header.index},
                    {"term", header.term},
                    {"cluster", header.cluster},
                    {"node", header.node},
                    {"version", header.version},
                    {"seconds", took}});
        return 0;
    }
    print_fields(
        {{"file", a.file},
         {"tasks", std::to_string(out.tasks())},
         {"size", mib(out.bytes())},
         {"index", std::to_string(header.index) + " (term " + std::to_string(header.term) + ")"},
         {"cluster", header.cluster},
         {"node", header.node + " (" + header.version + ")"},
         {"took", fmt_seconds(took)}});
    return 0;
}

}  // namespace

void add_backup_command(CLI::App& app, Context& ctx) {
    auto a = std::make_shared<BackupArgs>();
    auto* cmd = command(
        app, ctx, "backup",
        "Copy one node's tasks, as of one applied index, into a file.\n\n"
        "The node streams a consistent view of its applied state while it goes on serving; "
        "the file is checksummed and names the index, the term and the cluster id. It is "
        "written as FILE.partial and renamed to FILE once complete. The first --addr is the "
        "node backed up: a follower keeps the work off the leader. A backup holds no "
        "overlay of autonomous mode and no sessions. dueqd --restore FILE --config CONF "
        "seeds a fresh data dir from it (docs/operations.md, \"Backing up\").",
        "  dueqctl --addr 10.0.0.2:7700 backup /backups/dueq-$(date +%F).bak\n"
        "  dueqctl backup tokens.bak --force --json\n",
        [&ctx, a] { return run_backup(ctx, *a); });
    cmd->add_option("file", a->file, "Where to write the backup")->required();
    cmd->add_flag("--force", a->force, "Replace FILE if it exists");
    cmd->add_flag("--quiet,-q", a->quiet, "No progress lines on stderr");
}

}  // namespace dueq::dueqctl
