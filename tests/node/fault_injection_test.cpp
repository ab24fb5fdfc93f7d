// No acknowledged write depends on unsynced data (docs/internals/replication.md: a command is answered only
// once its log entry is durable).
//
// A node runs on a file system that can cut the power (testing/fault-fs/fault_fs.h).
// Several clients put and take+ack, pipelined; every answer "ok" that arrived before the
// cut is recorded. Then the power is cut, the node stopped, every unsynced byte dropped,
// and a fresh node started on what is left: each recorded write must be there. The same
// run with fsync "never" must lose acknowledged writes, which shows the harness can fail.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "node/support.h"
#include "testing/fault-fs/fault_fs.h"

using namespace dueq;
using namespace dueq::test;

namespace {

constexpr int kClients = 4;
constexpr int kWindow = 32;                // requests in flight per client
constexpr std::size_t kCrashAfter = 3000;  // acknowledged writes before the cut

// What a recorded acknowledgement promises about a task.
struct Expectation {
    std::string queue;
    std::set<std::string> payloads;     // any of these (a later unacknowledged ack may win)
    std::optional<std::string> status;  // required status, if any
};

// The acknowledgements seen before the cut. Clients record under `mu`; the cut is made
// under `mu` too, so an answer recorded here left the node before the power went. The
// client that records the kCrashAfter-th acknowledgement cuts the power at once, so the
// cut lands right behind an answer: a node that answered before its fsync finished
// would most likely be caught with that write still unsynced.
struct Ledger {
    std::mutex mu;
    std::condition_variable cv;
    std::function<void()> cut_power;  // called once, under mu
    bool cut = false;
    std::size_t acked = 0, ignored_after_cut = 0;
    std::map<std::string, Expectation> expectations;  // by key (keys are unique across queues)
    std::vector<std::string> errors;                  // client-side surprises, checked at the end

