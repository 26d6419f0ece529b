// powerhouse-cli power [--json]
// powerhouse-cli power --set GPU=WATTS [--set GPU=WATTS ...]
// powerhouse-cli power --restore [--gpus GPU,...]
//
// The GPUs' power limits: the limit set now, the one the driver enforces, the default and
// the range, beside the draw. --set changes a limit (GPU by index or UUID) and --restore
// sets each GPU's default limit. Unlike the app and bench --power-sweep, which put back the
// limits they change when they end (GpuMonitor's restore knows only what its own process
// changed), this command exists to change a limit past its own end: it keeps what it sets.
// Setting a limit needs root; without the right, the error gives the nvidia-smi command.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "format.h"
#include "gpu_power.h"
#include "powerhouse/telemetry.h"

namespace powerhouse::cli {
namespace {

struct PowerOptions {
    std::vector<std::string> set;  // GPU=WATTS
    bool restore = false;
    std::vector<std::string> gpus;  // --gpus for --restore; empty: all
    bool json = false;
};

// "0=300", "GPU-8f6d...=300 W": the GPU as named and the watts.
Result<std::pair<std::string, double>> parse_setting(const std::string& text) {
    const size_t eq = text.rfind('=');
    const std::optional<double> watts =
        eq == std::string::npos || eq == 0 ? std::nullopt : parse_watts(text.substr(eq + 1));
    if (!watts) {
        return make_error(
            ErrorCode::invalid_argument,
            fmt::format("--set takes GPU=WATTS, the GPU by index or UUID (for example 0=300), not \"{}\"", text));
    }
    return std::pair{text.substr(0, eq), *watts};
}

std::string watts_or_dash(const std::optional<double>& w) {
    return w ? fmt::format("{} W", *w) : std::string("-");
}

void print_limits(GpuMonitor& monitor, bool json) {
    const TelemetrySnapshot s = monitor.sample_now();
    if (json) {
        nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
        for (size_t i = 0; i < s.gpus.size(); ++i) {
            const GpuInfo& g = s.gpus[i];
            nlohmann::ordered_json one = {{"index", g.index},
                                          {"uuid", g.uuid},
                                          {"name", g.name},
                                          {"power_w", i < s.latest.size() ? or_null(s.latest[i].power_w) : nullptr}};
            if (Result<PowerLimits> l = monitor.power_limits(g.index)) {
                one.update({{"limit_w", or_null(l->current_w)},
                            {"enforced_w", or_null(l->enforced_w)},
                            {"default_w", or_null(l->default_w)},
                            {"min_w", or_null(l->min_w)},
                            {"max_w", or_null(l->max_w)},
                            {"error", nullptr}});
            } else {
                one["error"] = l.error().message;
            }
            gpus.push_back(std::move(one));
        }
        const nlohmann::ordered_json out = {
            {"source", s.source}, {"simulated", s.simulated}, {"status", s.status}, {"gpus", std::move(gpus)}};
        std::printf("%s\n", json_text(out, 2).c_str());
        return;
    }
    if (!s.status.empty()) {
        std::printf("%s\n", s.status.c_str());
        return;
    }
    std::printf("%s%s\n", s.source.c_str(), s.simulated ? " (SIMULATED GPUs, not real readings)" : "");
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> problems;
    for (size_t i = 0; i < s.gpus.size(); ++i) {
        const GpuInfo& g = s.gpus[i];
        const std::string draw = i < s.latest.size() && s.latest[i].power_w
                                     ? fmt::format("{:.0f} W", *s.latest[i].power_w)
                                     : std::string("-");
        Result<PowerLimits> l = monitor.power_limits(g.index);
        if (!l) {
            rows.push_back({fmt::format("{}", g.index), g.name, draw, "-", "-", "-", "-", ""});
            problems.push_back(l.error().message);
            continue;
        }
        const std::string range =
            l->min_w && l->max_w ? fmt::format("{}-{} W", *l->min_w, *l->max_w) : std::string("-");
        const bool changed = l->current_w && l->default_w && *l->current_w != *l->default_w;
        rows.push_back({fmt::format("{}", g.index), g.name, draw, watts_or_dash(l->current_w),
                        watts_or_dash(l->enforced_w), watts_or_dash(l->default_w), range,
                        changed ? "not the default" : ""});
    }
    std::fputs(format_table({"GPU", "name", "draw", "limit", "enforced", "default", "range", ""}, rows).c_str(),
               stdout);
    for (const std::string& p : problems) std::printf("%s\n", p.c_str());
}

// Sets each GPU's limit as asked; on a refusal the ones already set go back.
int set_limits(GpuMonitor& monitor, const std::vector<std::string>& settings, std::vector<uint32_t>& changed,
               FILE* out) {
    const TelemetrySnapshot s = monitor.sample_now();
    // Every GPU named is found before any limit changes.
    std::vector<std::pair<uint32_t, double>> targets;
    for (const std::string& text : settings) {
        Result<std::pair<std::string, double>> setting = parse_setting(text);
        if (!setting) return report_error(setting.error());
        Result<uint32_t> gpu = find_gpu(s, setting->first);
        if (!gpu) return report_error(gpu.error());
        targets.emplace_back(*gpu, setting->second);
    }
    for (const auto& [gpu, watts] : targets) {
        Result<PowerLimits> before = monitor.power_limits(gpu);
        Result<PowerLimits> after = monitor.set_power_limit(gpu, watts);
        if (!after) {
            Error e = after.error();
            if (!changed.empty()) {
                Result<void> back = monitor.restore_power_limits();
                e.message += back ? fmt::format(" ({} put back as it was)", gpu_list_text(changed))
                                  : fmt::format(" (and {}: {})", gpu_list_text(changed), back.error().message);
            }
            return report_error(e);
        }
        changed.push_back(gpu);
        std::fprintf(out, "GPU %u (%s): power limit %s, was %s (default %s)\n", gpu, s.gpus[gpu].name.c_str(),
                     watts_or_dash(after->current_w).c_str(),
                     watts_or_dash(before ? before->current_w : std::nullopt).c_str(),
                     watts_or_dash(after->default_w).c_str());
    }
    return 0;
}

// Sets each chosen GPU's default limit (those at it already are left alone, so that a user
// without the right is not refused for nothing).
int restore_defaults(GpuMonitor& monitor, const std::vector<std::string>& names, std::vector<uint32_t>& changed,
                     FILE* out) {
    const TelemetrySnapshot s = monitor.sample_now();
    std::vector<uint32_t> gpus;
    for (const std::string& name : names) {
        Result<uint32_t> gpu = find_gpu(s, name);
        if (!gpu) return report_error(gpu.error());
        gpus.push_back(*gpu);
    }
    if (names.empty()) {
        for (const GpuInfo& g : s.gpus) gpus.push_back(g.index);
    }
    if (gpus.empty()) {
        return report_error(make_error(
            ErrorCode::unsupported, fmt::format("no GPU was found{}", s.status.empty() ? "" : " (" + s.status + ")")));
    }
    for (const uint32_t g : gpus) {
        Result<PowerLimits> limits = monitor.power_limits(g);
        if (!limits) return report_error(limits.error());
        if (!limits->default_w) {
            return report_error(make_error(ErrorCode::unsupported,
                                           fmt::format("GPU {} does not report its default power limit: set the one "
                                                       "you want with --set {}=WATTS",
                                                       g, g)));
        }
        if (limits->current_w == limits->default_w) {
            std::fprintf(out, "GPU %u (%s): already at its default power limit, %s\n", g, s.gpus[g].name.c_str(),
                         watts_or_dash(limits->default_w).c_str());
            continue;
        }
        Result<PowerLimits> after = monitor.set_power_limit(g, *limits->default_w);
        if (!after) return report_error(after.error());
        changed.push_back(g);
        std::fprintf(out, "GPU %u (%s): power limit back at its default, %s (was %s)\n", g, s.gpus[g].name.c_str(),
                     watts_or_dash(after->current_w).c_str(), watts_or_dash(limits->current_w).c_str());
    }
    return 0;
}

int run_power(const PowerOptions& options) {
    GpuMonitor monitor(options_from_environment());
    // What this command sets is meant to last: the monitor must not put it back at its end,
    // not even after a refusal part-way (what was done then is reported, or put back above).
    monitor.keep_power_limits(true);
    std::vector<uint32_t> changed;
    int status = 0;
    // With --json, standard output holds the JSON alone: what changed goes to stderr.
    FILE* out = options.json ? stderr : stdout;
    if (!options.set.empty()) {
        status = set_limits(monitor, options.set, changed, out);
        if (status == 0 && !changed.empty()) {
            std::fprintf(out,
                         "The limit%s stay%s after this command ends, until you restore %s (%s) or the driver "
                         "resets the GPU.\n",
                         changed.size() == 1 ? "" : "s", changed.size() == 1 ? "s" : "",
                         changed.size() == 1 ? "it" : "them", restore_hint(monitor, changed).c_str());
        }
    } else if (options.restore) {
        status = restore_defaults(monitor, options.gpus, changed, out);
    }
    if (status != 0) return status;
    if (!changed.empty() && monitor.snapshot().simulated) {
        std::fprintf(out,
                     "(Simulated GPUs: nothing real was changed, and each new process starts them at their "
                     "defaults.)\n");
    }
    if (options.json || (options.set.empty() && !options.restore)) print_limits(monitor, options.json);
    return 0;
}

}  // namespace

Command add_power_command(CLI::App& app) {
    auto options = std::make_shared<PowerOptions>();
    CLI::App* sub = app.add_subcommand(
        "power",
        "Show the GPUs' power limits (now, enforced, default, range), or set them. A limit set here stays after the "
        "command ends, unlike those the app and bench --power-sweep change, which they put back when they end; "
        "--restore sets the default limit. Setting a limit needs root: without it, the error gives the "
        "nvidia-smi command to run instead");
    CLI::Option* set = sub->add_option("--set", options->set,
                                       "Set a GPU's power limit: GPU=WATTS, the GPU by index or UUID "
                                       "(e.g. 0=300); may be given once per GPU")
                           ->check(CLI::Validator(
                               [](std::string& value) {
                                   Result<std::pair<std::string, double>> setting = parse_setting(value);
                                   return setting ? std::string() : setting.error().message;
                               },
                               "GPU=WATTS"));
    CLI::Option* restore =
        sub->add_flag("--restore", options->restore, "Set each GPU's default power limit (all GPUs, or --gpus)");
    sub->add_option("--gpus", options->gpus, "With --restore: the GPUs, by index or UUID, e.g. 0,1")
        ->delimiter(',')
        ->needs(restore);
    set->excludes(restore);
    sub->add_flag("--json", options->json, "Print the limits as JSON (after any change)");
    return {sub, [options] { return run_power(*options); }};
}

}  // namespace powerhouse::cli
