// What one telemetry sample costs the process (the monitor takes one per second by default,
// so a sample must stay far below 10 ms of CPU to cost under 1% of a core): simulated GPUs,
// and NVML through the tests' fake library (the dlsym'ed calls and the bookkeeping, without
// a driver's own cost, which only a machine with a GPU can show).
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include "powerhouse/telemetry.h"

namespace {

using namespace powerhouse;

void BM_SampleSimulated(benchmark::State& state) {
    GpuMonitorOptions options;
    options.simulate = "RTX 4090:24;RTX 4090:24;A100:80;A100:80";
    GpuMonitor monitor(options);
    for (auto _ : state) benchmark::DoNotOptimize(monitor.sample_now());
}
BENCHMARK(BM_SampleSimulated);

void BM_SampleFakeNvml(benchmark::State& state) {
    setenv("FAKE_NVML_SCENARIO", "normal", 1);
    GpuMonitorOptions options;
    options.nvml = FAKE_NVML_PATH;
    GpuMonitor monitor(options);
    for (auto _ : state) benchmark::DoNotOptimize(monitor.sample_now());
}
BENCHMARK(BM_SampleFakeNvml);

}  // namespace

BENCHMARK_MAIN();
