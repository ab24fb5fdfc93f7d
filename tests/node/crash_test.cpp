// kill -9 of a real dueqd while clients write: every answered write must be there
// after the restart (G1 on one node), and the log tail is replayed.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "node/process.h"
#include "node/support.h"

using namespace dueq::test;
using namespace std::chrono;

namespace {

struct Acked {
    std::mutex mu;  // guards puts and acks
    std::set<std::string> puts;
    std::map<std::string, std::int64_t> acks;  // key -> time it was acked with
};

// Puts unique keys with up to `window` requests in flight until the node dies or
// `stop` is set.
void put_loop(std::uint16_t port, int writer, int round, std::atomic<bool>& stop, Acked& acked) {
    try {
        RawClient c(port);
        std::map<std::uint64_t, std::string> in_flight;
        std::uint64_t next = 1;
        const int window = 16;
        while (next < 100000) {
            while (!stop && in_flight.size() < window) {
                const std::string key = "r" + std::to_string(round) + "-w" +
                                        std::to_string(writer) + "-" + std::to_string(next);
                c.send("put", next,
                       {{"queue", c.str("crash")},
                        {"key", c.str(key)},
                        {"payload", c.str("v-" + key)},
                        {"time", c.obj(wall_ms() + 3'600'000)}});
                in_flight[next++] = key;
            }
            if (in_flight.empty()) break;
            auto r = c.read(seconds(2));
            if (!r) break;  // the node is gone
            auto it = in_flight.find(r->id());
            REQUIRE(it != in_flight.end());
            if (r->ok()) {
                std::lock_guard lock(acked.mu);
                acked.puts.insert(it->second);
            }
            in_flight.erase(it);
        }
    } catch (const boost::system::system_error&) {
        // connection reset by the kill: what was answered is recorded
    }
}

// Takes due tasks of queue "work" and acks each with a new time, recording acked ones.
void ack_loop(std::uint16_t port, std::atomic<bool>& stop, Acked& acked) {
    try {
        RawClient c(port);
        std::uint64_t id = 1;
        while (!stop && id < 100000) {
            c.send("take", id++,
                   {{"queue", c.str("work")}, {"count", c.obj(8)}, {"ttr_ms", c.obj(600000)}});
            auto r = c.read(seconds(2));
            if (!r || !r->ok()) break;
            const auto* tasks = r->find("tasks");
            if (tasks->via.array.size == 0) break;
            for (std::uint32_t i = 0; i < tasks->via.array.size; ++i) {
                std::map<std::string, msgpack::object> t;
                tasks->via.array.ptr[i].convert(t);
                const auto key = t.at("key").as<std::string>();
                const std::int64_t next_time = wall_ms() + 7'200'000;
                c.send("ack", id,
                       {{"queue", c.str("work")},
                        {"key", c.str(key)},
                        {"lease", t.at("lease")},
                        {"time", c.obj(next_time)},
                        {"payload", c.str("acked")}});
                auto a = c.read(seconds(2));
                if (!a) return;
                REQUIRE(a->id() == id++);
                if (a->ok()) {
                    std::lock_guard lock(acked.mu);
                    acked.acks[key] = next_time;
                }
            }
        }
    } catch (const boost::system::system_error&) {
    }
}

}  // namespace

TEST_CASE("kill -9 under load loses no acknowledged write") {
    const auto dir = fresh_dir("crash");
    const std::string log = (dir / "dueqd.log").string();
    const std::vector<std::string> args{
        "--listen", "127.0.0.1:0", "--data-dir", (dir / "data").string(), "--log-level", "info"};
    Acked acked;
    const int tasks_for_acks = 3000;
    {
        DueqdProcess node(DUEQD_BINARY, args, log);
        RawClient c(node.port());
        for (int i = 0; i < tasks_for_acks; ++i)
            c.send("put", std::uint64_t(i + 1),
                   {{"queue", c.str("work")},
                    {"key", c.str("job-" + std::to_string(i))},
                    {"payload", c.obj(i)}});
        for (int i = 0; i < tasks_for_acks; ++i)
            REQUIRE(c.read()->ok());
        node.terminate();
    }
    for (int round = 0; round < 3; ++round) {
        DueqdProcess node(DUEQD_BINARY, args, log);
        std::atomic<bool> stop{false};
        std::vector<std::thread> threads;
        for (int w = 0; w < 3; ++w)
            threads.emplace_back([&, w] { put_loop(node.port(), w, round, stop, acked); });
        threads.emplace_back([&] { ack_loop(node.port(), stop, acked); });
        std::this_thread::sleep_for(milliseconds(700 + 300 * round));
        node.kill9();  // mid-write: clients have requests in flight
        for (auto& t : threads)
            t.join();
    }

    DueqdProcess node(DUEQD_BINARY, args, log);
    RawClient c(node.port());
    std::size_t missing = 0, wrong = 0;
    std::uint64_t id = 1;
    for (const auto& key : acked.puts) {
        auto r = c.call("get", id++, {{"queue", c.str("crash")}, {"key", c.str(key)}});
        if (!r.ok()) ++missing;
    }
    for (const auto& [key, time] : acked.acks) {
        auto r = c.call("get", id++, {{"queue", c.str("work")}, {"key", c.str(key)}});
        if (!r.ok()) {
            ++missing;
            continue;
        }
        std::map<std::string, msgpack::object> t;
        r.find("task")->convert(t);
        if (t.at("payload").as<std::string>() != "acked" || t.at("time").as<std::int64_t>() != time)
            ++wrong;
    }
    INFO("acknowledged puts: " << acked.puts.size()
                               << ", acknowledged acks: " << acked.acks.size());
    CHECK(acked.puts.size() > 1000);  // the load really ran
    CHECK(acked.acks.size() > 100);
    CHECK(missing == 0);
    CHECK(wrong == 0);
    WARN("crash test: " << acked.puts.size() << " acked puts and " << acked.acks.size()
                        << " acked acks survived 3 kills");

    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    CHECK(text.find("replayed") != std::string::npos);
    std::filesystem::remove_all(dir);
}
