// Writes the Prometheus text exposition format (version 0.0.4): one family at a time,
// its HELP and TYPE lines first, label values escaped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/histogram.h"

namespace dueq::admin {

using Labels = std::vector<std::pair<std::string_view, std::string>>;

// One metric family: what a table of them (node/metric_families.h) gives once per name.
struct Family {
    std::string_view name;
    std::string_view type;  // "counter", "gauge" or "histogram"
    std::string_view help;
};

class PromText {
  public:
    static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

    // Starts a family; `type` is "counter", "gauge" or "histogram".
    void family(std::string_view name, std::string_view type, std::string_view help);
    void sample(std::string_view name, const Labels& labels, double value);
    void sample(std::string_view name, const Labels& labels, std::uint64_t value);
    void sample(std::string_view name, double value) { sample(name, {}, value); }
    void sample(std::string_view name, std::uint64_t value) { sample(name, {}, value); }
    // The _bucket, _sum and _count series of `name` (the family must be a histogram).
    void histogram(std::string_view name, const Labels& labels, const Histogram& h);

    // The same, by family: family(f) writes its HELP and TYPE lines, and the calls that
    // follow without a name add samples to it.
    void family(const Family& f) {
        family(f.name, f.type, f.help);
        current_ = f.name;
    }
    void sample(const Labels& labels, double value) { sample(current_, labels, value); }
    void sample(const Labels& labels, std::uint64_t value) { sample(current_, labels, value); }
    void sample(std::uint64_t value) { sample(current_, {}, value); }
    void sample(double value) { sample(current_, {}, value); }
    void histogram(const Labels& labels, const Histogram& h) { histogram(current_, labels, h); }

    const std::string& text() const { return out_; }

  private:
    void series(std::string_view name, std::string_view suffix, const Labels& labels,
                const std::pair<std::string_view, std::string>* extra);
    std::string out_;
    std::string_view current_;
};

}  // namespace dueq::admin
