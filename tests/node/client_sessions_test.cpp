// Sessions and release on disconnect, without a network (node/client_sessions.h).
#include <catch2/catch.hpp>

#include "node/client_sessions.h"

using dueq::node::ClientSessions;

TEST_CASE("session ids carry the node's bits and never repeat") {
    ClientSessions s(3, 100, 5000);
    auto a = s.open(), b = s.open();
    CHECK(a != b);
    CHECK((a & 15) == 3);
    CHECK((b & 15) == 3);
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
    CHECK(s.resume(b, a, 3000));
    CHECK(s.expire(10'000).empty());
    CHECK_FALSE(s.next_deadline());
    s.close(a, 20'000);  // and then goes for good
    CHECK(s.expire(25'000) == std::vector<dueq::queue::SessionId>{a});
}

TEST_CASE("resuming a session that is gone keeps the connection's own") {
    ClientSessions s(1, 0, 5000);
    auto a = s.open();
    CHECK_FALSE(s.resume(a, 12345, 0));
    CHECK(s.size() == 1);
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
    CHECK(s.resume(b, a, 0));  // a now has two connections
    s.close(a, 10);
    CHECK(s.expire(1000).empty());
    s.close(a, 20);
    CHECK(s.expire(120) == std::vector<dueq::queue::SessionId>{a});
}
