// The log encoding of commands: one msgpack array per command, tagged by a small
// integer, versioned so that a newer node can read an older log.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "queue/command.h"

namespace dueq::queue {

std::string encode_command(const Command& cmd);
// nullopt if `bytes` is not a command this version understands (corrupt or newer).
std::optional<Command> decode_command(std::string_view bytes);

}  // namespace dueq::queue
