// bench --power-sweep: the loaded model's timed greedy generation (bench's own measurement)
// at several power limits, with tokens/s, watts, tokens per joule, peak temperature and
// slowdown per limit, the most efficient limit and the knee marked (powerhouse/power.h),
// the limits put back at the end, or one left applied when --apply asks.
//
// On simulated GPUs standing in for a model on the CPU (POWERHOUSE_SIMULATE_GPUS, for tests
// and demos), the watts and temperatures are the power model's and each step's tokens/s is
// the CPU's measured one times the model's speed factor (GpuSample::simulated_speed): the
// table says so.
//
// Thread-safety: called on the command's thread.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpu_power.h"
#include "powerhouse/device_types.h"
#include "powerhouse/result.h"
#include "powerhouse/telemetry.h"

namespace powerhouse::cli {

struct PowerSweepChoice {
    bool sweep = false;
    std::vector<double> limits_w;   // --power-limits; empty: PowerSweepOptions' fractions of the default
    std::vector<std::string> gpus;  // --sweep-gpus, by index or UUID; empty: the model's
    std::string apply;              // --apply: "", "best", "knee" or watts
};

// --power-sweep, --power-limits, --sweep-gpus and --apply on bench.
void add_power_sweep_options(CLI::App& bench, PowerSweepChoice& choice);

// The generation of one sweep step: bench's timed generation, repeated, with the meter
// started and stopped around each generation (not its prompt). Tokens and seconds in all.
struct TimedTokens {
    uint64_t tokens = 0;
    double seconds = 0;
};
using TimedGeneration = std::function<Result<TimedTokens>(GpuPowerMeter& meter)>;

// What the sweep's heading and JSON say about the run.
struct SweepReport {
    std::string test;            // "tg128 @ p512, 3 repetitions per limit after 1 warm-up"
    nlohmann::ordered_json out;  // bench's fields, for --json: the sweep joins them
    bool json = false;
};

// Runs the sweep over the GPUs of `usage` (or those chosen) on `monitor` and prints it.
// Returns the exit status; a refused limit fails with the engine's words (the nvidia-smi
// command included where the right is missing).
int run_bench_power_sweep(const PowerSweepChoice& choice, GpuMonitor& monitor, const std::vector<DeviceUsage>& usage,
                          const TimedGeneration& generate, SweepReport report);

}  // namespace powerhouse::cli
