#include "cluster/workload.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <future>
#include <sstream>

#include "node/support.h"

namespace dueq::test {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kLoadLimit = std::chrono::minutes(10);
constexpr std::uint64_t kOpLimit = 1'000'000;
constexpr std::size_t kReadBatch = 256;  // gets in flight while checking

Outcome outcome_of(client::Code code) {
    switch (code) {
        case client::Code::ok:
            return Outcome::ok;
        case client::Code::timeout:
        case client::Code::unavailable:
        case client::Code::internal:
        case client::Code::unknown:
            return Outcome::unknown;
        default:
            return Outcome::refused;
    }
}

void note(std::vector<std::string>& examples, const std::string& text) {
    if (examples.size() < 10) examples.push_back(text);
}

std::string ack_payload(std::uint64_t lease) {
    return "a-" + std::to_string(lease);
}

}  // namespace

void History::put_acked(PutRecord r) {
    std::lock_guard lock(mu_);
    puts_.push_back(std::move(r));
}
void History::taken(TakeRecord r) {
    std::lock_guard lock(mu_);
    takes_.push_back(std::move(r));
}
void History::acked(AckRecord r) {
    std::lock_guard lock(mu_);
    acks_.push_back(std::move(r));
}
void History::error(const std::string& op, const std::string& code) {
    std::lock_guard lock(mu_);
    ++errors_[op + "/" + code];
}
std::vector<PutRecord> History::puts() const {
    std::lock_guard lock(mu_);
    return puts_;
}
std::vector<TakeRecord> History::takes() const {
    std::lock_guard lock(mu_);
    return takes_;
}
std::vector<AckRecord> History::acks() const {
    std::lock_guard lock(mu_);
    return acks_;
}
std::size_t History::acks_ok() const {
    std::lock_guard lock(mu_);
    return std::size_t(std::count_if(acks_.begin(), acks_.end(),
                                     [](const AckRecord& a) { return a.outcome == Outcome::ok; }));
}
std::string History::error_counts() const {
    std::lock_guard lock(mu_);
    std::string out;
    for (const auto& [what, n] : errors_)
        out += (out.empty() ? "" : " ") + what + "=" + std::to_string(n);
    return out.empty() ? "none" : out;
}

void preload_work(client::Client& c, const LoadOptions& options) {
    const auto deadline = Clock::now() + 30s;
    const std::int64_t due = wall_ms();
    for (int i = 0; i < options.work_tasks; ++i) {
        client::PutRequest req;
        req.queue = options.work_queue;
        req.key = "work-" + std::to_string(i);
        req.payload = string_payload("init");
        req.time = due;
        auto r = c.put(req);
        // Retried only on errors that say it was not applied, or by upserting again.
        for (int attempt = 0; !r.ok() && attempt < 100 && Clock::now() < deadline; ++attempt) {
            std::this_thread::sleep_for(50ms);
            r = c.put(req);
        }
        INFO("preloading " << req.key);
        REQUIRE(r.ok());
    }
}

Load::Load(std::vector<std::string> seeds, LoadOptions options, History& history)
    : seeds_(std::move(seeds)), options_(std::move(options)), history_(history) {}

Load::~Load() {
    stop();
}

std::unique_ptr<client::Client> Load::make_client() const {
    client::ClientOptions o;
    o.seeds = seeds_;
    o.call_timeout = options_.call_timeout;
    o.connect_timeout = std::min<std::chrono::milliseconds>(options_.call_timeout, 1000ms);
    return std::make_unique<client::Client>(std::move(o));
}

void Load::start() {
    for (int w = 0; w < options_.writers; ++w)
        threads_.emplace_back([this, w] { write_loop(w); });
    for (int r = 0; r < options_.refreshers; ++r)
        threads_.emplace_back([this, r] { refresh_loop(r); });
}

void Load::stop() {
    stop_ = true;
    for (auto& t : threads_)
        if (t.joinable()) t.join();
    threads_.clear();
}

