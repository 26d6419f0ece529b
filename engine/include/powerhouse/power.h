// Power and heat over a run of work: the efficiency sweep (run the same work at several power
// limits, and find where tokens per joule are best and how low a limit keeps the speed), and
// what throttling cost a generation. The sweep sets the limits through a GpuMonitor and
// leaves the work itself to a callback, so that the engine, a benchmark or a test can be the
// work; the figures it keeps are plain arithmetic over what the callback measured.
//
// Thread-safety: free functions over value types, except run_power_sweep, which calls the
// monitor (thread-safe), the workload and PowerSweepOptions::before_set on the calling
// thread. A GpuPowerMeter is driven (begin, end, take) from one thread; its subscriber runs
// on the monitor's sampler thread and shares the readings under a lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "powerhouse/device_types.h"
#include "powerhouse/result.h"
#include "powerhouse/telemetry.h"

namespace powerhouse {

// The bits of GpuSample::throttle_reasons that mean the GPU is slowed: power cap, hardware
// slowdown, thermal (software and hardware) and power brake. Idle, application clocks, sync
// boost and display clocks are left out: they say nothing about work being held back.
inline constexpr uint64_t kSlowdownReasons = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

// ---- The efficiency sweep ----

// One step: the limit each GPU runs at while the workload runs.
struct PowerSweepStep {
    size_t index = 0;              // 0-based, in the order run
    std::vector<double> limits_w;  // per GPU of the sweep, in PowerSweepResult::gpus order
};

struct PowerSweepOptions {
    std::vector<uint32_t> gpus;  // GpuInfo::index of the GPUs the work runs on; empty: every GPU
    // The limits to run at, in watts, each set on every GPU, in this order. Each must be in
    // every GPU's range (checked before anything is changed). Empty: `fractions` of each GPU's
    // default limit, clamped to its range, in that order (by default 100% of the default down
    // to 60% in steps of 10%).
    std::vector<double> limits_w;
    std::vector<double> fractions = {1.0, 0.9, 0.8, 0.7, 0.6};
    // The knee is the lowest limit whose tokens/s is within this share of the fastest step's.
    double knee_tolerance = 0.05;
    // Called on the sweep's thread before each step's limits are set (none of them is set
    // yet; the GPUs are still at the previous step's, or at their own before the first), so
    // that a caller can record them where a crash mid-step can be undone from. An error
    // stops the sweep at that step: nothing of it is set, the limits of the steps before
    // go back as on any failure, and the sweep fails with that error ("at 405 W: ...").
    // Empty: nothing is called.
    std::function<Result<void>(const PowerSweepStep&)> before_set;
};

// What the workload measured at one step.
struct PowerSweepRun {
    uint64_t tokens = 0;  // generated
    double seconds = 0;   // the time they took
    // The monitor's snapshots taken while the work ran (subscribe() or sample_now()), in time
    // order: their power, temperature and throttle reasons.
    std::vector<TelemetrySnapshot> samples;
    // The energy the sweep's GPUs used over `seconds`, where the caller measured it another way
    // (the GPUs' energy counters); empty: the mean of the samples' summed power x seconds.
    std::optional<double> joules;
};

using PowerSweepWorkload = std::function<Result<PowerSweepRun>(const PowerSweepStep&)>;

struct PowerSweepPoint {
    std::vector<double> limits_w;  // per GPU, as set
    double total_limit_w = 0;      // their sum
    uint64_t tokens = 0;
    double seconds = 0;
    double tokens_per_second = 0;
    std::optional<double> average_w;            // the GPUs together; empty without power readings
    std::optional<double> tokens_per_joule;     // tokens_per_second / average_w
    std::optional<double> peak_temperature_c;   // the hottest reading of any of the GPUs
    uint64_t throttle_mask = 0;                 // kSlowdownReasons bits seen in any sample
    std::vector<std::string> throttle_reasons;  // throttle_reason_names(throttle_mask)
    std::optional<double> simulated_speed;      // simulated GPUs: the model's lowest speed factor seen
};

struct PowerSweepResult {
    std::vector<uint32_t> gpus;            // GpuInfo::index, in the order of every limits_w
    std::vector<PowerSweepPoint> points;   // in the order run
    std::optional<size_t> most_efficient;  // the most tokens per joule (empty without power readings)
    std::optional<size_t> knee;            // the lowest limit within knee_tolerance of the fastest
    double knee_tolerance = 0.05;
    std::vector<double> restored_w;  // per GPU: the limit before the sweep, set back at its end
    // The GPUs are simulated: the watts, temperatures and any slowdown come from a model,
    // not from hardware. `label` says so in words for a table's heading ("" for real GPUs).
    bool simulated = false;
    std::string label;
};

// The limits of each step (per GPU, in `limits` order) for the GPUs' limits and the options:
// options.limits_w as given, or the default fractions clamped to each GPU's range; steps that
// come out the same after clamping are run once. Errors: a given limit outside a GPU's range,
// a GPU that reports no default (then the limits must be given), nothing to run.
Result<std::vector<std::vector<double>>> power_sweep_limits(const std::vector<PowerLimits>& limits,
                                                            const PowerSweepOptions& options);

// A step's limits in words: "450 W" when every GPU has that limit, else "450 W / 300 W" in
// the GPUs' order; "-" for none.
std::string power_limits_text(const std::vector<double>& limits_w);

// GPUs (GpuInfo::index) as a sentence names them: "GPU 0", "GPU 0 and GPU 1", "GPU 0, GPU 1
// and GPU 2".
std::string gpu_list_text(const std::vector<uint32_t>& gpus);

// One step's figures from what the workload measured (`gpus`: which of each snapshot's GPUs
// count). Samples where a GPU did not answer, or gave no power, are left out of the power.
PowerSweepPoint power_sweep_point(const std::vector<uint32_t>& gpus, const std::vector<double>& limits_w,
                                  const PowerSweepRun& run);

// Marks the most efficient step (the most tokens per joule; the lower limit on a tie) and the
// knee: of the steps whose tokens/s is at least (1 - tolerance) x the fastest step's, the one
// with the lowest total limit. The knee is the limit to suggest when speed matters: about
// as fast, for less power; the most efficient may be slower.
void mark_power_sweep(PowerSweepResult& result, double knee_tolerance);

// Runs the sweep: for each step, calls options.before_set, sets every GPU's limit, runs the
// workload, and keeps its figures. The limits the GPUs had before are always set back at the end, also when a limit
// is refused or the workload fails; the sweep then fails with that error (a refused limit's
// words include the nvidia-smi command where the right is missing). A limit that cannot be
// set back fails the sweep too, saying which GPU is left at what.
Result<PowerSweepResult> run_power_sweep(GpuMonitor& monitor, const PowerSweepOptions& options,
                                         const PowerSweepWorkload& workload);

// ---- The GPUs a model runs on, and a meter of their power ----

// The GPUs whose power counts for a loaded model.
struct ModelGpus {
    std::vector<uint32_t> gpus;  // GpuInfo::index
    // Simulated GPUs standing in for a model that runs on the CPU: the meter reports the work
    // to them (GpuMonitor::report_activity) so that their draw follows it, as the desktop
    // dashboard's do, and every figure from them is the power model's, not a measurement.
    bool stand_in = false;
};

// The GPUs the model runs on, matched by UUID (CUDA numbers GPUs otherwise than NVML does).
// A model on the CPU with simulated GPUs present: all of them, as its stand-in. Empty when
// the model runs on no GPU the monitor sees.
ModelGpus model_gpus(const TelemetrySnapshot& snapshot, const std::vector<DeviceUsage>& usage);

// The GPUs a power sweep of the loaded model runs on: model_gpus, or an error (unsupported)
// that says why there are none: no GPU at all; the model runs on the CPU, whose speed no
// GPU's limit changes (simulated GPUs excepted: they stand in for it); or none of the GPUs
// the model runs on is among those the monitor sees. The words name no command's options:
// each caller adds how its user chooses the devices.
Result<ModelGpus> power_sweep_gpus(const TelemetrySnapshot& snapshot, const std::vector<DeviceUsage>& usage);

// The lowest speed factor the power model of simulated GPUs gave any of `gpus` in `samples`
// (GpuSample::simulated_speed); 1 where none was given. The work of stand-ins is the CPU's,
// so its seconds are divided by this to be what the GPUs would have taken at their limits.
double lowest_simulated_speed(const std::vector<TelemetrySnapshot>& samples, const std::vector<uint32_t>& gpus);

// The power of `gpus` over the stretches between begin() and end(): the monitor's snapshots
// taken meanwhile (the sampler's, and one at each end()), and the energy from the GPUs'
// energy counters where every GPU has one, which is exact where a few power readings are not.
class GpuPowerMeter {
public:
    GpuPowerMeter(GpuMonitor& monitor, ModelGpus gpus);
    ~GpuPowerMeter();
    GpuPowerMeter(const GpuPowerMeter&) = delete;
    GpuPowerMeter& operator=(const GpuPowerMeter&) = delete;

