#include "bench_power.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "format.h"
#include "powerhouse/power.h"

namespace powerhouse::cli {
namespace {

struct ApplyChoice {
    enum class Kind { none, best, knee, watts } kind = Kind::none;
    double watts = 0;
};

// --apply's value: "best", "knee", or a limit in watts ("300", "300W", "300 W").
Result<ApplyChoice> parse_apply(const std::string& text) {
    ApplyChoice out;
    if (text.empty()) return out;
    if (text == "best") {
        out.kind = ApplyChoice::Kind::best;
        return out;
    }
    if (text == "knee") {
        out.kind = ApplyChoice::Kind::knee;
        return out;
    }
    const std::optional<double> watts = parse_watts(text);
    if (!watts) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("--apply takes best (the most tokens per joule), knee (the lowest limit "
                                      "about as fast as the fastest) or a limit in watts, not \"{}\"",
                                      text));
    }
    out.watts = *watts;
    out.kind = ApplyChoice::Kind::watts;
    return out;
}

std::string limits_text(const std::vector<double>& limits_w) { return power_limits_text(limits_w); }

// The GPUs to sweep: those chosen, else those the model runs on (power_sweep_gpus). A model
// on the CPU is swept only on simulated GPUs standing in for it: a real GPU's limit would not
// change the CPU's speed.
Result<ModelGpus> sweep_gpus(const PowerSweepChoice& choice, const TelemetrySnapshot& snapshot,
                             const std::vector<DeviceUsage>& usage) {
    const bool on_cpu = std::all_of(usage.begin(), usage.end(), [](const DeviceUsage& u) { return u.uuid.empty(); });
    if (choice.gpus.empty() || snapshot.gpus.empty() || (on_cpu && !snapshot.simulated)) {
        Result<ModelGpus> found = power_sweep_gpus(snapshot, usage);
        if (found || snapshot.gpus.empty()) return found;
        Error error = found.error();
        error.message += on_cpu ? " (--devices cuda)" : ": name the GPUs to sweep with --sweep-gpus";
        return error;
    }
    ModelGpus out;
    out.stand_in = on_cpu;
    for (const std::string& name : choice.gpus) {
        Result<uint32_t> gpu = find_gpu(snapshot, name);
        if (!gpu) return gpu.error();
        if (std::find(out.gpus.begin(), out.gpus.end(), *gpu) == out.gpus.end()) out.gpus.push_back(*gpu);
    }
    return out;
}

// Leaves the chosen limit set and kept past this process: the limits of one step, or `watts`
// on every GPU. Returns the limits applied, per GPU; on a refusal, what was set goes back.
Result<std::vector<double>> apply_limit(GpuMonitor& monitor, const PowerSweepResult& result, const ApplyChoice& apply) {
    std::vector<double> limits;
    if (apply.kind == ApplyChoice::Kind::watts) {
        limits.assign(result.gpus.size(), apply.watts);
    } else {
        const bool best = apply.kind == ApplyChoice::Kind::best;
        const std::optional<size_t> step = best ? result.most_efficient : result.knee;
        if (!step) {
            return make_error(ErrorCode::unsupported,
                              best ? "no limit can be applied as the most efficient: the GPUs gave no power readings"
                                   : "no limit can be applied as the knee: no step generated anything");
        }
        limits = result.points[*step].limits_w;
    }
    for (size_t i = 0; i < result.gpus.size(); ++i) {
        if (Result<PowerLimits> set = monitor.set_power_limit(result.gpus[i], limits[i]); !set) {
            (void)monitor.restore_power_limits();
            return set.error();
        }
    }
    monitor.keep_power_limits(true);
    return limits;
}

nlohmann::ordered_json sweep_json(const PowerSweepResult& r, const std::optional<std::vector<double>>& applied,
                                  const std::string& apply_text) {
    nlohmann::ordered_json points = nlohmann::ordered_json::array();
    for (const PowerSweepPoint& p : r.points) {
        nlohmann::ordered_json point = {{"limits_w", p.limits_w},
                                        {"total_limit_w", p.total_limit_w},
                                        {"tokens", p.tokens},
                                        {"seconds", p.seconds},
                                        {"tokens_per_second", p.tokens_per_second}};
        point.update(power_point_json(p));
        point["simulated_speed"] = or_null(p.simulated_speed);
        points.push_back(std::move(point));
    }
    const auto index = [](const std::optional<size_t>& i) {
        return i ? nlohmann::ordered_json(*i) : nlohmann::ordered_json(nullptr);
    };
    return {{"gpus", r.gpus},
            {"simulated", r.simulated},
            {"label", r.label},
            {"points", std::move(points)},
            {"most_efficient", index(r.most_efficient)},
            {"knee", index(r.knee)},
            {"knee_tolerance", r.knee_tolerance},
            {"restored_w", r.restored_w},
            {"applied", applied ? nlohmann::ordered_json{{"choice", apply_text}, {"limits_w", *applied}, {"kept", true}}
                                : nlohmann::ordered_json(nullptr)}};
}

