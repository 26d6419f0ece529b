// The efficiency sweep (powerhouse/power.h): the steps, each step's figures, the marks, and
// the run that asks before_set, sets the limits and always puts them back.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "powerhouse/power.h"

namespace powerhouse {

namespace {

// To NVML's milliwatt, so that steps compare exactly and print as they are set.
double round_to_milliwatt(double watts) {
    return std::round(watts * 1000.0) / 1000.0;
}

// "405 W" when every GPU of the step has that limit, else "405 W, 270 W".
std::string limits_text(const std::vector<double>& limits_w) {
    const bool same = std::all_of(limits_w.begin(), limits_w.end(), [&](double w) { return w == limits_w.front(); });
    if (limits_w.empty()) return "no limit";
    if (same) return fmt::format("{} W", limits_w.front());
    std::string out;
    for (const double w : limits_w) out += fmt::format("{}{} W", out.empty() ? "" : ", ", w);
    return out;
}

}  // namespace

std::string power_limits_text(const std::vector<double>& limits_w) {
    if (limits_w.empty()) return "-";
    const bool same = std::all_of(limits_w.begin(), limits_w.end(), [&](double w) { return w == limits_w.front(); });
    if (same) return fmt::format("{} W", limits_w.front());
    return fmt::format("{} W", fmt::join(limits_w, " W / "));
}

std::string gpu_list_text(const std::vector<uint32_t>& gpus) {
    std::string out;
    for (size_t i = 0; i < gpus.size(); ++i) {
        out += fmt::format("{}GPU {}", i == 0 ? "" : i + 1 == gpus.size() ? " and " : ", ", gpus[i]);
    }
    return out;
}

namespace {

Error sweep_error(ErrorCode code, std::string message) {
    return make_error(code, "power sweep: " + std::move(message));
}

}  // namespace

Result<std::vector<std::vector<double>>> power_sweep_limits(const std::vector<PowerLimits>& limits,
                                                            const PowerSweepOptions& options) {
    if (limits.empty()) return sweep_error(ErrorCode::invalid_argument, "no GPU to run on");
    std::vector<std::vector<double>> steps;
    if (!options.limits_w.empty()) {
        for (const double w : options.limits_w) {
            if (!std::isfinite(w) || w <= 0) {
                return sweep_error(ErrorCode::invalid_argument,
                                   fmt::format("a power limit is a number of watts above 0, not {}", w));
            }
            for (const PowerLimits& l : limits) {
                if ((l.min_w && w < *l.min_w) || (l.max_w && w > *l.max_w)) {
                    return sweep_error(ErrorCode::invalid_argument,
                                       fmt::format("{} W is outside GPU {}'s range, {} W to {} W", w, l.gpu,
                                                   l.min_w.value_or(0), l.max_w.value_or(0)));
                }
            }
            steps.emplace_back(limits.size(), round_to_milliwatt(w));
        }
    } else {
        for (const double f : options.fractions) {
            if (!std::isfinite(f) || f <= 0) {
                return sweep_error(ErrorCode::invalid_argument,
                                   fmt::format("a share of the default limit is a number above 0, not {}", f));
            }
            std::vector<double> step;
            for (const PowerLimits& l : limits) {
                if (!l.default_w) {
                    return sweep_error(ErrorCode::unsupported,
                                       fmt::format("GPU {} does not report its default power limit: give the limits "
                                                   "to run at in watts",
                                                   l.gpu));
                }
                double w = *l.default_w * f;
                if (l.max_w) w = std::min(w, *l.max_w);
                if (l.min_w) w = std::max(w, *l.min_w);
                step.push_back(round_to_milliwatt(w));
            }
            // Clamping can make two shares one limit: it is run once.
            if (std::find(steps.begin(), steps.end(), step) == steps.end()) steps.push_back(std::move(step));
        }
    }
    if (steps.empty()) return sweep_error(ErrorCode::invalid_argument, "no power limits to run at");
    return steps;
}

PowerSweepPoint power_sweep_point(const std::vector<uint32_t>& gpus, const std::vector<double>& limits_w,
                                  const PowerSweepRun& run) {
    PowerSweepPoint p;
    p.limits_w = limits_w;
    for (const double w : limits_w) p.total_limit_w += w;
    p.tokens = run.tokens;
    p.seconds = run.seconds;
    p.tokens_per_second = run.seconds > 0 ? static_cast<double>(run.tokens) / run.seconds : 0.0;
    double power_sum = 0;
    size_t power_samples = 0;
    for (const TelemetrySnapshot& snap : run.samples) {
        // A snapshot's power counts only when every GPU of the sweep gave one: a sum with a
        // GPU missing would read as a saving.
        double total = 0;
        bool complete = true;
        for (const uint32_t gpu : gpus) {
            if (gpu >= snap.latest.size() || !snap.latest[gpu].responding) {
                complete = false;
                continue;
            }
            const GpuSample& s = snap.latest[gpu];
            if (s.power_w)
                total += *s.power_w;
            else
                complete = false;
            if (s.temperature_c) {
                p.peak_temperature_c =
                    std::max(p.peak_temperature_c.value_or(0.0), static_cast<double>(*s.temperature_c));
            }
            if (s.throttle_reasons) p.throttle_mask |= *s.throttle_reasons & kSlowdownReasons;
            if (s.simulated_speed) p.simulated_speed = std::min(p.simulated_speed.value_or(1.0), *s.simulated_speed);
        }
        if (complete) {
            power_sum += total;
            ++power_samples;
        }
    }
    if (run.joules && run.seconds > 0)
        p.average_w = *run.joules / run.seconds;
    else if (power_samples > 0)
        p.average_w = power_sum / static_cast<double>(power_samples);
    if (p.average_w && *p.average_w > 0) p.tokens_per_joule = p.tokens_per_second / *p.average_w;
    p.throttle_reasons = throttle_reason_names(p.throttle_mask);
    return p;
}

void mark_power_sweep(PowerSweepResult& result, double knee_tolerance) {
    result.knee_tolerance = knee_tolerance;
    result.most_efficient.reset();
    result.knee.reset();
    const std::vector<PowerSweepPoint>& points = result.points;
    double fastest = 0;
    for (size_t i = 0; i < points.size(); ++i) {
        const PowerSweepPoint& p = points[i];
        fastest = std::max(fastest, p.tokens_per_second);
        if (!p.tokens_per_joule) continue;
        const std::optional<size_t> best = result.most_efficient;
        if (!best || *p.tokens_per_joule > *points[*best].tokens_per_joule ||
            (*p.tokens_per_joule == *points[*best].tokens_per_joule && p.total_limit_w < points[*best].total_limit_w)) {
            result.most_efficient = i;
        }
    }
    if (fastest <= 0) return;
    for (size_t i = 0; i < points.size(); ++i) {
        if (points[i].tokens_per_second < (1.0 - knee_tolerance) * fastest) continue;
        if (!result.knee || points[i].total_limit_w < points[*result.knee].total_limit_w) result.knee = i;
    }
}

Result<PowerSweepResult> run_power_sweep(GpuMonitor& monitor, const PowerSweepOptions& options,
                                         const PowerSweepWorkload& workload) {
    const TelemetrySnapshot snap = monitor.snapshot();
    PowerSweepResult result;
    result.gpus = options.gpus;
    if (result.gpus.empty()) {
        for (const GpuInfo& g : snap.gpus) result.gpus.push_back(g.index);
    }
    if (result.gpus.empty()) {
        return sweep_error(ErrorCode::unsupported,
                           fmt::format("no GPU to run on{}", snap.status.empty() ? "" : " (" + snap.status + ")"));
    }
    std::vector<PowerLimits> limits;
    for (const uint32_t gpu : result.gpus) {
        Result<PowerLimits> l = monitor.power_limits(gpu);
        if (!l) return sweep_error(l.error().code, l.error().message);
        result.restored_w.push_back(l->current_w.value_or(l->enforced_w.value_or(0)));
        limits.push_back(std::move(l).value());
    }
    Result<std::vector<std::vector<double>>> steps = power_sweep_limits(limits, options);
    if (!steps) return std::move(steps).error();
    result.simulated = snap.simulated;
    if (result.simulated) {
        result.label = "simulated GPUs: the watts, temperatures and speed come from a model, not from hardware";
    }

    // Each step, until one fails; then the limits go back whatever happened.
    std::vector<bool> changed(result.gpus.size(), false);
    std::optional<Error> failure;
    for (size_t k = 0; k < steps->size() && !failure; ++k) {
        const std::vector<double>& step = (*steps)[k];
        // The caller's say before anything of this step is set (a record for a crash, say):
        // refused, the sweep ends here with the limits of the steps before set back.
        if (options.before_set) {
            if (Result<void> ready = options.before_set(PowerSweepStep{k, step}); !ready) {
                failure =
                    sweep_error(ready.error().code, fmt::format("at {}: {}", limits_text(step), ready.error().message));
                break;
            }
        }
        for (size_t i = 0; i < result.gpus.size() && !failure; ++i) {
            Result<PowerLimits> set = monitor.set_power_limit(result.gpus[i], step[i]);
            if (set)
                changed[i] = true;
            else
                failure =
                    sweep_error(set.error().code, fmt::format("at {}: {}", limits_text(step), set.error().message));
        }
        if (failure) break;
        Result<PowerSweepRun> run = workload(PowerSweepStep{k, step});
        if (!run) {
            failure = sweep_error(run.error().code,
                                  fmt::format("the work at {} failed: {}", limits_text(step), run.error().message));
            break;
        }
        result.points.push_back(power_sweep_point(result.gpus, step, *run));
    }
    std::optional<Error> unrestored;
    for (size_t i = 0; i < result.gpus.size(); ++i) {
        if (!changed[i]) continue;
        if (Result<PowerLimits> back = monitor.set_power_limit(result.gpus[i], result.restored_w[i]); !back) {
            const std::string why = fmt::format("GPU {} could not be set back to {} W: {}", result.gpus[i],
                                                result.restored_w[i], back.error().message);
            if (!unrestored)
                unrestored = make_error(back.error().code, why);
            else
                unrestored->message += "; " + why;
        }
    }
    if (failure) {
        failure->message += unrestored
                                ? "; and " + unrestored->message
                                : fmt::format(" (the power limits are back at {})", limits_text(result.restored_w));
        return *std::move(failure);
    }
    if (unrestored) return sweep_error(unrestored->code, "every limit ran, but " + unrestored->message);
    mark_power_sweep(result, options.knee_tolerance);
    return result;
}

}  // namespace powerhouse
