// Errors as values for the Raft core (STYLE: no exceptions for expected outcomes).
#pragma once

#include <string_view>
#include <utility>
#include <variant>

namespace dueq::raft {

enum class Error {
    not_leader,            // propose/read/transfer on a node that is not the leader
    transfer_in_progress,  // the leader is handing over leadership; retry elsewhere
    compacted,             // storage: the requested index is behind the snapshot
    unavailable,           // storage: the requested index is past the last entry
    unknown_peer,          // a message from or to a node outside the configuration
    invalid,               // an argument breaks the contract (empty proposal, self-transfer...)
    change_pending,        // a membership change is not committed yet, or the leader has not
                           // committed an entry of its term: one change at a time (§4.1)
    not_caught_up,         // promoting a learner whose log is too far behind the leader's
};

constexpr std::string_view to_string(Error e) {
    switch (e) {
        case Error::not_leader:
            return "not_leader";
        case Error::transfer_in_progress:
            return "transfer_in_progress";
        case Error::compacted:
            return "compacted";
        case Error::unavailable:
            return "unavailable";
        case Error::unknown_peer:
            return "unknown_peer";
        case Error::invalid:
            return "invalid";
        case Error::change_pending:
            return "change_pending";
        case Error::not_caught_up:
            return "not_caught_up";
    }
    return "?";
}

// A value or an Error. Small on purpose: has_value(), value(), error().
template <class T>
class Result {
  public:
    Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
    Result(Error e) : v_(e) {}                 // NOLINT
    bool has_value() const { return v_.index() == 0; }
    explicit operator bool() const { return has_value(); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    const T& operator*() const& { return value(); }
    Error error() const { return std::get<1>(v_); }

  private:
    std::variant<T, Error> v_;
};

// Success or an Error.
class Status {
  public:
    Status() = default;
    Status(Error e) : ok_(false), e_(e) {}  // NOLINT
    static Status ok() { return {}; }
    bool is_ok() const { return ok_; }
    explicit operator bool() const { return ok_; }
    Error error() const { return e_; }

  private:
    bool ok_ = true;
    Error e_ = Error::invalid;
};

}  // namespace dueq::raft
