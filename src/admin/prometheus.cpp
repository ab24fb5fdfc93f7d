#include "admin/prometheus.h"

#include <cmath>
#include <cstdio>

namespace dueq::admin {

namespace {

void escape_into(std::string& out, std::string_view v, bool is_help) {
    for (char c : v) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '"' && !is_help) {
            out += "\\\"";
        } else {
            out += c;
        }
    }
}

std::string number(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.15g", v);
    return buf;
}

}  // namespace

void PromText::family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    escape_into(out_, help, true);
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
}

void PromText::series(std::string_view name, std::string_view suffix, const Labels& labels,
                      const std::pair<std::string_view, std::string>* extra) {
    out_ += name;
    out_ += suffix;
    if (labels.empty() && !extra) return;
    out_ += '{';
    bool first = true;
    auto add = [&](std::string_view k, std::string_view v) {
        if (!first) out_ += ',';
        first = false;
        out_ += k;
        out_ += "=\"";
        escape_into(out_, v, false);
        out_ += '"';
    };
    for (const auto& [k, v] : labels)
        add(k, v);
    if (extra) add(extra->first, extra->second);
    out_ += '}';
}

void PromText::sample(std::string_view name, const Labels& labels, double value) {
    series(name, "", labels, nullptr);
    out_ += ' ';
    out_ += number(value);
    out_ += '\n';
}

void PromText::sample(std::string_view name, const Labels& labels, std::uint64_t value) {
    series(name, "", labels, nullptr);
    out_ += ' ';
    out_ += std::to_string(value);
    out_ += '\n';
}

void PromText::histogram(std::string_view name, const Labels& labels, const Histogram& h) {
    const auto bounds = h.bounds();
    for (std::size_t i = 0; i <= bounds.size(); ++i) {
        const std::pair<std::string_view, std::string> le{
            "le", i < bounds.size() ? number(bounds[i]) : "+Inf"};
        series(name, "_bucket", labels, &le);
        out_ += ' ';
        out_ += std::to_string(h.cumulative(i));
        out_ += '\n';
    }
    series(name, "_sum", labels, nullptr);
    out_ += ' ';
    out_ += number(h.sum_seconds());
    out_ += '\n';
    series(name, "_count", labels, nullptr);
    out_ += ' ';
    out_ += std::to_string(h.count());
    out_ += '\n';
}

}  // namespace dueq::admin
