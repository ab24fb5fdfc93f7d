// Writes the seed corpora of the fuzz targets, fuzz/corpus/<target>/<seed>, with the
// project's own encoders, so every seed is a valid input of today's formats and the
// fuzzer starts from deep inside each decoder. Deterministic: the same code writes the
// same files. Run it again when a format changes (fuzz/run.sh --make-corpus).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "client/codec.h"
#include "fuzz/fuzz_support.h"
#include "net/peer_handshake.h"
#include "node/snapshot_transfer.h"
#include "queue/command_codec.h"
#include "queue/store.h"
#include "raft/message_codec.h"
#include "storage/database.h"

namespace {

using namespace dueq;
namespace fs = std::filesystem;

fs::path root;
int written = 0;

void write(const std::string& target, const std::string& name, const std::string& bytes) {
    const fs::path dir = root / target;
    fs::create_directories(dir);
    std::ofstream f(dir / name, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), std::streamsize(bytes.size()));
    if (!f) {
        std::fprintf(stderr, "make_corpus: cannot write %s\n", (dir / name).c_str());
        std::exit(1);
    }
    ++written;
}

constexpr queue::Millis kT0 = 1'700'000'000'000;
const std::string kPayload =
    "\x82\xa5token\xa3"
    "abc\xa3ttl\xcd\x0e\x10";  // {"token":"abc","ttl":3600}

// ---------------------------------------------------------------- client requests

template <class Req>
void request(const std::string& name, const Req& req, std::uint64_t id) {
    auto frame = client::encode_request(req, id);
    if (!frame) {
        std::fprintf(stderr, "make_corpus: request %s: %s\n", name.c_str(),
                     frame.error().message.c_str());
        std::exit(1);
    }
    write("request", name, frame->substr(client::kFrameHeaderBytes));
}

