#include "drill.h"

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "load.h"

namespace dueq::bench {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

std::string_view order_name(DrillOrder o) {
    return o == DrillOrder::deadline ? "deadline-aware" : "earliest-first";
}

namespace {

// Per token: what the drill did with it.
enum TokenState : std::uint8_t { untaken = 0, taken = 1, saved = 2, expired = 3 };

class Drill {
  public:
    Drill(const DrillOptions& o, DrillOrder order, std::int64_t lead)
        : o_(o), order_(order), lead_(lead), state_(o.tokens, untaken), monitor_(io_) {
        // A task's `time` in the store: the token's expiry (deadline-aware order), or the
        // moment its refresh should start (earliest-first, a plain delayed job).
        shift_ = order_ == DrillOrder::earliest ? lead_ : 0;
    }

    DrillResult run() {
        DrillResult r;
        r.order = order_;
        r.lead_ms = lead_;
        const auto preload_ms = std::int64_t(double(o_.tokens) / o_.preload_rate * 1000.0);
        const std::int64_t planned_start = wall_ms() + preload_ms + 2000;
        first_expiry_ = planned_start - std::int64_t(o_.late_share * double(o_.hour_ms));

        LoadOptions p;
        p.backend = o_.backend;
        p.addrs = o_.addrs;
        p.scenario = Scenario::preload;
        p.connections = o_.preload_connections;
        p.depth = o_.preload_depth;
        p.keys = o_.tokens;
        p.key_bytes = o_.key_bytes;
        p.payload_bytes = o_.payload_bytes;
        p.queue = o_.queue;
        p.lead_ms = order_ == DrillOrder::deadline ? lead_ : 0;
        p.ttr_ms = ttr_ms();
        p.base_time_ms = first_expiry_ - shift_;
        p.spread_ms = o_.hour_ms;
        p.seconds = 7200;
        p.progress = o_.progress;
        const auto t0 = Clock::now();
        const auto pre = run_load(p);
        r.preload_s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (pre.ops[std::size_t(Op::put)].errors > 0 ||
            pre.ops[std::size_t(Op::put)].ops < o_.tokens)
            throw std::runtime_error("drill: the preload failed");

        while (wall_ms() < planned_start)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        start_ = wall_ms();
        start_clock_ = Clock::now();
        r.start_delay_ms = start_ - planned_start;

        const int nconns = std::max(1, std::min(o_.refreshers, o_.connections));
        for (int c = 0; c < nconns; ++c)
            conns_.push_back(connect(o_.backend, io_, o_.addrs[std::size_t(c) % o_.addrs.size()]));
        for (int w = 0; w < o_.refreshers; ++w) {
            ++active_;
            auto conn = conns_[std::size_t(w % nconns)];
            asio::post(io_, [this, conn] { step(conn); });
        }
        monitor();
        io_.run();
        r.seconds = std::chrono::duration<double>(end_clock_ - start_clock_).count();

        const std::int64_t end = wall_ms();
        for (std::uint64_t i = 0; i < o_.tokens; ++i) {
            const auto expiry = expiry_of(i);
            if (expiry < start_) {
                if (state_[i] >= saved) ++r.late_refreshed;
                ++r.late_at_start;
                continue;
            }
            if (expiry - lead_ > end && state_[i] == untaken) continue;  // never came due
            ++r.savable_due;
            if (state_[i] == saved) {
                ++r.saved;
            } else if (state_[i] == expired || expiry < end) {
                ++r.expired_savable;
            }
        }
        r.drain_ms = drain_ms_;
        r.refreshes = refreshes_;
        r.errors = errors_;
        return r;
    }