void Load::write_loop(int writer) {
    auto c = make_client();
    const auto start = Clock::now();
    const auto give_up = start + kLoadLimit;
    const std::int64_t base_time = wall_ms() + 3'600'000;
    std::deque<std::pair<std::future<client::Result<client::PutResponse>>, PutRecord>> in_flight;
    std::uint64_t seq = 0;
    // When put number n may go out, at max_put_rate.
    const auto paced = [&](std::uint64_t n) {
        return start +
               std::chrono::microseconds(n * 1'000'000 / std::uint64_t(options_.max_put_rate));
    };
    while (!in_flight.empty() || (!stop_ && seq < kOpLimit && Clock::now() < give_up)) {
        if (in_flight.empty()) std::this_thread::sleep_until(paced(seq));
        while (!stop_ && int(in_flight.size()) < options_.window && seq < kOpLimit &&
               Clock::now() >= paced(seq)) {
            PutRecord rec;
            rec.key = options_.tag + "-w" + std::to_string(writer) + "-" + std::to_string(seq);
            rec.payload = "v-" + rec.key;
            rec.time = base_time + std::int64_t(seq);
            ++seq;
            client::PutRequest req;
            req.queue = options_.kv_queue;
            req.key = rec.key;
            req.payload = string_payload(rec.payload);
            req.time = rec.time;
            in_flight.emplace_back(c->call_async(req), std::move(rec));
        }
        if (in_flight.empty()) continue;
        auto [answer, rec] = std::move(in_flight.front());
        in_flight.pop_front();
        auto r = answer.get();
        if (r.ok()) {
            history_.put_acked(std::move(rec));
            ++ok_ops_;
        } else {
            history_.error("put", std::string(client::code_name(r.code())));
            std::this_thread::sleep_for(10ms);  // no spinning while there is no leader
        }
    }
}

void Load::refresh_loop(int /*refresher*/) {
    auto c = make_client();
    const auto give_up = Clock::now() + kLoadLimit;
    std::uint64_t taken = 0;
    for (std::uint64_t round = 0; !stop_ && round < kOpLimit && Clock::now() < give_up; ++round) {
        client::TakeRequest take;
        take.queue = options_.work_queue;
        take.count = options_.take_count;
        take.timeout_ms = 100;
        take.ttr_ms = options_.ttr_ms;
        take.release_on_disconnect = false;
        auto r = c->take(take);
        if (!r.ok()) {
            history_.error("take", std::string(client::code_name(r.code())));
            std::this_thread::sleep_for(20ms);
            continue;
        }
        const std::int64_t received = wall_ms();
        std::vector<std::pair<std::future<client::Result<client::AckResponse>>, AckRecord>> acks;
        for (const auto& t : r->tasks) {
            history_.taken({t.key, t.lease, t.lease_until, options_.ttr_ms, received});
            ++ok_ops_;
            if (options_.abandon_every > 0 && ++taken % std::uint64_t(options_.abandon_every) == 0)
                continue;
            AckRecord rec;
            rec.key = t.key;
            rec.lease = t.lease;
            rec.time = wall_ms() + 50;
            client::AckRequest ack;
            ack.queue = options_.work_queue;
            ack.key = t.key;
            ack.lease = t.lease;
            ack.payload = string_payload(ack_payload(t.lease));
            ack.time = rec.time;
            acks.emplace_back(c->call_async(ack), std::move(rec));
        }
        for (auto& [answer, rec] : acks) {
            auto a = answer.get();
            rec.answered_ms = wall_ms();
            rec.outcome = outcome_of(a.code());
            if (!a.ok()) {
                rec.code = a.error().code_name;
                history_.error("ack", rec.code);
            } else {
                ++ok_ops_;
            }
            history_.acked(std::move(rec));
        }
    }
}

std::string Verdict::summary() const {
    std::ostringstream s;
    s << "puts checked " << puts_checked << " (lost " << lost_puts << ", wrong " << wrong_puts
      << "), acked tasks checked " << acks_checked << " (lost " << lost_acks << ", wrong "
      << wrong_acks << "), unreadable " << unreadable;
    for (const auto& e : examples)
        s << "\n  " << e;
    return s.str();
}

std::string LeaseVerdict::summary() const {
    std::ostringstream s;
    s << takes << " takes of " << keys << " keys, " << pairs_checked
      << " successive takes after an unacked one checked: " << overlaps << " overlapping leases, "
      << reused_leases << " lease ids handed out twice, " << stale_refusals
      << " acks refused while their lease was live";
    for (const auto& e : examples)
        s << "\n  " << e;
    return s.str();
}