    void begin();
    void end();
    // What was read since the last take(), as the sweep's bookkeeping takes it, for `tokens`
    // generated in `seconds` (the generation's own timing, inside the metered stretches):
    // the energy is the counters' over the stretches, scaled to `seconds`.
    PowerSweepRun take(uint64_t tokens, double seconds);

    const ModelGpus& gpus() const { return gpus_; }

private:
    // What the subscriber fills: shared, since the monitor may still be calling it (on its
    // sampler thread) just after unsubscribe() returns.
    struct Samples {
        std::mutex mutex;
        bool active = false;  // between begin() and end()
        std::vector<TelemetrySnapshot> taken;
    };
    GpuMonitor& monitor_;
    ModelGpus gpus_;
    uint64_t subscription_ = 0;
    std::shared_ptr<Samples> samples_ = std::make_shared<Samples>();
    std::vector<std::optional<double>> start_j_;  // per GPU: the counter at begin()
    double joules_ = 0;
    bool counted_ = true;  // every stretch so far had every GPU's counter
    double seconds_ = 0;   // the stretches' length, summed
    std::chrono::steady_clock::time_point started_;
};

// ---- Throttling over a generation ----

struct ThrottleSummary {
    double seconds = 0;                     // covered by the samples: the first one's time to the last's
    double throttled_seconds = 0;           // of those, while a kSlowdownReasons bit was set
    uint64_t reasons = 0;                   // the kSlowdownReasons bits seen
    std::vector<std::string> reason_names;  // throttle_reason_names(reasons): "power cap", "thermal (hardware)"
    // Tokens/s while slowed and while not, where the caller gave per-sample token counts and
    // some time of that kind passed.
    std::optional<double> tokens_per_second_throttled, tokens_per_second_unthrottled;
    // Simulated GPUs (GpuSample::simulated_speed): the share of speed lost over the slowed
    // samples, 1 - their mean speed factor; empty where no slowed sample carried one.
    std::optional<double> simulated_speed_lost;
    bool throttled() const { return throttled_seconds > 0; }
};

// One GPU's samples over a generation, oldest first (GpuMonitor::history). Each sample stands
// for the interval since the one before it, as NVML's readings describe the recent past: the
// first sample opens the window and counts for nothing. `tokens`, if given, has one count
// per sample: the tokens generated in that sample's interval (so tokens[0] is not counted);
// any other length leaves the tokens/s empty. A sample without throttle reasons (not
// answering, or a GPU that does not report them) counts as not slowed.
ThrottleSummary summarize_throttling(const std::vector<GpuSample>& samples, const std::vector<uint64_t>& tokens = {});

}  // namespace powerhouse
