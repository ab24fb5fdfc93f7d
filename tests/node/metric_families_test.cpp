// One home per metric name (src/node/metric_families.h): unique names of Prometheus's
// form, and docs/admin.md's table of series lists exactly those.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "node/metric_families.h"

namespace {

// Every dueq_ and process_ name in the first column of docs/admin.md's table of series.
std::set<std::string> documented_series() {
    std::ifstream in(std::string(DUEQ_SOURCE_DIR) + "/docs/admin.md");
    REQUIRE(in);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    const auto from = text.find("| series | type |");
    REQUIRE(from != std::string::npos);
    std::set<std::string> names;
    std::istringstream rows(text.substr(from));
    const std::regex name("`((?:dueq|process)_[a-z_]+)`");
    for (std::string line; std::getline(rows, line) && line.rfind("|", 0) == 0;) {
        const std::string first = line.substr(0, line.find('|', 1));
        for (auto it = std::sregex_iterator(first.begin(), first.end(), name);
             it != std::sregex_iterator(); ++it)
            names.insert((*it)[1]);
    }
    return names;
}

}  // namespace

TEST_CASE("every metric family is named once, and docs/admin.md lists exactly those") {
    std::set<std::string> names;
    for (const auto* f : dueq::node::metric::kAll) {
        const std::string n(f->name);
        CHECK(names.insert(n).second);
        // process_*: the names of Prometheus's process collector, as every client exports.
        CHECK((n.rfind("dueq_", 0) == 0 || n.rfind("process_", 0) == 0));
        CHECK((f->type == "counter" || f->type == "gauge" || f->type == "histogram"));
        CHECK((f->type == "counter") == (n.size() > 6 && n.substr(n.size() - 6) == "_total"));
        CHECK_FALSE(f->help.empty());
    }
    const auto documented = documented_series();
    CHECK(documented.size() > 30);
    for (const auto& n : names) {
        INFO(n << " is in the code, not in docs/admin.md");
        CHECK(documented.count(n) == 1);
    }
    for (const auto& n : documented) {
        INFO(n << " is in docs/admin.md, not in the code");
        CHECK(names.count(n) == 1);
    }
}
