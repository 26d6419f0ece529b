// The GPUs a loaded model runs on, as the monitor numbers them, and the meter of their power
// over stretches of work (powerhouse/power.h).
#include <fmt/format.h>

#include <algorithm>

#include "powerhouse/power.h"

namespace powerhouse {

ModelGpus model_gpus(const TelemetrySnapshot& snapshot, const std::vector<DeviceUsage>& usage) {
    ModelGpus out;
    for (const DeviceUsage& u : usage) {
        if (u.uuid.empty()) continue;
        for (const GpuInfo& g : snapshot.gpus) {
            // Shards of one GPU count it once.
            if (g.uuid == u.uuid && std::find(out.gpus.begin(), out.gpus.end(), g.index) == out.gpus.end()) {
                out.gpus.push_back(g.index);
            }
        }
    }
    const bool on_cpu = std::all_of(usage.begin(), usage.end(), [](const DeviceUsage& u) { return u.uuid.empty(); });
    if (out.gpus.empty() && on_cpu && snapshot.simulated) {
        for (const GpuInfo& g : snapshot.gpus) out.gpus.push_back(g.index);
        out.stand_in = !out.gpus.empty();
    }
    return out;
}


GpuPowerMeter::GpuPowerMeter(GpuMonitor& monitor, ModelGpus gpus) : monitor_(monitor), gpus_(std::move(gpus)) {
    subscription_ = monitor_.subscribe([samples = samples_](const TelemetrySnapshot& s) {
        const std::lock_guard lock(samples->mutex);
        if (samples->active) samples->taken.push_back(s);
    });
}

GpuPowerMeter::~GpuPowerMeter() {
    monitor_.unsubscribe(subscription_);
    if (gpus_.stand_in) {
        for (const uint32_t g : gpus_.gpus) monitor_.report_activity(g, 0.0f, 0);
    }
}

namespace {

// Each GPU's energy counter in `s` (joules), where it has one.
std::vector<std::optional<double>> energy_of(const TelemetrySnapshot& s, const std::vector<uint32_t>& gpus) {
    std::vector<std::optional<double>> out;
    for (const uint32_t g : gpus) {
        out.push_back(g < s.latest.size() && s.latest[g].responding ? s.latest[g].energy_j : std::nullopt);
    }
    return out;
}

}  // namespace

void GpuPowerMeter::begin() {
    // A stand-in GPU draws what the load it is told of draws; a real one needs no telling.
    if (gpus_.stand_in) {
        for (const uint32_t g : gpus_.gpus) monitor_.report_activity(g, 1.0f, 0);
    }
    // The counters before the work, from a reading that is not itself one of its samples.
    start_j_ = energy_of(monitor_.sample_now(), gpus_.gpus);
    const std::lock_guard lock(samples_->mutex);
    samples_->active = true;
    started_ = std::chrono::steady_clock::now();
}

void GpuPowerMeter::end() {
    const TelemetrySnapshot last = monitor_.sample_now();  // the subscriber keeps it as a sample
    const std::vector<std::optional<double>> end_j = energy_of(last, gpus_.gpus);
    {
        const std::lock_guard lock(samples_->mutex);
        samples_->active = false;
        seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    }
    for (size_t i = 0; i < end_j.size(); ++i) {
        // A counter that went backwards (the driver reloaded) counts nothing trustworthy.
        if (i < start_j_.size() && start_j_[i] && end_j[i] && *end_j[i] >= *start_j_[i]) {
            joules_ += *end_j[i] - *start_j_[i];
        } else {
            counted_ = false;
        }
    }
    if (gpus_.stand_in) {
        for (const uint32_t g : gpus_.gpus) monitor_.report_activity(g, 0.0f, 0);
    }
}

PowerSweepRun GpuPowerMeter::take(uint64_t tokens, double seconds) {
    PowerSweepRun run;
    run.tokens = tokens;
    run.seconds = seconds;
    {
        const std::lock_guard lock(samples_->mutex);
        run.samples = std::move(samples_->taken);
        samples_->taken.clear();
    }
    // The counters cover the stretches, a little more than the generation's own time (the
    // readings at each end): their mean power over the generation's time.
    if (counted_ && seconds_ > 0 && !gpus_.gpus.empty()) run.joules = joules_ / seconds_ * seconds;
    joules_ = 0;
    seconds_ = 0;
    counted_ = true;
    return run;
}


Result<ModelGpus> power_sweep_gpus(const TelemetrySnapshot& snapshot, const std::vector<DeviceUsage>& usage) {
    const bool on_cpu = std::all_of(usage.begin(), usage.end(), [](const DeviceUsage& u) { return u.uuid.empty(); });
    if (snapshot.gpus.empty()) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("a power sweep needs a GPU, and none was found{}",
                                      snapshot.status.empty() ? "" : " (" + snapshot.status + ")"));
    }
    if (on_cpu && !snapshot.simulated) {
        return make_error(ErrorCode::unsupported,
                          "the model runs on the CPU, whose speed no GPU power limit changes: load it on the GPUs "
                          "for the sweep");
    }
    ModelGpus found = model_gpus(snapshot, usage);
    if (found.gpus.empty()) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("none of the GPUs the model runs on is among those {} reports", snapshot.source));
    }
    return found;
}

double lowest_simulated_speed(const std::vector<TelemetrySnapshot>& samples, const std::vector<uint32_t>& gpus) {
    double speed = 1;
    for (const TelemetrySnapshot& s : samples) {
        for (const uint32_t g : gpus) {
            if (g < s.latest.size() && s.latest[g].simulated_speed) speed = std::min(speed, *s.latest[g].simulated_speed);
        }
    }
    return speed;
}

}  // namespace powerhouse
