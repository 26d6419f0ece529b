// Prometheus's text exposition format (version 0.0.4, what the DCGM exporter, vLLM's and
// Powerhouse's /metrics serve; OpenMetrics' "# EOF" is understood too) read into samples.
//
// The format, from prometheus.io/docs/instrumenting/exposition_formats:
//   # HELP name text with \\ and \n escapes
//   # TYPE name counter|gauge|histogram|summary|untyped
//   name{label="value",other="with \" \\ \n escapes"} value [timestamp_ms]
// Values are Go floats: NaN, +Inf, -Inf and exponents included. Other '#' lines are comments.
//
// A line that cannot be read is skipped and counted, with the first few reasons kept, instead
// of failing the whole text: one exporter's odd line must not blank a dashboard.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace powerhouse::remote {

struct MetricSample {
    std::string name;
    std::vector<std::pair<std::string, std::string>> labels;  // in the order written, unescaped
    double value = 0;
    std::optional<int64_t> timestamp_ms;

    // The label's value, or nullopt when the sample has no such label.
    std::optional<std::string_view> label(std::string_view key) const;
};

struct PrometheusText {
    std::vector<MetricSample> samples;
    std::map<std::string, std::string> types;  // metric family -> "counter", "gauge", ...
    std::map<std::string, std::string> help;   // metric family -> its HELP text, unescaped
    size_t skipped_lines = 0;
    std::vector<std::string> problems;  // "line 12: ...", the first 10 skipped lines' reasons
};

PrometheusText parse_prometheus(std::string_view text);

// A Go-style float: "1.5", "-2e-3", "NaN", "+Inf", "-Inf", "Inf" (case-insensitive words).
std::optional<double> parse_prometheus_value(std::string_view text);

}  // namespace powerhouse::remote
