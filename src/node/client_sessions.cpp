#include "node/client_sessions.h"

namespace dueq::node {

queue::SessionId ClientSessions::open() {
    const queue::SessionId id = (++next_ << 4) | node_bits_;
    sessions_[id].connections = 1;
    return id;
}

void ClientSessions::start_grace(queue::SessionId id, Session& s, std::int64_t now) {
    stop_grace(id, s);
    s.grace_until = now + grace_ms_;
    graces_.emplace(s.grace_until, id);
}

void ClientSessions::stop_grace(queue::SessionId id, Session& s) {
    if (s.grace_until < 0) return;
    graces_.erase({s.grace_until, id});
    s.grace_until = -1;
}

bool ClientSessions::resume(queue::SessionId current, queue::SessionId wanted, std::int64_t now) {
    if (wanted == current) return true;
    auto it = sessions_.find(wanted);
    if (it == sessions_.end()) return false;
    // Its tasks stay taken: this connection now speaks for it.
    ++it->second.connections;
    stop_grace(wanted, it->second);
    close(current, now);
    return true;
}

void ClientSessions::close(queue::SessionId session, std::int64_t now) {
    auto it = sessions_.find(session);
    if (it == sessions_.end() || --it->second.connections > 0) return;
    if (!it->second.took_tasks) {
        sessions_.erase(it);
        return;
    }
    // Its tasks stay taken for the grace period, in case the client resumes the session.
    start_grace(session, it->second, now);
}

void ClientSessions::took_tasks(queue::SessionId session, std::int64_t now) {
    auto [it, fresh] = sessions_.try_emplace(session);
    it->second.took_tasks = true;
    // The taker closed before its take was applied and its session is gone: give the
    // tasks the same grace period as any disconnect.
    if (fresh) start_grace(session, it->second, now);
}

std::vector<queue::SessionId> ClientSessions::expire(std::int64_t now) {
    std::vector<queue::SessionId> over;
    while (!graces_.empty() && graces_.begin()->first <= now) {
        const queue::SessionId id = graces_.begin()->second;
        graces_.erase(graces_.begin());
        auto it = sessions_.find(id);
        if (it == sessions_.end() || it->second.connections > 0) continue;
        sessions_.erase(it);
        over.push_back(id);
    }
    return over;
}

std::optional<std::int64_t> ClientSessions::next_deadline() const {
    if (graces_.empty()) return std::nullopt;
    return graces_.begin()->first;
}

}  // namespace dueq::node
