#include "node/client_sessions.h"

#include <algorithm>

namespace dueq::node {

queue::SessionId ClientSessions::open() {
    const queue::SessionId id = (++next_ << kNodeBits) | node_bits_;
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

bool ClientSessions::resume(queue::SessionId current, queue::SessionId wanted, std::int64_t now,
                            bool holds_leases) {
    if (wanted == current) return true;
    if (wanted == 0) return false;
    auto [it, fresh] = sessions_.try_emplace(wanted);
    if (fresh) {
        it->second.took_tasks = holds_leases;
        // Never hand out an id a client already speaks for.
        if ((wanted & ((1u << kNodeBits) - 1)) == node_bits_)
            next_ = std::max(next_, wanted >> kNodeBits);
    }
    // Its tasks stay taken: this connection now speaks for it.
    ++it->second.connections;
    stop_grace(wanted, it->second);
    close(current, now);
    return true;
}

void ClientSessions::took_over(const std::vector<queue::SessionId>& holders, std::int64_t now) {
    for (queue::SessionId id : holders) {
        Session& s = sessions_[id];
        s.took_tasks = true;
        if (s.connections == 0) start_grace(id, s, now);
    }
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