void print_sweep(const PowerSweepResult& r, const SweepReport& report, const TelemetrySnapshot& snapshot) {
    std::vector<std::string> names;
    for (const uint32_t g : r.gpus) {
        if (g < snapshot.gpus.size()) names.push_back(snapshot.gpus[g].name);
    }
    std::printf("Power sweep on %s (%s): %s\n", gpu_list_text(r.gpus).c_str(),
                fmt::format("{}", fmt::join(names, ", ")).c_str(), report.test.c_str());
    if (r.simulated) {
        std::printf(
            "SIMULATED: %s; each limit's tokens/s is the speed measured on the CPU times the model's speed "
            "factor at that limit\n",
            r.label.c_str());
    }
    double fastest = 0;
    for (const PowerSweepPoint& p : r.points) fastest = std::max(fastest, p.tokens_per_second);
    const auto of_fastest = [&](const PowerSweepPoint& p) {
        return fastest > 0 ? 100.0 * p.tokens_per_second / fastest : 0.0;
    };
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < r.points.size(); ++i) {
        const PowerSweepPoint& p = r.points[i];
        std::vector<std::string> marks;
        if (r.most_efficient == i) marks.push_back("most efficient");
        if (r.knee == i) marks.push_back("knee");
        rows.push_back({limits_text(p.limits_w), fmt::format("{:.2f}", p.tokens_per_second),
                        fmt::format("{:.1f}%", of_fastest(p)), p.average_w ? fmt::format("{:.1f}", *p.average_w) : "-",
                        p.tokens_per_joule ? fmt::format("{:.4f}", *p.tokens_per_joule) : "-",
                        p.peak_temperature_c ? fmt::format("{:.0f} C", *p.peak_temperature_c) : "-",
                        p.throttle_reasons.empty() ? "-" : fmt::format("{}", fmt::join(p.throttle_reasons, ", ")),
                        fmt::format("{}", fmt::join(marks, ", "))});
    }
    std::printf(
        "\n%s",
        format_table({"limit", "t/s", "of fastest", "avg W", "tokens/J", "peak temp", "slowed by", ""}, rows).c_str());
    std::printf("\n");
    if (r.most_efficient) {
        const PowerSweepPoint& p = r.points[*r.most_efficient];
        std::printf("most efficient: %s (%.4f tokens/J, %.1f%% of the fastest speed)\n",
                    limits_text(p.limits_w).c_str(), *p.tokens_per_joule, of_fastest(p));
    } else {
        std::printf("most efficient: unknown, the GPUs gave no power readings\n");
    }
    if (r.knee) {
        const PowerSweepPoint& p = r.points[*r.knee];
        std::printf("knee: %s, the lowest limit within %.0f%% of the fastest speed (%.1f%% of it)\n",
                    limits_text(p.limits_w).c_str(), 100.0 * r.knee_tolerance, of_fastest(p));
    }
}

}  // namespace

void add_power_sweep_options(CLI::App& bench, PowerSweepChoice& choice) {
    CLI::Option* sweep =
        bench.add_flag("--power-sweep", choice.sweep,
                       "Run the generation (tg) at several GPU power limits and report tokens/s, watts, tokens per "
                       "joule and temperature at each, marking the most efficient limit and the knee; the limits "
                       "are put back at the end unless --apply says otherwise. Changing a limit needs root");
    bench
        .add_option("--power-limits", choice.limits_w,
                    "With --power-sweep: the limits to run at, in watts, e.g. 300,350,400 (default: 100% to 60% "
                    "of each GPU's default limit in steps of 10%)")
        ->delimiter(',')
        ->check(CLI::Validator(
            [](std::string& value) {
                return parse_watts(value)
                           ? std::string()
                           : fmt::format("a power limit is a number of watts above 0, not \"{}\"", value);
            },
            "WATTS"))
        ->needs(sweep);
    bench
        .add_option("--sweep-gpus", choice.gpus,
                    "With --power-sweep: the GPUs whose limit is swept, by index or UUID, e.g. 0,1 (default: the "
                    "GPUs the model runs on)")
        ->delimiter(',')
        ->needs(sweep);
    bench
        .add_option("--apply", choice.apply,
                    "With --power-sweep: leave a limit applied after it: best (the most tokens per joule), knee (the "
                    "lowest limit within 5% of the fastest) or a limit in watts. It stays after the command ends; "
                    "powerhouse-cli power --restore puts back the default")
        ->check(CLI::Validator(
            [](std::string& value) {
                Result<ApplyChoice> apply = parse_apply(value);
                return apply ? std::string() : apply.error().message;
            },
            "best|knee|WATTS"))
        ->needs(sweep);
}

