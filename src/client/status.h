// Errors as values. Every public call of the client library returns a Result<T> or a
// Status; protocol errors and connection failures never travel as exceptions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "wire/error_code.h"

namespace dueq::client {

// The wire error codes of docs/protocol.md; `unknown` stands for a code this version of
// the library does not know (the original string is kept in Error::code_name).
using Code = wire::Code;

std::string_view code_name(Code code);
// Unknown strings map to Code::unknown.
Code code_from_name(std::string_view name);

struct Error {
    Code code = Code::internal;
    std::string message;
    // Set with not_leader and no_quorum when the refusing node knows the leader's client
    // address.
    std::string leader;
    // The code as sent by the server (differs from code_name(code) only for Code::unknown).
    std::string code_name;
    // Client side: the request had been written to a server when the call failed (a broken
    // connection, the client closing, the deadline), so it may have been applied.
    bool maybe_applied = false;
    // Client side: no server could be reached within the call's time; nothing was sent.
    bool unreachable = false;

    Error() = default;
    Error(Code c, std::string msg, std::string leader_addr = {})
        : code(c),
          message(std::move(msg)),
          leader(std::move(leader_addr)),
          code_name(client::code_name(c)) {}

    // "not_leader: this node is a follower (leader 10.0.0.2:7700)"
    std::string to_string() const;
};

// A value or an error. Cheap to move; never throws from ok()/error().
// value() on an error (or error() on a value) is a programming error: it asserts.
template <class T>
class Result {
  public:
    Result(T value) : value_(std::move(value)) {}      // NOLINT: implicit by design
    Result(Error error) : error_(std::move(error)) {}  // NOLINT

    bool ok() const { return value_.has_value(); }
    explicit operator bool() const { return ok(); }

    const T& value() const& { return *value_; }
    T& value() & { return *value_; }
    T&& value() && { return std::move(*value_); }
    const T& operator*() const& { return *value_; }
    T& operator*() & { return *value_; }
    const T* operator->() const { return &*value_; }
    T* operator->() { return &*value_; }

    const Error& error() const { return error_; }
    Code code() const { return ok() ? Code::ok : error_.code; }

  private:
    std::optional<T> value_;
    Error error_;
};

// The empty result of ops that answer `{}` (ping, delete, release, bury).
struct Empty {};
using Status = Result<Empty>;

inline Status ok_status() {
    return Status(Empty{});
}

}  // namespace dueq::client
