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
// True if a log entry of these bytes can be read back by decode_command (the leader
// proposes nothing else: an entry no replica can read would stop each at its index).
// Decodes only an entry larger than a record's largest payload.
bool fits_log_record(std::string_view bytes);

// The queue and key of a command that names a task (put, delete, touch, ack, release,
// bury, merge), read without decoding it: a hint for loading memory ahead of applying
// it, never trusted. nullopt when `bytes` do not start as such a command does.
struct TaskName {
    std::string_view queue, key;
};
std::optional<TaskName> peek_task_name(std::string_view bytes);

}  // namespace dueq::queue