    void record(const std::string& key, Expectation p, bool replaces) {
        std::lock_guard lock(mu);
        if (cut) {
            ++ignored_after_cut;
            return;
        }
        auto& slot = expectations[key];
        if (replaces || slot.queue.empty()) slot = std::move(p);
        if (++acked == kCrashAfter) {
            cut_power();
            cut = true;
            cv.notify_all();
        }
    }
    bool is_cut() {
        std::lock_guard lock(mu);
        return cut;
    }
};

std::string payload_of(const Response& r) {
    auto task = r.find("task");
    if (!task) return "";
    std::map<std::string, msgpack::object> fields;
    task->convert(fields);
    return fields.at("payload").as<std::string>();
}

std::string status_of(const Response& r) {
    std::map<std::string, msgpack::object> fields;
    r.find("task")->convert(fields);
    return fields.at("status").as<std::string>();
}

// One client: rounds of kWindow pipelined puts (half to "q", half to "jobs"), then a
// take from "jobs" and pipelined acks that replace the payload. Runs until the cut.
void run_client(int id, std::uint16_t port, Ledger& ledger) {
    RawClient c(port);
    std::uint64_t next_id = 1;
    for (int round = 0; !ledger.is_cut(); ++round) {
        std::map<std::uint64_t, std::pair<std::string, std::string>> puts;  // id -> queue, key
        for (int j = 0; j < kWindow; ++j) {
            const std::string queue = j % 2 ? "jobs" : "q";
            const std::string key =
                "c" + std::to_string(id) + "-" + std::to_string(round) + "-" + std::to_string(j);
            puts[next_id] = {queue, key};
            c.send(
                "put", next_id++,
                {{"queue", c.str(queue)}, {"key", c.str(key)}, {"payload", c.str("put " + key)}});
        }
        for (int j = 0; j < kWindow; ++j) {
            auto r = c.read();
            if (!r) return;  // the node is gone
            auto it = puts.find(r->id());
            if (it == puts.end() || !r->ok()) {
                std::lock_guard lock(ledger.mu);
                ledger.errors.push_back("put answered badly, id " + std::to_string(r->id()));
                continue;
            }
            const auto& [queue, key] = it->second;
            Expectation p{queue, {"put " + key}, std::nullopt};
            if (queue == "q")
                p.status = "ready";  // nobody takes from "q"
            else
                p.payloads.insert("acked " + key);  // it may have been taken and acked since
            ledger.record(key, std::move(p), false);
        }

        c.send(
            "take", next_id,
            {{"queue", c.str("jobs")}, {"count", c.obj(kWindow / 2)}, {"ttr_ms", c.obj(600'000)}});
        auto taken = c.read();
        if (!taken) return;
        if (taken->id() != next_id++ || !taken->ok()) continue;
        std::map<std::uint64_t, std::string> acks;  // id -> key
        const auto* tasks = taken->find("tasks");
        for (std::uint32_t i = 0; tasks && i < tasks->via.array.size; ++i) {
            std::map<std::string, msgpack::object> t;
            tasks->via.array.ptr[i].convert(t);
            const auto key = t.at("key").as<std::string>();
            acks[next_id] = key;
            c.send("ack", next_id++,
                   {{"queue", c.str("jobs")},
                    {"key", c.str(key)},
                    {"lease", c.obj(t.at("lease").as<std::uint64_t>())},
                    {"payload", c.str("acked " + key)}});
        }
        for (std::size_t i = 0; i < acks.size(); ++i) {
            auto r = c.read();
            if (!r) return;
            auto it = acks.find(r->id());
            if (it == acks.end() || !r->ok()) {
                std::lock_guard lock(ledger.mu);
                ledger.errors.push_back("ack answered badly, id " + std::to_string(r->id()));
                continue;
            }
            ledger.record(it->second, Expectation{"jobs", {"acked " + it->second}, "done"}, true);
        }
    }
}

struct Outcome {
    std::size_t acked = 0, keys = 0, missing = 0, wrong = 0, ignored_after_cut = 0;
    FaultFileSystem::DropStats dropped;
    std::vector<std::string> samples;  // a few missing or wrong keys, for the report
};

// Runs the whole scenario on a fresh data dir with the given fsync setting.
Outcome crash_and_check(const std::string& name, bool fsync) {
    auto env = make_fault_env();
    // Each fsync takes at least 2 ms, as on a real disk: a node that answered before its
    // fsync returned would then be caught with answered writes unsynced at the cut.
    env.fs->set_sync_delay(std::chrono::milliseconds(2));
    node::Config config = TestNode::config_for(name);
    config.fsync = fsync;
    struct RemoveDir {
        std::string path;
        ~RemoveDir() {
            std::error_code ec;
            std::filesystem::remove_all(path, ec);
        }
    } remove_dir{config.data_dir};  // declared before the nodes: removed after they close
    Ledger ledger;
    ledger.cut_power = [&] { env.fs->crash(); };

    auto node = std::make_unique<TestNode>(config, env.get());
    std::vector<std::thread> clients;
    for (int i = 0; i < kClients; ++i)
        clients.emplace_back([&, i] { run_client(i, node->port(), ledger); });
    {
        std::unique_lock lock(ledger.mu);
        const bool enough =
            ledger.cv.wait_for(lock, std::chrono::seconds(20), [&] { return ledger.cut; });
        if (!enough) {  // too slow: cut anyway so the clients stop, then fail
            env.fs->crash();
            ledger.cut = true;
        }
        lock.unlock();
        for (auto& t : clients)
            t.join();
        REQUIRE(enough);
    }
    node.reset();  // stops the node and closes its database: nothing reaches the disk

    Outcome out;
    out.dropped = env.fs->drop_unsynced();
    out.acked = ledger.acked;
    out.ignored_after_cut = ledger.ignored_after_cut;
    for (const auto& e : ledger.errors)
        FAIL_CHECK(e);

    // Boot again on what the disk kept, with the ordinary environment.
    config.fsync = true;
    TestNode again(config);
    RawClient c(again.port());
    std::vector<std::pair<std::string, const Expectation*>> todo;
    for (const auto& [key, p] : ledger.expectations)
        todo.emplace_back(key, &p);
    out.keys = todo.size();
    constexpr std::size_t kBatch = 200;
    for (std::size_t from = 0; from < todo.size(); from += kBatch) {
        const std::size_t to = std::min(todo.size(), from + kBatch);
        for (std::size_t i = from; i < to; ++i)
            c.send("get", i,
                   {{"queue", c.str(todo[i].second->queue)}, {"key", c.str(todo[i].first)}});
        for (std::size_t i = from; i < to; ++i) {
            auto r = c.read();
            REQUIRE(r);
            REQUIRE(r->id() < todo.size());
            const auto& [key, p] = todo[r->id()];
            bool bad = false;
            if (!r->ok()) {
                ++out.missing;
                bad = true;
            } else if (!p->payloads.count(payload_of(*r)) ||
                       (p->status && status_of(*r) != *p->status)) {
                ++out.wrong;
                bad = true;
            }
            if (bad && out.samples.size() < 5) out.samples.push_back(p->queue + "/" + key);
        }
    }
    return out;
}

std::string describe(const Outcome& o) {
    std::string s = std::to_string(o.acked) + " acknowledged writes to " + std::to_string(o.keys) +
                    " keys before the cut (" + std::to_string(o.ignored_after_cut) +
                    " answered after it, not counted); " + std::to_string(o.missing) +
                    " missing, " + std::to_string(o.wrong) + " wrong; dropped " +
                    std::to_string(o.dropped.bytes_dropped) + " bytes in " +
                    std::to_string(o.dropped.files_truncated) + " files, deleted " +
                    std::to_string(o.dropped.files_deleted) + " files";
    for (const auto& k : o.samples)
        s += "; e.g. " + k;
    return s;
}

}  // namespace

TEST_CASE("fsync always: every acknowledged write survives a power cut") {
    const Outcome o = crash_and_check("fault-always", true);
    INFO(describe(o));
    CHECK(o.acked >= kCrashAfter);
    CHECK(o.missing == 0);
    CHECK(o.wrong == 0);
}

TEST_CASE("fsync never: a power cut loses acknowledged writes (the harness can fail)") {
    const Outcome o = crash_and_check("fault-never", false);
    INFO(describe(o));
    CHECK(o.acked >= kCrashAfter);
    CHECK(o.dropped.bytes_dropped + o.dropped.files_deleted > 0);
    CHECK(o.missing > 0);
}
