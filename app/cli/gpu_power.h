// What bench and power share about GPUs and their power: naming a GPU as the user does
// (index or UUID), the GPUs whose power counts for a loaded model, and a meter of what they
// draw over the stretches of work it is started and stopped around.
//
// Thread-safety: a GpuPowerMeter is driven (begin, end, take) from one thread; its
// subscriber runs on the monitor's sampler thread and shares the readings under a lock.
// RestoreLimitsOnSignal's waiting thread calls only the (thread-safe) monitor.
#pragma once

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "powerhouse/device_types.h"
#include "powerhouse/power.h"
#include "powerhouse/result.h"
#include "powerhouse/telemetry.h"

namespace powerhouse::cli {

// A GPU as the user names it: its index (NVML's, which nvidia-smi's -i takes) or its UUID.
// The error lists the GPUs there are.
Result<uint32_t> find_gpu(const TelemetrySnapshot& snapshot, const std::string& name);

// A power limit as the user writes it: "300", "300W", "300 W", "287.5"; empty unless it
// is a number of watts above 0.
std::optional<double> parse_watts(std::string text);


// What a meter read over a run of generations, in the sweep's terms (power_sweep_point):
// mean watts, tokens per joule, peak temperature, slowdown seen.
struct MeasuredPower {
    PowerSweepPoint point;
    bool energy_counted = false;  // from the energy counters, else from power readings
    std::string source;           // "GPU 0, energy counters"
};
MeasuredPower measured_power(GpuPowerMeter& meter, uint64_t tokens, double seconds);
// JSON's null for an empty value, as the reports write what was not measured.
nlohmann::ordered_json or_null(const std::optional<double>& v);
// A run's power figures, as bench's "power" and each step of a sweep give them: average_w,
// tokens_per_joule, peak_temperature_c, throttle_reasons.
nlohmann::ordered_json power_point_json(const PowerSweepPoint& p);
nlohmann::ordered_json power_json(const MeasuredPower& power, const std::vector<uint32_t>& gpus);
// "412.3 W while generating (GPU 0, energy counters), 0.3012 tokens/J, peak 61 C".
std::string power_text(const MeasuredPower& power);

// While it lives, SIGINT and SIGTERM end the process only after the power limits the watched
// monitor changed are put back: a sweep interrupted (Ctrl-C, a timeout) must not leave a GPU
// at one of its steps' limits. Made before any thread starts, since threads inherit the
// blocked signals; a thread of its own waits for them (sigwait).
class RestoreLimitsOnSignal {
public:
    RestoreLimitsOnSignal();
    ~RestoreLimitsOnSignal();
    RestoreLimitsOnSignal(const RestoreLimitsOnSignal&) = delete;
    RestoreLimitsOnSignal& operator=(const RestoreLimitsOnSignal&) = delete;

    // The monitor whose changes a signal puts back; nullptr before it goes away.
    void watch(GpuMonitor* monitor) { monitor_.store(monitor); }

private:
    sigset_t signals_{}, previous_{};
    std::atomic<GpuMonitor*> monitor_{nullptr};
    std::atomic<bool> done_{false};
    std::thread waiter_;
};

// The GPUs' default limits put back by hand, for the words after a limit is left changed:
// "powerhouse-cli power --restore, or sudo nvidia-smi -i 0 -pl 450".
std::string restore_hint(GpuMonitor& monitor, const std::vector<uint32_t>& gpus);

}  // namespace powerhouse::cli
