// powerhouse-cli gpus [--json] [--watch SECONDS] [--count N]
// powerhouse-cli gpus --metrics URL [--api-key-file FILE] [--ca-file FILE] [--json] [--watch ...]
//
// The NVIDIA GPUs of this machine, like a compact nvidia-smi: load, memory, temperature,
// power, clocks, fan, PCIe link and NVLink topology, and what this process uses. With
// POWERHOUSE_SIMULATE_GPUS="RTX 4090:24;A100:80" it shows simulated GPUs, marked as such.
// Without a driver it says so and exits 0 (no GPU is not an error for a CPU-capable program).
// --watch repeats every SECONDS until interrupted (or --count times).
// With --metrics, the GPUs of other machines instead, from a Prometheus endpoint (NVIDIA's
// DCGM exporter, vLLM's or a Powerhouse server's /metrics; app/core/remote/remote_gpus.h),
// grouped by host, in the same table, with the engines' figures (requests, KV cache, tokens/s:
// from a counter, only under --watch).
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
#include "remote_cli.h"

#ifdef POWERHOUSE_HAS_REMOTE
#include <map>

#include "remote/remote_gpus.h"
#include "remote/remote_url.h"
#endif

namespace powerhouse::cli {
namespace {

struct GpusOptions {
    bool json = false;
    double watch = 0;
    int count = 0;
    RemoteChoice metrics;  // --metrics URL
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

// `topology`: the NVLink pairs are known (not for remote GPUs: exporters do not say).
void print_table(const TelemetrySnapshot& s, bool topology = true) {
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
    if (topology && s.gpus.size() > 1) {
        std::printf("Topology:");
        bool any = false;
        for (const GpuLink& l : s.links) {
            std::printf(" GPU%u-GPU%u NVLink x%u;", l.a, l.b, l.nvlinks);
            any = true;
        }
        std::printf("%s\n", any ? " other pairs over PCIe" : " all pairs over PCIe");
    }
}

#ifdef POWERHOUSE_HAS_REMOTE

std::string engine_line(const remote::RemoteEngineFigures& e, std::optional<double> rate) {
    std::string line = "Engine " + e.engine + (e.model.empty() ? "" : " serving " + e.model) + ":";
    std::vector<std::string> parts;
    if (e.requests_running) parts.push_back(fmt::format("{:.0f} running", *e.requests_running));
    if (e.requests_waiting) parts.push_back(fmt::format("{:.0f} waiting", *e.requests_waiting));
    if (e.kv_cache_usage) parts.push_back(fmt::format("KV cache {:.0f}%", *e.kv_cache_usage * 100.0));
    if (e.tokens_per_second) {
        parts.push_back(fmt::format("{:.1f} tokens/s", *e.tokens_per_second));
    } else if (rate) {
        parts.push_back(fmt::format("{:.1f} tokens/s", *rate));
    }
    if (e.generation_tokens_total) parts.push_back(fmt::format("{:.0f} tokens generated", *e.generation_tokens_total));
    return line + " " + (parts.empty() ? std::string("no figures") : fmt::format("{}", fmt::join(parts, ", ")));
}

int run_remote_gpus(const GpusOptions& options) {
    Result<std::string> url = remote::normalize_metrics_url(options.metrics.url);
    if (!url) return report_error(url.error());
    Result<remote::ConnectionOptions> connection = connection_options(options.metrics, *url);
    if (!connection) return report_error(connection.error());
    const std::string default_host = remote::split_url(*url)->host;
    // The generation counters of the previous reading, for tokens/s under --watch.
    std::map<std::string, std::pair<double, std::chrono::steady_clock::time_point>> previous;
    for (int shown = 0;; ++shown) {
        const auto now = std::chrono::steady_clock::now();
        Result<remote::PrometheusText> text = remote::fetch_metrics(*url, *connection);
        if (!text) {
            report_error(text.error());
            if (options.watch <= 0) return 1;
        } else {
            const std::vector<remote::RemoteHost> hosts = remote::remote_gpus(text->samples, default_host);
            auto rate_of = [&](const remote::RemoteHost& h, const remote::RemoteEngineFigures& e) {
                std::optional<double> rate;
                const std::string key = h.host + "\n" + e.engine + "\n" + e.model;
                if (!e.generation_tokens_total) return rate;
                if (auto it = previous.find(key); it != previous.end()) {
                    rate = remote::counter_rate(it->second.first, e.generation_tokens_total,
                                                std::chrono::duration<double>(now - it->second.second).count());
                }
                previous[key] = {*e.generation_tokens_total, now};
                return rate;
            };
            if (options.json) {
                nlohmann::ordered_json out = {{"url", *url}};
                nlohmann::ordered_json list = nlohmann::ordered_json::array();
                for (const remote::RemoteHost& h : hosts) {
                    TelemetrySnapshot snapshot;
                    snapshot.gpus = h.gpus;
                    snapshot.latest = h.latest;
                    nlohmann::ordered_json engines = nlohmann::ordered_json::array();
                    for (const remote::RemoteEngineFigures& e : h.engines) {
                        engines.push_back({{"engine", e.engine},
                                           {"model", e.model},
                                           {"requests_running", opt(e.requests_running)},
                                           {"requests_waiting", opt(e.requests_waiting)},
                                           {"kv_cache_usage", opt(e.kv_cache_usage)},
                                           {"tokens_per_second", e.tokens_per_second ? opt(e.tokens_per_second)
                                                                                     : opt(rate_of(h, e))},
                                           {"generation_tokens_total", opt(e.generation_tokens_total)},
                                           {"prompt_tokens_total", opt(e.prompt_tokens_total)}});
                    }
                    list.push_back({{"host", h.host},
                                    {"sources", h.sources},
                                    {"gpus", to_json(snapshot)["gpus"]},
                                    {"engines", std::move(engines)}});
                }
                out["hosts"] = std::move(list);
                std::printf("%s\n", json_text(out, options.watch > 0 ? -1 : 2).c_str());
            } else {
                if (shown > 0) std::printf("\n");
                if (hosts.empty()) {
                    std::printf("No GPU or engine metrics at %s (%zu samples of other metrics)\n", url->c_str(),
                                text->samples.size());
                }
                for (size_t i = 0; i < hosts.size(); ++i) {
                    const remote::RemoteHost& h = hosts[i];
                    if (i > 0) std::printf("\n");
                    TelemetrySnapshot snapshot;
                    snapshot.source = fmt::format("{} ({} at {})", h.host.empty() ? "?" : h.host,
                                                  fmt::join(h.sources, ", "), *url);
                    snapshot.gpus = h.gpus;
                    snapshot.latest = h.latest;
                    snapshot.simulated = std::any_of(h.gpus.begin(), h.gpus.end(), [](const GpuInfo& g) { return g.simulated; });
                    if (h.gpus.empty()) {
                        std::printf("%s: no GPU metrics\n", snapshot.source.c_str());
                    } else {
                        print_table(snapshot, false);
                    }
                    for (const remote::RemoteEngineFigures& e : h.engines) {
                        std::printf("%s\n", engine_line(e, rate_of(h, e)).c_str());
                    }
                }
            }
        }
        std::fflush(stdout);
        if (options.watch <= 0 || (options.count > 0 && shown + 1 >= options.count)) break;
        std::this_thread::sleep_for(std::chrono::duration<double>(options.watch));
    }
    return 0;
}

#endif

int run_gpus(const GpusOptions& options) {
    if (options.metrics.given()) {
#ifdef POWERHOUSE_HAS_REMOTE
        return run_remote_gpus(options);
#else
        return report_error(make_error(ErrorCode::unsupported,
                                       "this build of powerhouse-cli cannot read remote metrics (it was built "
                                       "without libcurl)"));
#endif
    }
    GpuMonitor monitor(options_from_environment());
    for (int shown = 0;; ++shown) {
        const TelemetrySnapshot s = monitor.sample_now();
        if (options.json) {
            std::printf("%s\n", json_text(to_json(s), options.watch > 0 ? -1 : 2).c_str());
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
    add_remote_options(*sub, options->metrics, "--metrics",
                       "Show the GPUs of other machines from a Prometheus endpoint at URL (NVIDIA's DCGM exporter, "
                       "vLLM's or powerhouse-cli serve's /metrics)");
    return {sub, [options] { return run_gpus(*options); }};
}

}  // namespace powerhouse::cli
