#include "report.h"

namespace dueq::bench {

std::string render_report(const std::string& dir) {
    return "TODO " + dir + "\n";
}

}  // namespace dueq::bench