int run_bench_power_sweep(const PowerSweepChoice& choice, GpuMonitor& monitor, const std::vector<DeviceUsage>& usage,
                          const TimedGeneration& generate, SweepReport report) {
    Result<ApplyChoice> apply = parse_apply(choice.apply);
    if (!apply) return report_error(apply.error());
    const TelemetrySnapshot snapshot = monitor.sample_now();
    Result<ModelGpus> gpus = sweep_gpus(choice, snapshot, usage);
    if (!gpus) return report_error(gpus.error());
    // A limit to apply is checked against each GPU's range before the sweep, not after it.
    if (apply->kind == ApplyChoice::Kind::watts) {
        for (const uint32_t g : gpus->gpus) {
            Result<PowerLimits> limits = monitor.power_limits(g);
            if (!limits) return report_error(limits.error());
            if ((limits->min_w && apply->watts < *limits->min_w) || (limits->max_w && apply->watts > *limits->max_w)) {
                return report_error(
                    make_error(ErrorCode::invalid_argument,
                               fmt::format("--apply {} W is outside GPU {}'s range, {} W to {} W", apply->watts, g,
                                           limits->min_w.value_or(0), limits->max_w.value_or(0))));
            }
        }
    }

    PowerSweepOptions options;
    options.gpus = gpus->gpus;
    options.limits_w = choice.limits_w;
    GpuPowerMeter meter(monitor, *gpus);
    const PowerSweepWorkload workload = [&](const PowerSweepStep& step) -> Result<PowerSweepRun> {
        std::fprintf(stderr, "power sweep: step %zu at %s\n", step.index + 1, limits_text(step.limits_w).c_str());
        Result<TimedTokens> timed = generate(meter);
        if (!timed) return timed.error();
        PowerSweepRun run = meter.take(timed->tokens, timed->seconds);
        // The CPU did the work: the stand-in GPUs' power model says how much slower they
        // would have done it at this limit.
        if (meter.gpus().stand_in) run.seconds /= lowest_simulated_speed(run.samples, meter.gpus().gpus);
        return run;
    };
    Result<PowerSweepResult> result = run_power_sweep(monitor, options, workload);
    if (!result) return report_error(result.error());

    std::optional<std::vector<double>> applied;
    if (apply->kind != ApplyChoice::Kind::none) {
        Result<std::vector<double>> set = apply_limit(monitor, *result, *apply);
        if (!set) {
            if (!report.json) print_sweep(*result, report, snapshot);
            return report_error(set.error());
        }
        applied = *set;
    }
    if (report.json) {
        report.out["power_sweep"] = sweep_json(*result, applied, choice.apply);
        std::puts(json_text(report.out, 2).c_str());
        return 0;
    }
    print_sweep(*result, report, snapshot);
    if (!applied) {
        std::printf("The power limits are back at %s, as before the sweep.\n", limits_text(result->restored_w).c_str());
        return 0;
    }
    const char* why = apply->kind == ApplyChoice::Kind::best   ? " (the most efficient)"
                      : apply->kind == ApplyChoice::Kind::knee ? " (the knee)"
                                                               : "";
    std::printf(
        "Applied %s%s to %s and left it so: it stays after this command ends. To put back the default: "
        "%s\n",
        limits_text(*applied).c_str(), why, gpu_list_text(result->gpus).c_str(),
        restore_hint(monitor, result->gpus).c_str());
    if (result->simulated) {
        std::printf(
            "(Simulated GPUs: nothing real was changed, and each new process starts them at their "
            "defaults.)\n");
    }
    return 0;
}

}  // namespace powerhouse::cli
