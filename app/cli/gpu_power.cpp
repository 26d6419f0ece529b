#include "gpu_power.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace powerhouse::cli {

Result<uint32_t> find_gpu(const TelemetrySnapshot& snapshot, const std::string& name) {
    const auto there_are = [&] {
        if (snapshot.gpus.empty()) {
            return fmt::format("no GPU was found{}", snapshot.status.empty() ? "" : " (" + snapshot.status + ")");
        }
        std::vector<std::string> known;
        for (const GpuInfo& g : snapshot.gpus) known.push_back(fmt::format("{} ({})", g.index, g.uuid));
        return fmt::format("the GPUs are {}", fmt::join(known, ", "));
    };
    uint32_t index = 0;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), index);
    const bool numeric = !name.empty() && ec == std::errc() && end == name.data() + name.size();
    for (const GpuInfo& g : snapshot.gpus) {
        if (numeric ? g.index == index : g.uuid == name) return g.index;
    }
    return make_error(ErrorCode::invalid_argument,
                      fmt::format("no GPU {} \"{}\": {}", numeric ? "numbered" : "has the UUID", name, there_are()));
}

std::optional<double> parse_watts(std::string text) {
    while (!text.empty() && (text.back() == 'W' || text.back() == 'w' || text.back() == ' ')) text.pop_back();
    double watts = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), watts);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(watts) || watts <= 0) {
        return std::nullopt;
    }
    return watts;
}

MeasuredPower measured_power(GpuPowerMeter& meter, uint64_t tokens, double seconds) {
    MeasuredPower out;
    const PowerSweepRun run = meter.take(tokens, seconds);
    out.energy_counted = run.joules.has_value();
    out.point = power_sweep_point(meter.gpus().gpus, {}, run);
    out.source = fmt::format("{}, {}", gpu_list_text(meter.gpus().gpus),
                             out.energy_counted ? "energy counters" : "power readings");
    return out;
}

nlohmann::ordered_json or_null(const std::optional<double>& v) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json power_point_json(const PowerSweepPoint& p) {
    return {{"average_w", or_null(p.average_w)},
            {"tokens_per_joule", or_null(p.tokens_per_joule)},
            {"peak_temperature_c", or_null(p.peak_temperature_c)},
            {"throttle_reasons", p.throttle_reasons}};
}

nlohmann::ordered_json power_json(const MeasuredPower& power, const std::vector<uint32_t>& gpus) {
    nlohmann::ordered_json out = {{"gpus", gpus},
                                  {"source", power.energy_counted ? "energy counters" : "power readings"}};
    out.update(power_point_json(power.point));
    return out;
}

std::string power_text(const MeasuredPower& power) {
    const PowerSweepPoint& p = power.point;
    if (!p.average_w) return fmt::format("no readings from {}", power.source);
    std::string text = fmt::format("{:.1f} W while generating ({}), {:.4f} tokens/J", *p.average_w, power.source,
                                   p.tokens_per_joule.value_or(0.0));
    if (p.peak_temperature_c) text += fmt::format(", peak {:.0f} C", *p.peak_temperature_c);
    if (!p.throttle_reasons.empty()) text += fmt::format(", slowed by {}", fmt::join(p.throttle_reasons, ", "));
    return text;
}

RestoreLimitsOnSignal::RestoreLimitsOnSignal() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, &previous_);
    waiter_ = std::thread([this] {
        int signal = 0;
        sigwait(&signals_, &signal);
        if (done_.load()) return;
        if (GpuMonitor* monitor = monitor_.load()) {
            const Result<void> back = monitor->restore_power_limits();
            std::fprintf(stderr, "\ninterrupted: %s\n",
                         back ? "the power limits are back as they were before"
                              : ("the power limits could not all be put back: " + back.error().message).c_str());
        }
        std::_Exit(128 + signal);
    });
}

RestoreLimitsOnSignal::~RestoreLimitsOnSignal() {
    done_.store(true);
    pthread_kill(waiter_.native_handle(), SIGTERM);  // wakes the waiter, which sees done_
    waiter_.join();
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

std::string restore_hint(GpuMonitor& monitor, const std::vector<uint32_t>& gpus) {
    std::vector<std::string> commands;
    std::vector<std::string> names;
    for (const uint32_t g : gpus) {
        names.push_back(fmt::format("{}", g));
        Result<PowerLimits> limits = monitor.power_limits(g);
        if (limits && limits->default_w) commands.push_back(nvidia_smi_power_limit_command(g, *limits->default_w));
    }
    const TelemetrySnapshot s = monitor.snapshot();
    const bool all = s.gpus.size() == gpus.size();
    std::string hint = fmt::format("powerhouse-cli power --restore{}",
                                   all ? "" : " --gpus " + fmt::format("{}", fmt::join(names, ",")));
    if (!commands.empty()) hint += fmt::format(", or {}", fmt::join(commands, "; "));
    return hint;
}

}  // namespace powerhouse::cli
