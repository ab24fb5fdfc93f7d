// The shard map as dueqctl sees it (docs/sharding.md).
#pragma once

#include <optional>
#include <string>

#include "context.h"
#include "output.h"

namespace dueq::dueqctl {

// The answer to `shards` from the first --addr that gives one (a node or a proxy), as
// JSON; nullopt (and why in `why`) when none does.
std::optional<Json> fetch_shard_map(Context& ctx, std::string* why);
void add_shards_command(CLI::App& app, Context& ctx);

}  // namespace dueq::dueqctl
