// The CLI's GPU helpers (app/cli/gpu_power.h) on simulated GPUs: a GPU named by index or
// UUID, the GPUs a model runs on found by UUID (a model on the CPU gets simulated stand-ins),
// and the power meter: readings only between begin() and end(), the stand-ins loaded only
// meanwhile, and each take() starting afresh.
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

DeviceUsage on(const std::string& uuid) {
    DeviceUsage u;
    u.name = uuid.empty() ? "CPU" : "GPU";
    u.uuid = uuid;
    return u;
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

TEST(GpuPower, TheModelsGpusByUuidAndStandInsForTheCpu) {
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
    EXPECT_EQ(gpu_list_text({0}), "GPU 0");
    EXPECT_EQ(gpu_list_text({0, 2}), "GPU 0 and GPU 2");
    EXPECT_EQ(gpu_list_text({0, 1, 2}), "GPU 0, GPU 1 and GPU 2");
}

TEST(GpuPower, TheMeterReadsOnlyWhileTheWorkRuns) {
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
    ASSERT_EQ(run.samples.size(), 2u);  // the one taken during the work, and end()'s
    EXPECT_FALSE(run.joules.has_value());  // simulated GPUs have no energy counter
    const PowerSweepPoint p = power_sweep_point({0, 1}, {}, run);
    EXPECT_NEAR(p.average_w.value(), 2 * 414.0, 20.0);
    EXPECT_NEAR(p.tokens_per_joule.value(), 20.0 / p.average_w.value(), 1e-12);
    // Another take() starts afresh.
    meter.begin();
    meter.end();
    EXPECT_EQ(meter.take(1, 1.0).samples.size(), 1u);

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
