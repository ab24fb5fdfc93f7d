#include "raft/progress.h"

#include <algorithm>

namespace dueq::raft {

void Inflights::add(Index last, std::uint64_t bytes) {
    msgs_.push_back({last, bytes});
    bytes_ += bytes;
}

void Inflights::free_to(Index index) {
    while (!msgs_.empty() && msgs_.front().last <= index)
        free_first();
}

void Inflights::free_first() {
    if (msgs_.empty()) return;
    bytes_ -= msgs_.front().bytes;
    msgs_.pop_front();
}

void Inflights::clear() {
    msgs_.clear();
    bytes_ = 0;
}

void Progress::become_probe() {
    // After a snapshot, the follower holds at least the snapshot's entries.
    if (state == ProgressState::snapshot) {
        next = std::max(match + 1, pending_snapshot + 1);
    } else {
        next = match + 1;
    }
    state = ProgressState::probe;
    ++generation;
    probe_sent = false;
    pending_snapshot = 0;
    ticks_since_progress = 0;
    inflights.clear();
}

void Progress::become_replicate() {
    state = ProgressState::replicate;
    next = match + 1;
    probe_sent = false;
    pending_snapshot = 0;
    ticks_since_progress = 0;
    inflights.clear();
}

void Progress::become_snapshot(Index snapshot_index) {
    state = ProgressState::snapshot;
    ++generation;
    pending_snapshot = snapshot_index;
    probe_sent = false;
    ticks_since_progress = 0;
    inflights.clear();
}

bool Progress::on_ack(Index index) {
    bool advanced = false;
    if (index > match) {
        match = index;
        advanced = true;
        ticks_since_progress = 0;
    }
    next = std::max(next, index + 1);
    probe_sent = false;
    inflights.free_to(index);
    return advanced;
}

bool Progress::paused() const {
    switch (state) {
        case ProgressState::probe:
            return probe_sent;
        case ProgressState::replicate:
            return inflights.full();
        case ProgressState::snapshot:
            return true;
    }
    return true;
}

void Progress::on_sent(Index last, std::uint64_t bytes, bool has_entries) {
    switch (state) {
        case ProgressState::replicate:
            if (has_entries) {
                next = last + 1;
                inflights.add(last, bytes);
            }
            break;
        case ProgressState::probe:
            probe_sent = true;
            break;
        case ProgressState::snapshot:
            break;
    }
}

}  // namespace dueq::raft
