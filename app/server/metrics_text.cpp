#include "metrics_text.h"

#include <fmt/format.h>

namespace powerhouse::server {

void add_metric(std::string& out, const char* name, const char* type, const char* help, const std::string& samples) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}", name, help, name, type, samples);
}

std::string label(std::string_view value) {
    std::string out;
    for (char c : value) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

std::string gpu_metrics(const TelemetrySnapshot& t) {
    std::string out;
    std::string load, temp, used, total, power, up;
    for (size_t i = 0; i < t.gpus.size() && i < t.latest.size(); ++i) {
        const GpuInfo& g = t.gpus[i];
        const GpuSample& s = t.latest[i];
        const std::string labels = fmt::format("gpu=\"{}\",uuid=\"{}\",name=\"{}\",simulated=\"{}\"", g.index,
                                               label(g.uuid), label(g.name), g.simulated ? "true" : "false");
        up += fmt::format("powerhouse_gpu_up{{{}}} {}\n", labels, s.responding ? 1 : 0);
        if (s.gpu_utilization)
            load += fmt::format("powerhouse_gpu_utilization_ratio{{{}}} {:.2f}\n", labels, *s.gpu_utilization / 100.0);
        if (s.temperature_c)
            temp += fmt::format("powerhouse_gpu_temperature_celsius{{{}}} {}\n", labels, *s.temperature_c);
        if (s.memory_used) used += fmt::format("powerhouse_gpu_memory_used_bytes{{{}}} {}\n", labels, *s.memory_used);
        total += fmt::format("powerhouse_gpu_memory_total_bytes{{{}}} {}\n", labels, g.memory_total);
        if (s.power_w) power += fmt::format("powerhouse_gpu_power_watts{{{}}} {:.1f}\n", labels, *s.power_w);
    }
    if (!up.empty()) {
        add_metric(out, "powerhouse_gpu_up", "gauge", "Whether the GPU answers (simulated GPUs are labelled so).", up);
        add_metric(out, "powerhouse_gpu_utilization_ratio", "gauge", "Share of time a kernel ran on the GPU.", load);
        add_metric(out, "powerhouse_gpu_temperature_celsius", "gauge", "GPU temperature.", temp);
        add_metric(out, "powerhouse_gpu_memory_used_bytes", "gauge", "GPU memory in use.", used);
        add_metric(out, "powerhouse_gpu_memory_total_bytes", "gauge", "GPU memory in all.", total);
        add_metric(out, "powerhouse_gpu_power_watts", "gauge", "GPU power draw.", power);
    }
    return out;
}

}  // namespace powerhouse::server