void requests() {
    request("ping", client::PingRequest{}, 1);
    request("hello", client::HelloRequest{.session = 42, .token = "secret-token"}, 2);
    request("declare", client::DeclareRequest{"tokens", 500, 3000, 5, 3'600'000, 0.2}, 3);
    request("put",
            client::PutRequest{"tokens", "token-0001", kPayload, kT0, client::PutMode::insert}, 4);
    request("put-bin-key",
            client::PutRequest{"tokens", std::string("k\xff\x00\x01", 4), "\xc0", {}, {}}, 5);
    request("get", client::GetRequest{"tokens", "token-0001", "leader"}, 6);
    request("delete", client::DeleteRequest{"tokens", "token-0001"}, 7);
    request("take", client::TakeRequest{"tokens", 10, 5000, 30'000, false}, 8);
    request("touch", client::TouchRequest{"tokens", "token-0001", 7, 60'000}, 9);
    request("ack", client::AckRequest{"tokens", "token-0001", 7, kPayload, kT0 + 3'600'000}, 10);
    request("ack-done", client::AckRequest{"tokens", "token-0001", 7, {}, {}}, 11);
    request("release", client::ReleaseRequest{"tokens", "token-0001", 7, 1000}, 12);
    request("bury", client::BuryRequest{"tokens", "token-0001", 7}, 13);
    request("kick", client::KickRequest{"tokens", 100}, 14);
    request("stats", client::StatsRequest{"tokens"}, 15);
    request("status", client::StatusRequest{}, 16);
    request("kick-key", client::KickRequest{"tokens", 1, "token-0001"}, 17);
    request("list", client::ListRequest{"tokens", "late", 100, "token-0001", kT0, "leader"}, 18);
    request("backup-start", client::BackupRequest{}, 19);
    request("backup-chunk", client::BackupRequest{41, 3}, 20);
}

// ---------------------------------------------------------------- commands

// A bucket move's begin, and a chunk carrying one task record, as a source shard logs them.
queue::MoveBucket move_step(shard::MoveStep step, std::string peer, bool with_record) {
    queue::MoveBucket m;
    m.step.step = step;
    m.step.bucket = 872;
    m.step.gen = 1;
    m.step.peer = std::move(peer);
    m.step.last = with_record;
    m.bucket_count = 1024;
    // fnv1a64("tokens" 0x00 "token-1") is in bucket 872 of 1024 (docs/sharding.md).
    if (with_record) {
        queue::Store s;
        s.apply(queue::Put{"tokens", "token-1", kPayload, kT0, queue::PutMode::upsert}, kT0);
        s.bucket_records(872, 1024,
                         [&](std::string_view q, std::string_view k, std::string_view r) {
                             m.records.push_back({std::string(q), std::string(k), std::string(r)});
                         });
    }
    return m;
}

std::map<std::string, queue::Command> commands() {
    using namespace queue;
    return {
        {"move-begin", move_step(shard::MoveStep::begin, "b", false)},
        {"move-chunk", move_step(shard::MoveStep::chunk, "a", true)},
        {"declare", Declare{"tokens", 500, 3000, 3'600'000, 5, 0.2}},
        {"declare-empty", Declare{"tokens", {}, {}, {}, {}, {}}},
        {"put", Put{"tokens", "token-0001", kPayload, kT0, PutMode::upsert}},
        {"put-insert-now", Put{"jobs", std::string("\x00\xff", 2), "\x90", {}, PutMode::insert}},
        {"put-update", Put{"tokens", "token-0002", "\xc3", kT0 - 5, PutMode::update}},
        {"delete", Delete{"tokens", "token-0001"}},
        {"take", Take{"tokens", 10, 30'000, 99, true}},
        {"take-default-ttr", Take{"jobs", 1, {}, 0, false}},
        {"touch", Touch{"tokens", "token-0001", 7, 60'000}},
        {"ack", Ack{"tokens", "token-0001", 7, kPayload, kT0 + 3'600'000}},
        {"ack-done", Ack{"tokens", "token-0001", 7, {}, {}}},
        {"release", Release{"tokens", "token-0001", 7, 1000}},
        {"bury", Bury{"tokens", "token-0001", 7}},
        {"kick", Kick{"tokens", 100}},
        {"kick-key", Kick{"tokens", 1, "token-0001"}},
        {"release-session", ReleaseSession{99}},
        {"advance", Advance{}},
    };
}

// ---------------------------------------------------------------- a store with every task state

struct Persisted {
    std::string meta;                                                      // encode_meta
    std::vector<std::tuple<std::string, std::string, std::string>> tasks;  // queue, key, encoded
};

Persisted store_state() {
    using namespace queue;
    Store s;
    auto apply = [&](const Command& c, Millis at) {
        auto r = s.apply(c, at);
        if (!r.ok()) {
            std::fprintf(stderr, "make_corpus: store refused a command: %s\n", r.message.c_str());
            std::exit(1);
        }
        return r;
    };
    apply(Declare{"tokens", 500, 3000, {}, 3, 0.2}, kT0);
    apply(Put{"tokens", "due", kPayload, kT0 - 10, PutMode::upsert}, kT0);
    apply(Put{"tokens", "later", kPayload, kT0 + 60'000, PutMode::upsert}, kT0);
    apply(Put{"tokens", std::string("bin\xff", 4), "\xc0", kT0 + 1, PutMode::insert}, kT0);
    const auto taken = apply(Take{"tokens", 1, 30'000, 7, true}, kT0 + 1);  // "due" taken
    apply(Put{"jobs", "buried", "\x01", kT0, PutMode::upsert}, kT0 + 2);
    apply(Put{"jobs", "done", "\x02", kT0, PutMode::upsert}, kT0 + 2);
    apply(Put{"jobs", "delayed", "\x03", kT0, PutMode::upsert}, kT0 + 2);
    const auto jobs = apply(Take{"jobs", 3, 10'000, 8, false}, kT0 + 3);
    for (const auto& t : jobs.tasks) {
        if (t.key == "buried") apply(Bury{"jobs", t.key, t.lease}, kT0 + 4);
        if (t.key == "done") apply(Ack{"jobs", t.key, t.lease, {}, {}}, kT0 + 4);
        if (t.key == "delayed") apply(Release{"jobs", t.key, t.lease, 50'000}, kT0 + 4);
    }
    if (taken.tasks.size() != 1 || jobs.tasks.size() != 3) {
        std::fprintf(stderr, "make_corpus: the store handed out unexpected tasks\n");
        std::exit(1);
    }
    Persisted p;
    s.for_each_task([&](std::string_view q, std::string_view k, std::string_view t) {
        p.tasks.emplace_back(q, k, t);
    });
    p.meta = s.encode_meta();
    return p;
}

// ---------------------------------------------------------------- peer links

std::string frame(std::string_view payload) {
    return fuzz::piece(payload, fuzz::kPeerFrameLenBytes);
}

// The dialer's half of a handshake: its hello, then its proof over both hellos.
std::string handshake() {
    net::PeerHello dialer{"dueq-loopback", 0x1234'5678'9abc'def0, 2, 1, 0x5eed};
    net::PeerHello acceptor{"dueq-loopback", 0x1234'5678'9abc'def0, 1, 2, 0xacce};
    for (std::size_t i = 0; i < dialer.nonce.size(); ++i) {
        dialer.nonce[i] = static_cast<unsigned char>(i);
        acceptor.nonce[i] = static_cast<unsigned char>(0xf0 + i);
    }
    const std::string d = net::encode_hello(dialer), a = net::encode_hello(acceptor);
    const auto proof = net::handshake_proof("fuzz-secret", net::HandshakeRole::dialer, d, a);
    return frame(d) + frame(net::encode_proof(proof));
}

std::string raft_frame(const raft::Message& m) {
    return frame("R" + raft::encode_message(m));
}

std::string chunk_frame(std::uint32_t seq, bool last, std::string_view body) {
    std::string c(1, node::SnapshotTransfer::kKind);
    fuzz::put_be(c, 3, 8);        // term
    fuzz::put_be(c, 40, 8);       // snapshot index
    fuzz::put_be(c, 2, 8);        // snapshot term
    fuzz::put_be(c, kT0 + 5, 8);  // snapshot time
    fuzz::put_be(c, seq, 4);
    c.push_back(last ? 1 : 0);
    c.append(body);
    return frame(c);
}

void peers(const Persisted& st, const std::map<std::string, queue::Command>& cmds) {
    using raft::MessageType;
    write("peer", "hello", handshake());
    const auto msg = [](MessageType t, std::uint64_t term) {
        return raft::Message{.type = t, .from = 2, .to = 1, .term = term};
    };
    auto vote = msg(MessageType::vote, 5);
    vote.index = 40, vote.log_term = 4;
    write("peer", "vote", handshake() + raft_frame(vote));
    auto pre = msg(MessageType::pre_vote, 6);
    pre.index = 40, pre.log_term = 4, pre.context = 1;
    auto granted = msg(MessageType::pre_vote_resp, 6);
    write("peer", "pre-vote", handshake() + raft_frame(pre) + raft_frame(granted));
    auto append = msg(MessageType::append, 5);
    append.index = 10, append.log_term = 4, append.commit = 9, append.context = 3;
    append.entries.push_back({5, 11, kT0, raft::EntryType::noop, ""});
    std::uint64_t i = 12;
    for (const auto& [name, c] : cmds)
        if (i < 16)
            append.entries.push_back(
                {5, i++, kT0 + 1, raft::EntryType::normal, queue::encode_command(c)});
    write("peer", "append", handshake() + raft_frame(append));
    auto ok = msg(MessageType::append_resp, 5);
    ok.index = 15, ok.context = 3;
    auto no = msg(MessageType::append_resp, 5);
    no.index = 10, no.reject = true, no.hint_index = 8, no.log_term = 3;
    write("peer", "append-resp", handshake() + raft_frame(ok) + raft_frame(no));
    auto hb = msg(MessageType::heartbeat, 5);
    hb.commit = 9, hb.context = 77;
    auto hbr = msg(MessageType::heartbeat_resp, 5);
    hbr.context = 77;
    write("peer", "heartbeat", handshake() + raft_frame(hb) + frame("") + raft_frame(hbr));
    write("peer", "timeout-now", handshake() + raft_frame(msg(MessageType::timeout_now, 5)));
    auto snap = msg(MessageType::snapshot, 5);
    snap.snapshot = raft::Snapshot{{40, 2, kT0 + 5}, "data"};
    write("peer", "snapshot-message", handshake() + raft_frame(snap));

    // Snapshot streams as SnapshotTransfer::pump sends them: chunk 0 the sealed store-wide
    // record, then (key, sealed task) pairs.
    std::vector<std::string> pairs;
    for (const auto& [q, k, t] : st.tasks) {
        std::string p;
        const std::string key = storage::task_key(q, k);
        storage::append_pair(p, key, storage::seal(t, key));
        pairs.push_back(p);
    }
    std::string all, first_half, second_half;
    for (std::size_t n = 0; n < pairs.size(); ++n) {
        all += pairs[n];
        (n < pairs.size() / 2 ? first_half : second_half) += pairs[n];
    }
    const std::string meta = storage::seal_store_meta(st.meta);
    write("peer", "snapshot-stream",
          handshake() + chunk_frame(0, false, meta) + chunk_frame(1, false, first_half) +
              chunk_frame(2, true, second_half));
    write("peer", "snapshot-one-chunk",
          handshake() + chunk_frame(0, false, meta) + chunk_frame(1, true, all));
    write("peer", "snapshot-empty",
          handshake() + chunk_frame(0, false, storage::seal_store_meta("")) +
              chunk_frame(1, true, ""));
}

// ---------------------------------------------------------------- stored records

std::string log_body(std::uint64_t term, std::int64_t time, raft::EntryType type,
                     std::string_view data) {
    std::string b;
    fuzz::put_be(b, term, 8);
    fuzz::put_be(b, std::uint64_t(time), 8);
    b.push_back(char(type));
    b.append(data);
    return b;
}

void records(const Persisted& st, const std::map<std::string, queue::Command>& cmds) {
    using fuzz::record;
    std::string restart = record(fuzz::kStoreMeta, "", st.meta);
    for (const auto& [q, k, t] : st.tasks)
        restart += record(fuzz::kTaskRecord, storage::task_key(q, k), t);
    write("records", "restart", restart);
    for (const auto& [q, k, t] : st.tasks) {
        const std::string key = storage::task_key(q, k);
        write("records", "task-" + q + "-" + (k.find('\xff') == std::string::npos ? k : "bin"),
              record(fuzz::kTaskRecord, key, t));
    }
    std::string raw;
    for (const auto& [q, k, t] : st.tasks) {
        const std::string key = storage::task_key(q, k);
        raw += record(fuzz::kRawTask, key, storage::seal(t, key));
    }
    write("records", "raw-tasks", raw);
    write("records", "meta", record(fuzz::kStoreMeta, "", st.meta));
    std::string log;
    std::uint64_t index = 1;
    auto key_of = [](std::uint64_t i) {
        std::string k;
        fuzz::put_be(k, i, 8);
        return k;
    };
    log += record(fuzz::kLogRecord, key_of(index), log_body(1, kT0, raft::EntryType::noop, ""));
    for (const auto& [name, c] : cmds) {
        ++index;
        log += record(fuzz::kLogRecord, key_of(index),
                      log_body(1, kT0 + std::int64_t(index), raft::EntryType::normal,
                               queue::encode_command(c)));
    }
    write("records", "log", log);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2 || std::string(argv[1]) == "--help") {
        std::fprintf(stderr, "usage: make_corpus DIR   (writes DIR/<target>/<seed>)\n");
        return 2;
    }
    root = argv[1];
    const auto cmds = commands();
    for (const auto& [name, c] : cmds)
        write("command", name, queue::encode_command(c));
    requests();
    const Persisted st = store_state();
    peers(st, cmds);
    records(st, cmds);
    std::printf("make_corpus: %d seeds under %s\n", written, root.c_str());
    return 0;
}
