#include "raft/message_check.h"

#include "raft/membership.h"

namespace dueq::raft {

namespace {

std::string append_problem(const Message& m) {
    if (m.index == 0 && m.log_term != 0) return "append after index 0 with a nonzero term";
    if (m.log_term > m.term) return "append whose previous entry is newer than its term";
    Term prev_term = m.log_term;
    Millis prev_time = 0;
    for (std::size_t i = 0; i < m.entries.size(); ++i) {
        const Entry& e = m.entries[i];
        if (e.index != m.index + 1 + i) return "append entries not numbered consecutively";
        if (e.term < prev_term || e.term > m.term) return "append entry term out of order";
        if (e.time < prev_time) return "append entry time goes backwards";
        if (e.type == EntryType::config && !decode_membership(e.data.view()))
            return "configuration entry that holds no membership";
        prev_term = e.term;
        prev_time = e.time;
    }
    return {};
}

}  // namespace

std::string message_problem(const Message& m, NodeId from, NodeId self) {
    if (m.from != from) return "sender field names another node than the link's";
    if (m.to != self) return "addressed to another node";
    if (m.type == MessageType::snapshot || m.snapshot) return "snapshot on the message path";
    if (m.term > kMaxSaneIndex || m.index > kMaxSaneIndex || m.log_term > kMaxSaneIndex ||
        m.commit > kMaxSaneIndex || m.hint_index > kMaxSaneIndex ||
        m.entries.size() > kMaxSaneIndex - m.index)
        return "index or term out of range";
    if (m.type == MessageType::append) return append_problem(m);
    if (!m.entries.empty()) return "entries on a message that carries none";
    return {};
}

}  // namespace dueq::raft
