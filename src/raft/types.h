// Plain value types shared by the Raft core, its storage and its shell.
//
// Everything here is a copyable value with no behaviour beyond comparison; the core
// owns no pointers into these. Indexes and terms start at 1; 0 means "none".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/millis.h"

namespace dueq::raft {

using Index = std::uint64_t;
using Term = std::uint64_t;
using NodeId = std::uint64_t;  // 0 is "no node"
using Millis = dueq::Millis;   // log time: as the leader's clock saw it (common/millis.h)

constexpr NodeId kNoNode = 0;

enum class EntryType : std::uint8_t {
    normal = 0,  // a command from propose()
    noop = 1,    // appended by each new leader (§3.6.2 / §6.4: commits the prior terms)
    config = 2,  // a membership (raft/membership.h), in force from the moment it is in a log
};

// An entry's payload. It never changes once made, so the log, each Ready, each append
// message and the storage writer share one copy instead of each allocating its own: a
// leader used to copy every payload four or five times on its way out.
class EntryData {
  public:
    EntryData() = default;
    EntryData(std::string s)  // NOLINT: implicit, as the std::string it replaces
        : s_(s.empty() ? nullptr : std::make_shared<const std::string>(std::move(s))) {}
    EntryData(std::string_view s) : EntryData(std::string(s)) {}
    EntryData(const char* s) : EntryData(std::string(s)) {}

    std::string_view view() const { return s_ ? std::string_view(*s_) : std::string_view(); }
    operator std::string_view() const { return view(); }
    const char* data() const { return view().data(); }
    std::size_t size() const { return s_ ? s_->size() : 0; }
    bool empty() const { return size() == 0; }

    bool operator==(const EntryData& o) const { return view() == o.view(); }
    bool operator==(std::string_view o) const { return view() == o; }
    bool operator==(const std::string& o) const { return view() == o; }
    bool operator==(const char* o) const { return view() == o; }

  private:
    std::shared_ptr<const std::string> s_;
};

// One log entry. `time` is the log time the leader stamped on it: never less than the
// time of the entry before it, even across leaders, so that every replica applies the
// same commands at the same, non-decreasing times.
struct Entry {
    Term term = 0;
    Index index = 0;
    Millis time = 0;
    EntryType type = EntryType::normal;
    EntryData data;

    bool operator==(const Entry&) const = default;
};

// The state that must be on disk before any message that depends on it is sent
// (Figure 3.1 "persistent state on all servers"; commit is persisted too so that a
// restart can re-apply without waiting for a leader).
struct HardState {
    Term term = 0;
    NodeId vote = kNoNode;
    Index commit = 0;

    bool operator==(const HardState&) const = default;
    bool empty() const { return term == 0 && vote == kNoNode && commit == 0; }
};

// The last entry a snapshot covers (§5.1). `time` keeps log time monotonic after the
// log before it is gone.
struct SnapshotMeta {
    Index index = 0;
    Term term = 0;
    Millis time = 0;

    bool operator==(const SnapshotMeta&) const = default;
};

// A snapshot: the state machine's bytes at `meta.index`. The core never looks inside
// `data`; the shell produces and installs it.
struct Snapshot {
    SnapshotMeta meta;
    std::string data;
    // The membership at meta.index, encoded (raft/membership.h); empty when the sender
    // did not say. The shell that receives a snapshot fills it from the snapshot's state.
    std::string conf;

    bool empty() const { return meta.index == 0; }
    bool operator==(const Snapshot&) const = default;
};

// Bytes an entry costs against flow-control limits: its payload plus a fixed overhead,
// so that empty entries still count.
inline std::uint64_t entry_cost(const Entry& e) {
    return e.data.size() + 32;
}

}  // namespace dueq::raft
