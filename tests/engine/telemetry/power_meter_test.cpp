// The GPUs a loaded model runs on (found by UUID; a model on the CPU gets simulated
// stand-ins), the GPUs a power sweep may run on with the reasons there are none, and the
// power meter: readings only between begin() and end(), the stand-ins loaded only
// meanwhile, each take() starting afresh (powerhouse/power.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "powerhouse/power.h"

namespace powerhouse {
namespace {

GpuMonitorOptions simulated(const char* spec) {
    GpuMonitorOptions options;
    options.simulate = spec;
    return options;
}

DeviceUsage on(const std::string& uuid) {
    DeviceUsage u;
    u.name = uuid.empty() ? "CPU" : "GPU";
    u.uuid = uuid;
    return u;
}

TEST(PowerMeter, TheModelsGpusByUuidAndStandInsForTheCpu) {
    GpuMonitor monitor(simulated("RTX 4090:24;RTX 4090:24;A100:80"));
    const TelemetrySnapshot s = monitor.sample_now();
    // Two shards of GPU 2 and one of GPU 0, in the model's order; each GPU once.
    ModelGpus found = model_gpus(s, {on(s.gpus[2].uuid), on(s.gpus[2].uuid), on(s.gpus[0].uuid)});
    EXPECT_EQ(found.gpus, (std::vector<uint32_t>{2, 0}));
    EXPECT_FALSE(found.stand_in);
    // On the CPU, the simulated GPUs stand in for it.
    found = model_gpus(s, {on(""), on("")});
    EXPECT_EQ(found.gpus, (std::vector<uint32_t>{0, 1, 2}));
    EXPECT_TRUE(found.stand_in);
    // A GPU the monitor does not see counts for nothing.
    found = model_gpus(s, {on("GPU-elsewhere")});
    EXPECT_TRUE(found.gpus.empty());
}

TEST(PowerMeter, GpusAndLimitsInWords) {
    EXPECT_EQ(gpu_list_text({0}), "GPU 0");
    EXPECT_EQ(gpu_list_text({0, 2}), "GPU 0 and GPU 2");
    EXPECT_EQ(gpu_list_text({0, 1, 2}), "GPU 0, GPU 1 and GPU 2");
    EXPECT_EQ(power_limits_text({450}), "450 W");
    EXPECT_EQ(power_limits_text({300, 300}), "300 W");
    EXPECT_EQ(power_limits_text({450, 300}), "450 W / 300 W");
    EXPECT_EQ(power_limits_text({}), "-");
}

TEST(PowerMeter, ASweepSaysWhyItHasNoGpuToRunOn) {
    GpuMonitor monitor(simulated("RTX 4090:24;RTX 4090:24"));
    const TelemetrySnapshot s = monitor.sample_now();
    Result<ModelGpus> gpus = power_sweep_gpus(s, {on(s.gpus[1].uuid)});
    ASSERT_TRUE(gpus) << gpus.error().message;
    EXPECT_EQ(gpus->gpus, (std::vector<uint32_t>{1}));
    EXPECT_FALSE(gpus->stand_in);
    gpus = power_sweep_gpus(s, {on("")});  // simulated GPUs stand in for the CPU
    ASSERT_TRUE(gpus);
    EXPECT_TRUE(gpus->stand_in);
    gpus = power_sweep_gpus(s, {on("GPU-elsewhere")});
    ASSERT_FALSE(gpus);
    EXPECT_EQ(gpus.error().code, ErrorCode::unsupported);
    EXPECT_EQ(gpus.error().message,
              "none of the GPUs the model runs on is among those " + s.source + " reports");

    GpuMonitorOptions none;
    none.nvml = "/nonexistent/libnvidia-ml.so.1";
    GpuMonitor nothing(none);
    gpus = power_sweep_gpus(nothing.sample_now(), {on("")});
    ASSERT_FALSE(gpus);
    EXPECT_EQ(gpus.error().message.rfind("a power sweep needs a GPU, and none was found (no NVIDIA driver found", 0), 0u)
        << gpus.error().message;
}

TEST(PowerMeter, ReadsOnlyWhileTheWorkRuns) {
    GpuMonitor monitor(simulated("RTX 4090:24;RTX 4090:24"));
    GpuPowerMeter meter(monitor, ModelGpus{{0, 1}, true});
    monitor.sample_now();  // before begin(): not a sample of the work
    meter.begin();
    // The stand-ins draw what full load draws under their limit (414 W of 450 W each).
    const TelemetrySnapshot during = monitor.sample_now();
    meter.end();
    EXPECT_GT(*during.latest[0].power_w, 300.0);
    EXPECT_LT(*monitor.sample_now().latest[0].power_w, 100.0);  // idle again after end()
    PowerSweepRun run = meter.take(40, 2.0);
    EXPECT_EQ(run.tokens, 40u);
    EXPECT_EQ(run.seconds, 2.0);
    ASSERT_EQ(run.samples.size(), 2u);     // the one taken during the work, and end()'s
    EXPECT_FALSE(run.joules.has_value());  // simulated GPUs have no energy counter
    const PowerSweepPoint p = power_sweep_point({0, 1}, {}, run);
    EXPECT_NEAR(p.average_w.value(), 2 * 414.0, 20.0);
    EXPECT_NEAR(p.tokens_per_joule.value(), 20.0 / p.average_w.value(), 1e-12);
    // At the default limit the power model does not slow the stand-ins.
    EXPECT_EQ(lowest_simulated_speed(run.samples, {0, 1}), 1.0);
    // Another take() starts afresh.
    meter.begin();
    meter.end();
    EXPECT_EQ(meter.take(1, 1.0).samples.size(), 1u);
}

TEST(PowerMeter, TheLowestSimulatedSpeedOfTheGpusCounted) {
    TelemetrySnapshot a, b;
    a.latest.resize(2);
    b.latest.resize(2);
    a.latest[0].simulated_speed = 0.9;
    a.latest[1].simulated_speed = 0.7;  // GPU 1: not counted below
    b.latest[0].simulated_speed = 0.8;
    EXPECT_DOUBLE_EQ(lowest_simulated_speed({a, b}, {0}), 0.8);
    EXPECT_DOUBLE_EQ(lowest_simulated_speed({a, b}, {0, 1}), 0.7);
    EXPECT_DOUBLE_EQ(lowest_simulated_speed({}, {0}), 1.0);
    EXPECT_DOUBLE_EQ(lowest_simulated_speed({a}, {5}), 1.0);  // a GPU the snapshots lack
}

}  // namespace
}  // namespace powerhouse
