// Where the answer to one request goes: a client connection in dueqd (node.cpp), a
// recorder in the simulator. A null ReplyTo: nobody waits for the answer (a command the
// node makes itself).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "shell/raft_shell.h"

namespace dueq::node {

class WritePath;

class Replier {
  public:
    virtual ~Replier() = default;
    // False once the client is gone: nothing is sent, and a parked take is not proposed.
    virtual bool open() const = 0;
    // The outcome: ok with the command's result, or an error code and message.
    virtual void answer(const shell::Outcome& outcome) = 0;
    // A blocking take stopped waiting on the leader (woken, or its wait ran out): what
    // follows is its own latency, what came before was waiting.
    virtual void unparked() {}

  private:
    // The write path's notes on the request it answers. They live here, not in the
    // shell's callback, so that the callback holds one pointer and needs no allocation.
    friend class WritePath;
    WritePath* path_ = nullptr;
    std::optional<std::int64_t> wait_until_;  // a take that waits again if it gets nothing
    bool advance_ = false;                    // an Advance the write path proposed
};
using ReplyTo = std::shared_ptr<Replier>;

}  // namespace dueq::node