  private:
    std::int64_t ttr_ms() const { return std::max<std::int64_t>(30'000, o_.service_ms * 20); }
    std::int64_t expiry_of(std::uint64_t i) const {
        return first_expiry_ + std::int64_t((long double)(i) * (long double)(o_.hour_ms) /
                                            (long double)(o_.tokens));
    }
    // How many tokens have come due (expiry - lead <= now): a prefix of the key order.
    std::uint64_t due_count(std::int64_t now) const {
        const long double x = (long double)(now + lead_ - first_expiry_) *
                              (long double)(o_.tokens) / (long double)(o_.hour_ms);
        if (x < 0) return 0;
        return std::min<std::uint64_t>(o_.tokens, std::uint64_t(x) + 1);
    }

    void monitor() {
        monitor_.expires_after(std::chrono::milliseconds(20));
        monitor_.async_wait([this](boost::system::error_code ec) {
            if (ec) return;
            const auto now = wall_ms();
            while (lowest_untaken_ < o_.tokens && state_[lowest_untaken_] != untaken)
                ++lowest_untaken_;
            if (drain_ms_ < 0 && lowest_untaken_ >= due_count(now)) drain_ms_ = now - start_;
            const double elapsed =
                std::chrono::duration<double>(Clock::now() - start_clock_).count();
            if (elapsed >= o_.seconds) stopping_ = true;
            if (o_.progress && Clock::now() - last_print_ > std::chrono::seconds(1)) {
                last_print_ = Clock::now();
                std::fprintf(
                    stderr,
                    "%sdrill %s: %5.1fs, %" PRIu64 " refreshes (%.0f/s), backlog %" PRIu64
                    " tokens   %s",
                    isatty(2) ? "\r" : "", std::string(order_name(order_)).c_str(), elapsed,
                    refreshes_, double(refreshes_ - last_refreshes_),
                    due_count(now) > lowest_untaken_ ? due_count(now) - lowest_untaken_ : 0,
                    isatty(2) ? "" : "\n");
                last_refreshes_ = refreshes_;
            }
            if (!stopping_) monitor();
        });
    }

    void finish_slot() {
        if (--active_ > 0) return;
        end_clock_ = Clock::now();
        monitor_.cancel();
        if (o_.progress && isatty(2)) std::fprintf(stderr, "\n");
        for (auto& c : conns_)
            c->close();
    }

    void later(std::int64_t ms, std::function<void()> f) {
        auto t = std::make_shared<asio::steady_timer>(io_);
        t->expires_after(std::chrono::milliseconds(ms));
        t->async_wait([t, f = std::move(f)](auto) { f(); });
    }

    void step(std::shared_ptr<Connection> conn) {
        if (stopping_ || conn->broken()) return finish_slot();
        conn->take(o_.queue, ttr_ms(), [this, conn](Reply r, std::optional<Taken> task) {
            if (!r.ok) {
                ++errors_;
                return later(o_.poll_ms, [this, conn] { step(conn); });
            }
            if (!task) return later(o_.poll_ms, [this, conn] { step(conn); });
            std::uint64_t i = 0;
            try {
                i = std::stoull(task->key.substr(1));
            } catch (const std::exception&) {
                i = o_.tokens;
            }
            if (i >= o_.tokens) {
                ++errors_;
                return step(conn);
            }
            if (state_[i] == untaken) state_[i] = taken;
            const std::int64_t expiry = task->time + shift_;
            // The provider call: the new token exists once it returns.
            later(o_.service_ms, [this, conn, i, expiry, task = std::move(*task)] {
                const std::int64_t now = wall_ms();
                if (state_[i] == taken) state_[i] = now <= expiry ? saved : expired;
                const std::string payload(o_.payload_bytes, 'r');
                conn->ack(o_.queue, task, payload, now + o_.hour_ms - shift_,
                          [this, conn](Reply ar) {
                              if (ar.ok)
                                  ++refreshes_;
                              else
                                  ++errors_;
                              step(conn);
                          });
            });
        });
    }

    const DrillOptions& o_;
    DrillOrder order_;
    std::int64_t lead_, shift_ = 0;
    std::int64_t first_expiry_ = 0, start_ = 0;
    std::vector<std::uint8_t> state_;
    asio::io_context io_;
    asio::steady_timer monitor_;
    std::vector<std::shared_ptr<Connection>> conns_;
    Clock::time_point start_clock_, end_clock_, last_print_;
    std::uint64_t lowest_untaken_ = 0, refreshes_ = 0, last_refreshes_ = 0, errors_ = 0;
    std::int64_t drain_ms_ = -1;
    int active_ = 0;
    bool stopping_ = false;
};

}  // namespace

std::vector<DrillResult> run_drill(const DrillOptions& o) {
    if (o.tokens == 0 || o.hour_ms <= 0 || o.refreshers < 1)
        throw std::runtime_error("drill: tokens, hour and refreshers must be positive");
    if (o.late_share < 0 || o.late_share >= 1)
        throw std::runtime_error("drill: --late-share must be in [0, 1)");
    const std::int64_t lead = o.lead_ms > 0 ? o.lead_ms : o.hour_ms / 12;
    if (o.seconds * 1000 >= double(o.hour_ms - lead))
        throw std::runtime_error(
            "drill: the window (--seconds) must end before refreshed tokens come due again "
            "(--hour-ms minus the lead)");
    std::vector<DrillResult> out;
    for (auto order : o.orders) {
        Drill d(o, order, lead);
        auto r = d.run();
        r.options = {{"backend", backend_name(o.backend)},
                     {"tokens", o.tokens},
                     {"hour_ms", o.hour_ms},
                     {"lead_ms", lead},
                     {"late_share", o.late_share},
                     {"refreshers", o.refreshers},
                     {"service_ms", o.service_ms},
                     {"payload_bytes", o.payload_bytes},
                     {"key_bytes", o.key_bytes},
                     {"window_s", o.seconds}};
        out.push_back(std::move(r));
    }
    return out;
}

nlohmann::json to_json(const DrillResult& r) {
    return {{"order", order_name(r.order)},
            {"lead_ms", r.lead_ms},
            {"options", r.options},
            {"preload_s", r.preload_s},
            {"start_delay_ms", r.start_delay_ms},
            {"late_at_start", r.late_at_start},
            {"savable_due", r.savable_due},
            {"saved", r.saved},
            {"expired_savable", r.expired_savable},
            {"late_refreshed", r.late_refreshed},
            {"drain_ms", r.drain_ms < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.drain_ms)},
            {"refreshes", r.refreshes},
            {"refreshes_per_s", r.seconds > 0 ? double(r.refreshes) / r.seconds : 0.0},
            {"seconds", r.seconds},
            {"errors", r.errors}};
}

std::string to_table(const std::vector<DrillResult>& results) {
    std::string out;
    char line[256];
    std::snprintf(line, sizeof line, "%-15s %8s %13s %12s %12s %16s %10s %12s\n", "order",
                  "lead_ms", "late at start", "savable due", "saved", "expired savable", "drain",
                  "refreshes/s");
    out += line;
    for (const auto& r : results) {
        char drain[32];
        if (r.drain_ms < 0)
            std::snprintf(drain, sizeof drain, "not done");
        else
            std::snprintf(drain, sizeof drain, "%.1f s", double(r.drain_ms) / 1000);
        std::snprintf(line, sizeof line,
                      "%-15s %8" PRId64 " %13" PRIu64 " %12" PRIu64 " %12" PRIu64 " %16" PRIu64
                      " %10s %12.0f\n",
                      std::string(order_name(r.order)).c_str(), r.lead_ms, r.late_at_start,
                      r.savable_due, r.saved, r.expired_savable, drain,
                      r.seconds > 0 ? double(r.refreshes) / r.seconds : 0.0);
        out += line;
    }
    return out;
}

}  // namespace dueq::bench