void check_puts(const Cluster& cluster, int i, const std::vector<PutRecord>& puts,
                const std::string& queue, Verdict& v) {
    auto c = cluster.client({i}, 5s);
    const std::string where = cluster.node_id(i) + ": ";
    for (std::size_t from = 0; from < puts.size(); from += kReadBatch) {
        std::vector<std::future<client::Result<client::GetResponse>>> answers;
        const std::size_t to = std::min(puts.size(), from + kReadBatch);
        for (std::size_t k = from; k < to; ++k)
            answers.push_back(c->call_async(client::GetRequest{queue, puts[k].key, {}}));
        for (std::size_t k = from; k < to; ++k) {
            auto r = answers[k - from].get();
            const auto& p = puts[k];
            ++v.puts_checked;
            if (r.code() == client::Code::not_found) {
                ++v.lost_puts;
                note(v.examples, where + "acknowledged put " + p.key + " is missing");
            } else if (!r.ok()) {
                ++v.unreadable;
                note(v.examples, where + "get " + p.key + ": " + r.error().to_string());
            } else if (payload_string(r->task.payload) != p.payload || r->task.time != p.time) {
                ++v.wrong_puts;
                note(v.examples, where + "put " + p.key + " reads as payload '" +
                                     payload_string(r->task.payload) + "' time " +
                                     std::to_string(r->task.time) + ", acknowledged '" + p.payload +
                                     "' time " + std::to_string(p.time));
            }
        }
    }
}

Verdict check_node(const Cluster& cluster, int i, const History& history,
                   const LoadOptions& options) {
    Verdict v;
    check_puts(cluster, i, history.puts(), options.kv_queue, v);
    auto c = cluster.client({i}, 5s);
    const std::string where = cluster.node_id(i) + ": ";
    constexpr std::size_t batch = kReadBatch;

    // Per work key: the acks that may have been applied, and the newest answered ok.
    std::map<std::string, std::multimap<std::uint64_t, AckRecord>> maybe_applied;
    std::map<std::string, std::uint64_t> newest_ok;
    for (const auto& a : history.acks()) {
        if (a.outcome == Outcome::refused) continue;
        maybe_applied[a.key].emplace(a.lease, a);
        if (a.outcome == Outcome::ok) newest_ok[a.key] = std::max(newest_ok[a.key], a.lease);
    }
    std::vector<std::string> keys;
    for (const auto& [key, lease] : newest_ok)
        keys.push_back(key);
    for (std::size_t from = 0; from < keys.size(); from += batch) {
        std::vector<std::future<client::Result<client::GetResponse>>> answers;
        const std::size_t to = std::min(keys.size(), from + batch);
        for (std::size_t k = from; k < to; ++k)
            answers.push_back(c->call_async(client::GetRequest{options.work_queue, keys[k], {}}));
        for (std::size_t k = from; k < to; ++k) {
            auto r = answers[k - from].get();
            const auto& key = keys[k];
            ++v.acks_checked;
            if (r.code() == client::Code::not_found) {
                ++v.lost_acks;
                note(v.examples, where + "acked task " + key + " is missing");
                continue;
            }
            if (!r.ok()) {
                ++v.unreadable;
                note(v.examples, where + "get " + key + ": " + r.error().to_string());
                continue;
            }
            // The payload names the lease of the ack that wrote it: it must be an ack we
            // sent (not refused), no older than the newest one answered ok, with its time.
            const auto payload = payload_string(r->task.payload);
            std::uint64_t lease = 0;
            if (payload.rfind("a-", 0) == 0) lease = std::stoull(payload.substr(2));
            const auto [first, last] = maybe_applied[key].equal_range(lease);
            const bool written_by_an_ack = std::any_of(
                first, last, [&](const auto& sent) { return sent.second.time == r->task.time; });
            if (lease < newest_ok[key]) {
                ++v.lost_acks;
                note(v.examples, where + "task " + key + " reads as '" + payload +
                                     "' but the ack with lease " + std::to_string(newest_ok[key]) +
                                     " was answered ok");
            } else if (!written_by_an_ack) {
                ++v.wrong_acks;
                note(v.examples, where + "task " + key + " reads as '" + payload + "' time " +
                                     std::to_string(r->task.time) +
                                     ", which no ack that may have applied wrote");
            }
        }
    }
    return v;
}

