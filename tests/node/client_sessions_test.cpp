// Sessions and release on disconnect, without a network (node/client_sessions.h).
#include <catch2/catch.hpp>

#include "node/client_sessions.h"

using dueq::node::ClientSessions;

TEST_CASE("session ids carry the node's bits and never repeat") {
    ClientSessions s(3, 100, 5000);
    auto a = s.open(), b = s.open();
    CHECK(a != b);
    CHECK((a & 255) == 3);
    CHECK((b & 255) == 3);
}

TEST_CASE("a session that took nothing is forgotten when its connection closes") {
    ClientSessions s(1, 0, 5000);
    auto a = s.open();
    s.close(a, 1000);
    CHECK(s.size() == 0);
    CHECK(s.expire(1'000'000).empty());
}

TEST_CASE("a session that took tasks is released after the grace period, not before") {
    ClientSessions s(1, 0, 5000);
    auto a = s.open();
    s.took_tasks(a, 1000);
    s.close(a, 2000);
    CHECK(s.next_deadline() == 7000);
    CHECK(s.expire(6999).empty());
    auto over = s.expire(7000);
    REQUIRE(over.size() == 1);
    CHECK(over[0] == a);
    CHECK(s.size() == 0);
}

TEST_CASE("resuming within the grace period keeps the session and its tasks") {
    ClientSessions s(1, 0, 5000);
    auto a = s.open();
    s.took_tasks(a, 1000);
    s.close(a, 2000);
    auto b = s.open();  // the client reconnects: a new connection, a new session first
    CHECK(s.resume(b, a, 3000, true));
    CHECK(s.expire(10'000).empty());
    CHECK_FALSE(s.next_deadline());
    s.close(a, 20'000);  // and then goes for good
    CHECK(s.expire(25'000) == std::vector<dueq::queue::SessionId>{a});
}

TEST_CASE("a session another node made is resumed here, and its id is never handed out") {
    ClientSessions s(1, 0, 5000);
    auto a = s.open();
    const dueq::queue::SessionId theirs = (77 << 8) | 2;  // node 2's
    CHECK(s.resume(a, theirs, 0, true));
    CHECK(s.size() == 1);  // a had taken nothing: gone with its connection
    s.close(theirs, 100);  // it holds leases: its grace period starts
    CHECK(s.next_deadline() == 5100);
    // An id of this node's own kind from before a restart: the counter moves past it.
    const dueq::queue::SessionId mine_before = (1000 << 8) | 1;
    auto b = s.open();
    CHECK(s.resume(b, mine_before, 200, false));
    CHECK(s.open() > mine_before);
    CHECK_FALSE(s.resume(b, 0, 200, false));
}

TEST_CASE("a resumed session that holds nothing is forgotten when it closes") {
    ClientSessions s(1, 0, 5000);
    auto a = s.open();
    CHECK(s.resume(a, (5 << 8) | 3, 0, false));
    s.close((5 << 8) | 3, 10);
    CHECK(s.size() == 0);
    CHECK_FALSE(s.next_deadline());
}

TEST_CASE("a new leader gives each lease holder a full grace period unless it is connected") {
    ClientSessions s(2, 0, 5000);
    auto here = s.open();
    const dueq::queue::SessionId gone = (9 << 8) | 1, back = (10 << 8) | 1;
    auto c = s.open();
    CHECK(s.resume(c, back, 500, false));  // came back before the takeover's scan
    s.took_over({gone, back}, 1000);
    CHECK(s.next_deadline() == 6000);
    CHECK(s.expire(5999).empty());
    CHECK(s.expire(6000) == std::vector<dueq::queue::SessionId>{gone});
    // `back` holds tasks now: when it closes, its grace period starts.
    s.close(back, 7000);
    CHECK(s.expire(12'000) == std::vector<dueq::queue::SessionId>{back});
    CHECK(s.size() == 1);  // `here`, connected
    (void)here;
    // A holder that comes back within its grace period keeps its tasks.
    s.took_over({gone}, 20'000);
    auto d = s.open();
    CHECK(s.resume(d, gone, 21'000, true));
    CHECK(s.expire(30'000).empty());
}

TEST_CASE("a take applied after its session went away starts the grace period") {
    ClientSessions s(1, 0, 5000);
    auto a = s.open();
    s.close(a, 1000);       // took nothing yet: forgotten
    s.took_tasks(a, 1500);  // its take is applied now
    CHECK(s.expire(6500) == std::vector<dueq::queue::SessionId>{a});
}

TEST_CASE("with no grace period a session is released at once") {
    ClientSessions s(1, 0, 0);
    auto a = s.open();
    s.took_tasks(a, 1000);
    s.close(a, 2000);
    CHECK(s.expire(2000) == std::vector<dueq::queue::SessionId>{a});
}

TEST_CASE("two connections of one session: released only after both close") {
    ClientSessions s(1, 0, 100);
    auto a = s.open();
    auto b = s.open();
    s.took_tasks(a, 0);
    CHECK(s.resume(b, a, 0, true));  // a now has two connections
    s.close(a, 10);
    CHECK(s.expire(1000).empty());
    s.close(a, 20);
    CHECK(s.expire(120) == std::vector<dueq::queue::SessionId>{a});
}
