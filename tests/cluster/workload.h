// A steady write + take + ack load on a cluster through the C++ client, the history of
// what the clients were told, and the checks of that history against the cluster:
//   G1: every put and ack answered ok is there afterwards, with its payload and time;
//   G3: no two takes of one task overlap in validity unless the first lease was ended
//       by its holder (ack), and no ack is refused as stale while its lease is live.
//
// The load uses two queues: `kv_queue` gets puts of unique keys (due in an hour, never
// taken), `work_queue` holds preloaded tasks that refreshers take (release_on_disconnect
// false, so only an ack or the lease running out ends a lease) and ack as due again
// 50 ms later, so every task is taken over and over; a few are left to time out.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster.h"

namespace dueq::test {

struct LoadOptions {
    std::string tag = "load";  // prefix of the keys the writers put
    int writers = 2;
    int window = 4;  // puts in flight per writer
    // Puts per second per writer at most: keeps the history (and the reads that check
    // it) bounded when a node answers faster than it should.
    int max_put_rate = 2000;
    int refreshers = 2;
    std::uint32_t take_count = 4;
    std::int64_t ttr_ms = 2000;
    // Every n-th task a refresher takes is left unacked, to come back when its lease
    // runs out: the next take of it must not come before that.
    int abandon_every = 8;
    std::string kv_queue = "kv";
    std::string work_queue = "work";
    int work_tasks = 200;  // preloaded by preload_work
    std::chrono::milliseconds call_timeout = 2s;
};

struct PutRecord {
    std::string key;
    std::string payload;  // the string inside the msgpack payload
    std::int64_t time = 0;
};

struct TakeRecord {
    std::string key;
    std::uint64_t lease = 0;
    std::int64_t lease_until = 0;
    std::int64_t ttr_ms = 0;  // so lease_until - ttr_ms is the leader's time of the take
    std::int64_t received_ms = 0;
};

// ok: applied. refused: an error that says it was not applied. unknown: timeout or a
// broken connection after the request was written.
enum class Outcome { ok, refused, unknown };

struct AckRecord {
    std::string key;
    std::uint64_t lease = 0;
    std::int64_t time = 0;  // the time the ack gave the task; its payload is "a-<lease>"
    Outcome outcome = Outcome::unknown;
    std::string code;  // error code when not ok
    std::int64_t answered_ms = 0;
};

// What the clients were told. Thread-safe.
class History {
  public:
    void put_acked(PutRecord r);
    void taken(TakeRecord r);
    void acked(AckRecord r);
    void error(const std::string& op, const std::string& code);

    std::vector<PutRecord> puts() const;
    std::vector<TakeRecord> takes() const;
    std::vector<AckRecord> acks() const;
    std::size_t acks_ok() const;
    std::string error_counts() const;  // "put/unavailable=3 take/not_leader=1"

  private:
    mutable std::mutex mu_;  // guards everything below
    std::vector<PutRecord> puts_;
    std::vector<TakeRecord> takes_;
    std::vector<AckRecord> acks_;
    std::map<std::string, std::size_t> errors_;
};

// Puts `options.work_tasks` tasks "work-<i>" (payload "init", due now) into the work
// queue; fails the test if that does not succeed within 30 s.
void preload_work(client::Client& c, const LoadOptions& options);

// Client threads running against `seeds` until stop() (or destruction). Every loop is
// bounded: each thread stops by itself after 10 minutes or a million ops.
class Load {
  public:
    Load(std::vector<std::string> seeds, LoadOptions options, History& history);
    ~Load();
    Load(const Load&) = delete;
    Load& operator=(const Load&) = delete;
    void start();
    void stop();  // joins the threads
    std::size_t ok_ops() const { return ok_ops_.load(); }

  private:
    void write_loop(int writer);
    void refresh_loop(int refresher);
    std::unique_ptr<client::Client> make_client() const;

    std::vector<std::string> seeds_;
    LoadOptions options_;
    History& history_;
    std::atomic<bool> stop_{false};
    std::atomic<std::size_t> ok_ops_{0};
    std::vector<std::thread> threads_;
};

struct Verdict {
    std::size_t puts_checked = 0, acks_checked = 0;
    std::size_t lost_puts = 0, wrong_puts = 0, lost_acks = 0, wrong_acks = 0, unreadable = 0;
    std::vector<std::string> examples;  // the first few problems, for the test's output
    std::size_t problems() const {
        return lost_puts + wrong_puts + lost_acks + wrong_acks + unreadable;
    }
    std::string summary() const;
};

// Reads each of `puts` from node i alone (local gets of `queue`) and adds what it finds
// wrong to `v`.
void check_puts(const Cluster& cluster, int i, const std::vector<PutRecord>& puts,
                const std::string& queue, Verdict& v);

// Reads every acknowledged put, and every work task that had an ack answered ok, from
// node i alone (local gets) and compares with the history.
Verdict check_node(const Cluster& cluster, int i, const History& history,
                   const LoadOptions& options);

struct LeaseVerdict {
    std::size_t takes = 0, keys = 0, pairs_checked = 0;
    std::size_t overlaps = 0;        // a take granted while an earlier lease was live
    std::size_t reused_leases = 0;   // one lease id handed out by two takes
    std::size_t stale_refusals = 0;  // an ack refused while its lease was live
    std::vector<std::string> examples;
    std::size_t problems() const { return overlaps + reused_leases + stale_refusals; }
    std::string summary() const;
};

LeaseVerdict check_leases(const History& history);

// Waits, for at most `bound`, until the running nodes agree on a leader, that leader has
// answered a put (so it committed an entry of its own term, and with it everything
// before), and every running node has applied up to the leader's commit index. Returns
// the leader, or -1.
int settle(const Cluster& cluster, std::chrono::milliseconds bound);

}  // namespace dueq::test
