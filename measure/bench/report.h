// docs/benchmarks.md from the JSON files of one run-all.sh run.
#pragma once

#include <string>

namespace dueq::bench {

// Reads dir/*.json (each a dueq-bench --json output, or run-all.sh's machine.json) and
// renders the page. Throws std::runtime_error naming a file that does not parse.
std::string render_report(const std::string& dir);

}  // namespace dueq::bench