LeaseVerdict check_leases(const History& history) {
    LeaseVerdict v;
    const auto takes = history.takes();
    v.takes = takes.size();
    // A lease id is handed out once, store-wide (docs/semantics.md).
    std::map<std::uint64_t, std::vector<TakeRecord>> takes_of_lease;
    for (const auto& t : takes)
        takes_of_lease[t.lease].push_back(t);
    for (const auto& [lease, list] : takes_of_lease) {
        if (list.size() < 2) continue;
        ++v.reused_leases;
        note(v.examples, "lease " + std::to_string(lease) + " was handed out " +
                             std::to_string(list.size()) + " times (first for " + list[0].key +
                             ", then for " + list[1].key + ")");
    }
    std::map<std::pair<std::string, std::uint64_t>, std::vector<AckRecord>> acks_of;
    for (const auto& a : history.acks())
        acks_of[{a.key, a.lease}].push_back(a);
    // A lease its holder acked (or may have) ended at that ack.
    auto ended_by_holder = [&](const TakeRecord& t) {
        const auto it = acks_of.find({t.key, t.lease});
        if (it == acks_of.end()) return false;
        return std::any_of(it->second.begin(), it->second.end(),
                           [](const AckRecord& a) { return a.outcome != Outcome::refused; });
    };
    std::map<std::string, std::vector<TakeRecord>> by_key;
    for (const auto& t : takes)
        by_key[t.key].push_back(t);
    v.keys = by_key.size();
    for (auto& [key, list] : by_key) {
        std::sort(list.begin(), list.end(), [](const TakeRecord& a, const TakeRecord& b) {
            return a.lease_until - a.ttr_ms < b.lease_until - b.ttr_ms;
        });
        for (std::size_t k = 0; k + 1 < list.size(); ++k) {
            const auto& first = list[k];
            const auto& next = list[k + 1];
            if (ended_by_holder(first)) continue;
            ++v.pairs_checked;
            const std::int64_t granted = next.lease_until - next.ttr_ms;
            if (granted < first.lease_until) {
                ++v.overlaps;
                note(v.examples, key + ": lease " + std::to_string(next.lease) + " granted at " +
                                     std::to_string(granted) + ", while lease " +
                                     std::to_string(first.lease) + " was live until " +
                                     std::to_string(first.lease_until));
            }
        }
    }
    for (const auto& [id, acks] : acks_of) {
        const auto& list = takes_of_lease[id.second];
        if (list.size() != 1 || list[0].key != id.first) continue;  // reused: counted above
        const auto& t = list[0];
        for (const auto& a : acks) {
            if (a.outcome != Outcome::refused) continue;
            if (a.code != "lease_mismatch" && a.code != "not_found") continue;
            // Answered, so applied, at least 100 ms before the lease ran out.
            if (a.answered_ms + 100 < t.lease_until) {
                ++v.stale_refusals;
                note(v.examples, a.key + ": ack of lease " + std::to_string(a.lease) +
                                     " refused (" + a.code + ") at " +
                                     std::to_string(a.answered_ms) + ", its lease ran until " +
                                     std::to_string(t.lease_until));
            }
        }
    }
    return v;
}

int settle(const Cluster& cluster, std::chrono::milliseconds bound) {
    const auto deadline = Clock::now() + bound;
    for (int attempt = 0; attempt < 100 && Clock::now() < deadline; ++attempt) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        const int leader = cluster.wait_for_leader(left);
        if (leader < 0) return -1;
        auto c = cluster.client({leader}, 1s);
        client::PutRequest marker;
        marker.queue = "settle";
        marker.key = "settle-" + std::to_string(attempt);
        marker.payload = string_payload("settle");
        if (!c->put(marker).ok()) continue;
        const auto s = cluster.status(leader);
        if (!s || (s->role != "leader" && s->role != "standalone")) continue;
        const auto rest =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (cluster.wait_applied(s->commit_index, std::max(rest, 0ms))) return leader;
        return -1;
    }
    return -1;
}

}  // namespace dueq::test
