// The CLI's GPU helpers (app/cli/gpu_power.h) on simulated GPUs: a GPU named by index or
// UUID, and what a meter read in words and JSON. The meter itself
// is the engine's (tests/engine/telemetry/power_meter_test.cpp).
#include "gpu_power.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace powerhouse::cli {
namespace {

GpuMonitorOptions simulated(const char* spec) {
    GpuMonitorOptions options;
    options.simulate = spec;
    return options;
}

TEST(GpuPower, FindsAGpuByIndexOrUuid) {
    GpuMonitor monitor(simulated("RTX 4090:24;A100:80"));
    const TelemetrySnapshot s = monitor.sample_now();
    EXPECT_EQ(find_gpu(s, "1").value(), 1u);
    EXPECT_EQ(find_gpu(s, s.gpus[1].uuid).value(), 1u);
    const Result<uint32_t> missing = find_gpu(s, "2");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().message,
              "no GPU numbered \"2\": the GPUs are 0 (" + s.gpus[0].uuid + "), 1 (" + s.gpus[1].uuid + ")");
    EXPECT_FALSE(find_gpu(s, "GPU-nope"));
    EXPECT_FALSE(find_gpu(s, "1x"));
    EXPECT_FALSE(find_gpu(s, ""));
    GpuMonitorOptions none;
    none.nvml = "/nonexistent/libnvidia-ml.so.1";
    GpuMonitor nothing(none);
    const Result<uint32_t> no_gpu = find_gpu(nothing.sample_now(), "0");
    ASSERT_FALSE(no_gpu);
    EXPECT_EQ(no_gpu.error().message.rfind("no GPU numbered \"0\": no GPU was found (no NVIDIA driver found", 0), 0u)
        << no_gpu.error().message;
}

TEST(GpuPower, WhatAMeterReadIsReportedInWordsAndJson) {
    GpuMonitor monitor(simulated("RTX 4090:24;RTX 4090:24"));
    GpuPowerMeter meter(monitor, ModelGpus{{0, 1}, true});
    const MeasuredPower measured = [&] {
        meter.begin();
        meter.end();
        return measured_power(meter, 8, 0.5);
    }();
    EXPECT_FALSE(measured.energy_counted);
    EXPECT_EQ(measured.source, "GPU 0 and GPU 1, power readings");
    const std::string text = power_text(measured);
    EXPECT_EQ(text.rfind(" W while generating (GPU 0 and GPU 1, power readings), "), text.find(' ')) << text;
    const nlohmann::ordered_json json = power_json(measured, {0, 1});
    EXPECT_EQ(json["source"], "power readings");
    EXPECT_TRUE(json["average_w"].is_number());
}

}  // namespace
}  // namespace powerhouse::cli
