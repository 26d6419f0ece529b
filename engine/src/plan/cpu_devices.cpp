#include <fmt/format.h>

#include <charconv>
#include <fstream>

#include "powerhouse/plan.h"

namespace powerhouse {

namespace {

// MemAvailable from /proc/meminfo; 0 when it cannot be read.
uint64_t available_ram() {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    uint64_t kib = 0;
    std::string unit;
    while (meminfo >> key >> kib >> unit) {
        if (key == "MemAvailable:") return kib * 1024;
    }
    return 0;
}

}  // namespace

Result<std::vector<DeviceDesc>> cpu_devices(const std::string& spec) {
    uint32_t n = 1;
    if (spec.rfind("cpu:", 0) == 0) {
        const char* begin = spec.data() + 4;
        const char* end = spec.data() + spec.size();
        const auto [ptr, ec] = std::from_chars(begin, end, n);
        if (ec != std::errc() || ptr != end || n == 0 || n > 64) {
            return make_error(ErrorCode::invalid_argument,
                              fmt::format("'{}' is not a CPU device count: write cpu:N with N from 1 to 64", spec));
        }
    } else if (!spec.empty() && spec != "cpu") {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("unknown devices '{}': write cpu for one CPU device, or cpu:N for N virtual CPU "
                                      "devices",
                                      spec));
    }
    const uint64_t ram = available_ram();
    std::vector<DeviceDesc> out(n);
    for (uint32_t i = 0; i < n; ++i) {
        out[i].name = n == 1 ? "CPU" : fmt::format("CPU {}", i);
        out[i].kind = DeviceKind::cpu;
        out[i].total_bytes = out[i].free_bytes = ram / n;
        out[i].bandwidth_gb_s = guess_bandwidth_gb_s("CPU") / n;
    }
    return out;
}

}  // namespace powerhouse
