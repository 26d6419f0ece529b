// powerhouse-cli gpus [--json] [--watch SECONDS] [--count N]
//
// The NVIDIA GPUs of this machine, like a compact nvidia-smi: load, memory, temperature,
// power, clocks, fan, PCIe link and NVLink topology, and what this process uses. With
// POWERHOUSE_SIMULATE_GPUS="RTX 4090:24;A100:80" it shows simulated GPUs, marked as such.
// Without a driver it says so and exits 0 (no GPU is not an error for a CPU-capable program).
// --watch repeats every SECONDS until interrupted (or --count times).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "commands.h"
#include "format.h"
#include "powerhouse/telemetry.h"

namespace powerhouse::cli {
namespace {

struct GpusOptions {
    bool json = false;
    double watch = 0;
    int count = 0;
};

template <class T>
nlohmann::ordered_json opt(const std::optional<T>& v) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json to_json(const TelemetrySnapshot& s) {
    nlohmann::ordered_json out = {{"source", s.source}, {"simulated", s.simulated}, {"status", s.status}};
    nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
    for (size_t i = 0; i < s.gpus.size(); ++i) {
        const GpuInfo& g = s.gpus[i];
        const GpuSample& r = s.latest[i];
        nlohmann::ordered_json throttle = nlohmann::ordered_json::array();
        if (r.throttle_reasons) {
            for (const std::string& name : throttle_reason_names(*r.throttle_reasons)) throttle.push_back(name);
        }
        gpus.push_back({{"index", g.index},
                        {"uuid", g.uuid},
                        {"name", g.name},
                        {"pci_bus_id", g.pci_bus_id},
                        {"simulated", g.simulated},
                        {"responding", r.responding},
                        {"problem", r.problem},
                        {"utilization_gpu_percent", opt(r.gpu_utilization)},
                        {"utilization_memory_percent", opt(r.memory_utilization)},
                        {"memory_total_bytes", g.memory_total},
                        {"memory_used_bytes", opt(r.memory_used)},
                        {"memory_free_bytes", opt(r.memory_free)},
                        {"process_memory_bytes", opt(r.process_memory)},
                        {"temperature_c", opt(r.temperature_c)},
                        {"power_w", opt(r.power_w)},
                        {"power_limit_w", opt(g.power_limit_w)},
                        {"energy_j", opt(r.energy_j)},
                        {"sm_clock_mhz", opt(r.sm_clock_mhz)},
                        {"memory_clock_mhz", opt(r.memory_clock_mhz)},
                        {"fan_percent", opt(r.fan_percent)},
                        {"pcie_generation", opt(g.pcie_generation)},
                        {"pcie_width", opt(g.pcie_width)},
                        {"pcie_max_generation", opt(g.pcie_max_generation)},
                        {"pcie_max_width", opt(g.pcie_max_width)},
                        {"ecc_enabled", opt(g.ecc_enabled)},
                        {"ecc_uncorrected_errors", opt(r.ecc_uncorrected)},
                        {"retired_pages_pending", opt(r.retired_pages_pending)},
                        {"throttle_reasons", throttle}});
    }
    out["gpus"] = std::move(gpus);
    nlohmann::ordered_json links = nlohmann::ordered_json::array();
    for (const GpuLink& l : s.links) links.push_back({{"a", l.a}, {"b", l.b}, {"nvlinks", l.nvlinks}});
    out["nvlink"] = std::move(links);
    return out;
}

template <class T>
std::string or_dash(const std::optional<T>& v, const char* format) {
    return v ? fmt::format(fmt::runtime(format), *v) : std::string("-");
}

void print_table(const TelemetrySnapshot& s) {
    if (!s.status.empty()) {
        std::printf("%s\n", s.status.c_str());
        return;
    }
    std::printf("%s%s\n", s.source.c_str(), s.simulated ? " (SIMULATED GPUs, not real readings)" : "");
    std::printf("%-3s %-26s %5s %5s %21s %10s %11s %8s %4s %s\n", "GPU", "Name", "Load", "Temp", "Memory used/total",
                "Ours", "Power/limit", "SM clock", "Fan", "PCIe");
    for (size_t i = 0; i < s.gpus.size(); ++i) {
        const GpuInfo& g = s.gpus[i];
        const GpuSample& r = s.latest[i];
        std::string name = g.name.size() > 26 ? g.name.substr(0, 25) + "~" : g.name;
        if (!r.responding) {
            std::printf("%-3u %-26s %s\n", g.index, name.c_str(), r.problem.c_str());
            continue;
        }
        const std::string memory = fmt::format("{}/{}", r.memory_used ? format_bytes(*r.memory_used) : "-",
                                               format_bytes(g.memory_total));
        const std::string power = fmt::format("{}/{}", or_dash(r.power_w, "{:.0f}W"), or_dash(g.power_limit_w, "{:.0f}W"));
        const std::string pcie = g.pcie_generation && g.pcie_width
                                     ? fmt::format("Gen{} x{}", *g.pcie_generation, *g.pcie_width)
                                     : std::string("-");
        std::printf("%-3u %-26s %5s %5s %21s %10s %11s %8s %4s %s\n", g.index, name.c_str(),
                    or_dash(r.gpu_utilization, "{}%").c_str(), or_dash(r.temperature_c, "{}C").c_str(), memory.c_str(),
                    r.process_memory ? format_bytes(*r.process_memory).c_str() : "-", power.c_str(),
                    or_dash(r.sm_clock_mhz, "{}MHz").c_str(), or_dash(r.fan_percent, "{}%").c_str(), pcie.c_str());
        // An idle GPU lowers its clocks: not worth a line.
        if (r.throttle_reasons && (*r.throttle_reasons & ~uint64_t{1}) != 0) {
            const auto names = throttle_reason_names(*r.throttle_reasons);
            std::printf("    clocks held back by: %s\n", fmt::format("{}", fmt::join(names, ", ")).c_str());
        }
        if (r.retired_pages_pending.value_or(false)) std::printf("    memory pages wait for retirement: reset the GPU\n");
        if (r.ecc_uncorrected.value_or(0) > 0) {
            std::printf("    %llu uncorrected ECC errors\n", static_cast<unsigned long long>(*r.ecc_uncorrected));
        }
    }
    if (s.gpus.size() > 1) {
        std::printf("Topology:");
        bool any = false;
        for (const GpuLink& l : s.links) {
            std::printf(" GPU%u-GPU%u NVLink x%u;", l.a, l.b, l.nvlinks);
            any = true;
        }
        std::printf("%s\n", any ? " other pairs over PCIe" : " all pairs over PCIe");
    }
}

int run_gpus(const GpusOptions& options) {
    GpuMonitor monitor(options_from_environment());
    for (int shown = 0;; ++shown) {
        const TelemetrySnapshot s = monitor.sample_now();
        if (options.json) {
            std::printf("%s\n", to_json(s).dump(options.watch > 0 ? -1 : 2).c_str());
        } else {
            if (shown > 0) std::printf("\n");
            print_table(s);
        }
        std::fflush(stdout);
        if (options.watch <= 0 || (options.count > 0 && shown + 1 >= options.count)) break;
        std::this_thread::sleep_for(std::chrono::duration<double>(options.watch));
    }
    return 0;
}

}  // namespace

Command add_gpus_command(CLI::App& app) {
    auto options = std::make_shared<GpusOptions>();
    CLI::App* sub = app.add_subcommand("gpus", "Show the NVIDIA GPUs: load, memory, temperature, power, topology");
    sub->add_flag("--json", options->json, "Print JSON (one object per reading)");
    sub->add_option("--watch", options->watch, "Repeat every SECONDS")->check(CLI::Range(0.05, 3600.0));
    sub->add_option("--count", options->count, "With --watch: stop after N readings")->check(CLI::Range(1, 1000000));
    return {sub, [options] { return run_gpus(*options); }};
}

}  // namespace powerhouse::cli
