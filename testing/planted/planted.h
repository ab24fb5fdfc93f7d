// The names of every planted defect, of every layer: what dueqd-test's --plant, the
// simulator's --plant and the tests select one by. The product's code knows only its own
// layer's enum (node/planted_defects.h); this table is test machinery and ships in nothing.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "node/planted_defects.h"

namespace dueq::testing {

// The defect with this name, "none" for none; nullopt for a name no layer has.
std::optional<node::PlantedDefects> parse_planted(std::string_view name);
// The name of the one defect set ("none" when none is, "?" for a set this table lacks).
std::string_view planted_name(const node::PlantedDefects& defects);
// Every name but "none", for the tests that walk them all.
std::vector<std::string_view> planted_names();
// The same names, comma-separated, for --help and for errors.
std::string planted_list();

}  // namespace dueq::testing
