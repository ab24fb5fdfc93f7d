// Where the answer to one request goes: a client connection in dueqd (node.cpp), a
// recorder in the simulator. A null ReplyTo: nobody waits for the answer (a command the
// node makes itself).
#pragma once

#include <memory>

#include "shell/raft_shell.h"

namespace dueq::node {

class Replier {
  public:
    virtual ~Replier() = default;
    // False once the client is gone: nothing is sent, and a parked take is not proposed.
    virtual bool open() const = 0;
    // The outcome: ok with the command's result, or an error code and message.
    virtual void answer(const shell::Outcome& outcome) = 0;
};
using ReplyTo = std::shared_ptr<Replier>;

}  // namespace dueq::node
