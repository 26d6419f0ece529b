#include "remote/prometheus.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace powerhouse::remote {
namespace {

constexpr size_t kMaxProblems = 10;

bool is_space(char c) {
    return c == ' ' || c == '\t';
}

std::string_view trim_line(std::string_view s) {
    while (!s.empty() && (is_space(s.front()) || s.front() == '\r')) s.remove_prefix(1);
    while (!s.empty() && (is_space(s.back()) || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

bool is_name_start(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}

bool is_name_char(char c) {
    return is_name_start(c) || std::isdigit(static_cast<unsigned char>(c));
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    }
    return true;
}

// HELP text: \\ and \n are the only escapes.
std::string unescape_help(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == '\\' || s[i + 1] == 'n')) {
            out += s[i + 1] == 'n' ? '\n' : '\\';
            ++i;
        } else {
            out += s[i];
        }
    }
    return out;
}

// Reads one sample line; an error string says why not.
struct LineReader {
    std::string_view s;
    size_t i = 0;

    void skip_spaces() {
        while (i < s.size() && is_space(s[i])) ++i;
    }
    std::string_view name() {
        const size_t start = i;
        if (i < s.size() && is_name_start(s[i])) {
            ++i;
            while (i < s.size() && is_name_char(s[i])) ++i;
        }
        return s.substr(start, i - start);
    }
    // A quoted label value, after its opening quote: \\, \" and \n escapes.
    std::optional<std::string> quoted() {
        std::string out;
        while (i < s.size()) {
            const char c = s[i++];
            if (c == '"') return out;
            if (c == '\\' && i < s.size()) {
                const char e = s[i++];
                if (e == 'n') {
                    out += '\n';
                } else if (e == '\\' || e == '"') {
                    out += e;
                } else {  // not an escape of the format: kept as written
                    out += '\\';
                    out += e;
                }
            } else {
                out += c;
            }
        }
        return std::nullopt;
    }
};

std::optional<std::string> read_sample(std::string_view line, MetricSample& sample) {
    LineReader r{line};
    const std::string_view name = r.name();
    if (name.empty()) return std::string("no metric name");
    sample.name = std::string(name);
    r.skip_spaces();
    if (r.i < line.size() && line[r.i] == '{') {
        ++r.i;
        for (;;) {
            r.skip_spaces();
            if (r.i < line.size() && line[r.i] == '}') {
                ++r.i;
                break;
            }
            const std::string_view key = r.name();
            if (key.empty()) return std::string("a label without a name");
            r.skip_spaces();
            if (r.i >= line.size() || line[r.i] != '=') return fmt::format("label {} has no '='", key);
            ++r.i;
            r.skip_spaces();
            if (r.i >= line.size() || line[r.i] != '"') return fmt::format("label {}'s value is not quoted", key);
            ++r.i;
            std::optional<std::string> value = r.quoted();
            if (!value) return fmt::format("label {}'s value has no closing quote", key);
            sample.labels.emplace_back(std::string(key), std::move(*value));
            r.skip_spaces();
            if (r.i < line.size() && line[r.i] == ',') {
                ++r.i;
                continue;
            }
            if (r.i < line.size() && line[r.i] == '}') {
                ++r.i;
                break;
            }
            return std::string("labels are not closed with '}'");
        }
    }
    r.skip_spaces();
    const size_t value_start = r.i;
    while (r.i < line.size() && !is_space(line[r.i])) ++r.i;
    const std::string_view value_text = line.substr(value_start, r.i - value_start);
    if (value_text.empty()) return std::string("no value");
    const std::optional<double> value = parse_prometheus_value(value_text);
    if (!value) return fmt::format("'{}' is not a number", value_text.substr(0, 40));
    sample.value = *value;
    r.skip_spaces();
    if (r.i < line.size()) {
        const std::string_view stamp = trim_line(line.substr(r.i));
        int64_t ms = 0;
        const auto [end, error] = std::from_chars(stamp.data(), stamp.data() + stamp.size(), ms);
        if (error != std::errc() || end != stamp.data() + stamp.size()) {
            // OpenMetrics writes seconds with a fraction; Prometheus text, integer milliseconds.
            const std::optional<double> seconds = parse_prometheus_value(stamp);
            if (!seconds || !std::isfinite(*seconds))
                return fmt::format("'{}' is not a timestamp", stamp.substr(0, 40));
            ms = static_cast<int64_t>(std::llround(*seconds * 1000.0));
        }
        sample.timestamp_ms = ms;
    }
    return std::nullopt;
}

}  // namespace

std::optional<std::string_view> MetricSample::label(std::string_view key) const {
    for (const auto& [k, v] : labels) {
        if (k == key) return std::string_view(v);
    }
    return std::nullopt;
}

std::optional<double> parse_prometheus_value(std::string_view text) {
    std::string_view t = text;
    bool negative = false;
    if (!t.empty() && (t.front() == '+' || t.front() == '-')) {
        negative = t.front() == '-';
        t.remove_prefix(1);
    }
    if (iequals(t, "inf") || iequals(t, "infinity")) {
        return negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    }
    if (iequals(t, "nan")) return std::numeric_limits<double>::quiet_NaN();
    if (t.empty() || t.front() == '+' || t.front() == '-') return std::nullopt;
    double value = 0;
    const auto [end, error] = std::from_chars(t.data(), t.data() + t.size(), value);
    if (end != t.data() + t.size()) return std::nullopt;
    if (error == std::errc::result_out_of_range) {
        // from_chars reports 1e999 as out of range; Go's ParseFloat gives +Inf, tiny values 0.
        const bool big = t.find_first_of("eE") == std::string_view::npos || t[t.find_first_of("eE") + 1] != '-';
        value = big ? std::numeric_limits<double>::infinity() : 0.0;
    } else if (error != std::errc()) {
        return std::nullopt;
    }
    return negative ? -value : value;
}

PrometheusText parse_prometheus(std::string_view text) {
    PrometheusText out;
    size_t line_number = 0;
    auto skip = [&](std::string reason) {
        ++out.skipped_lines;
        if (out.problems.size() < kMaxProblems) out.problems.push_back(fmt::format("line {}: {}", line_number, reason));
    };
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        ++line_number;
        const std::string_view line = trim_line(text.substr(start, end - start));
        start = end + 1;
        if (line.empty()) continue;
        if (line.front() == '#') {
            std::string_view rest = trim_line(line.substr(1));
            if (rest == "EOF") break;  // OpenMetrics' end
            const bool is_help = rest.substr(0, 5) == "HELP ";
            const bool is_type = rest.substr(0, 5) == "TYPE ";
            if (!is_help && !is_type) continue;  // a comment
            rest = trim_line(rest.substr(5));
            const size_t space = rest.find_first_of(" \t");
            const std::string name(rest.substr(0, space));
            const std::string_view value =
                space == std::string_view::npos ? std::string_view() : trim_line(rest.substr(space));
            if (name.empty()) {
                skip(fmt::format("# {} without a metric name", is_help ? "HELP" : "TYPE"));
            } else if (is_help) {
                out.help[name] = unescape_help(value);
            } else {
                out.types[name] = std::string(value);
            }
            continue;
        }
        MetricSample sample;
        if (std::optional<std::string> problem = read_sample(line, sample)) {
            skip(*problem);
        } else {
            out.samples.push_back(std::move(sample));
        }
    }
    return out;
}

}  // namespace powerhouse::remote
