// The GPU monitor against a fake NVML library (fake_nvml.cpp) and with simulated GPUs:
// readings, missing functions, errors, a GPU that disappears, no driver, history,
// subscribers, PCI bus id matching and the energy arithmetic.
#include "powerhouse/telemetry.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <thread>

namespace powerhouse {
namespace {

using namespace std::chrono_literals;

GpuMonitorOptions fake(const char* scenario, const char* library = FAKE_NVML_PATH) {
    setenv("FAKE_NVML_SCENARIO", scenario, 1);
    GpuMonitorOptions options;
    options.nvml = library;
    options.history = 3;
    return options;
}

TEST(GpuMonitor, ReadsEveryFieldFromNvml) {
    GpuMonitor monitor(fake("normal"));
    const TelemetrySnapshot s = monitor.sample_now();
    EXPECT_EQ(s.status, "");
    EXPECT_EQ(s.source, "NVML (driver 575.51.03)");
    EXPECT_FALSE(s.simulated);
    ASSERT_EQ(s.gpus.size(), 2u);
    ASSERT_EQ(s.latest.size(), 2u);
    const GpuInfo& g0 = s.gpus[0];
    EXPECT_EQ(g0.name, "NVIDIA GeForce RTX 4090");
    EXPECT_EQ(g0.uuid, "GPU-00000000-1111-2222-3333-444444444444");
    EXPECT_EQ(g0.pci_bus_id, "0000:01:00.0");
    EXPECT_EQ(g0.memory_total, 24ull << 30);
    EXPECT_EQ(g0.pcie_generation, 4u);
    EXPECT_EQ(g0.pcie_width, 16u);
    EXPECT_EQ(s.gpus[1].pcie_width, 8u);
    EXPECT_DOUBLE_EQ(g0.power_limit_w.value(), 450.0);
    EXPECT_FALSE(g0.ecc_enabled.has_value());  // "not supported" on a consumer card
    EXPECT_EQ(s.gpus[1].ecc_enabled, true);
    EXPECT_FALSE(g0.simulated);

    const GpuSample& r0 = s.latest[0];
    EXPECT_TRUE(r0.responding);
    EXPECT_EQ(r0.gpu_utilization, 97u);
    EXPECT_EQ(r0.memory_utilization, 61u);
    // Without the driver's reserved 512 MiB (the v2 call), as nvidia-smi shows it.
    EXPECT_EQ(r0.memory_used, 3ull << 30);
    EXPECT_EQ(r0.memory_free, (21ull << 30) - (512ull << 20));
    EXPECT_EQ(r0.temperature_c, 71u);
    EXPECT_DOUBLE_EQ(r0.power_w.value(), 412.345);
    EXPECT_EQ(r0.sm_clock_mhz, 2520u);
    EXPECT_EQ(r0.memory_clock_mhz, 10501u);
    EXPECT_EQ(r0.fan_percent, 64u);
    EXPECT_EQ(r0.process_memory, 2ull << 30);  // this process's share only
    EXPECT_EQ(s.latest[1].process_memory, 0u);
    EXPECT_EQ(throttle_reason_names(r0.throttle_reasons.value()), std::vector<std::string>{"power cap"});
    EXPECT_DOUBLE_EQ(r0.energy_j.value(), 123456.789);
    EXPECT_EQ(s.latest[1].ecc_uncorrected, 2u);
    EXPECT_EQ(s.latest[1].retired_pages_pending, false);

    // Two links each way, seen from both ends; the NVSwitch link is not a GPU pair.
    ASSERT_EQ(s.links.size(), 1u);
    EXPECT_EQ(s.links[0].a, 0u);
    EXPECT_EQ(s.links[0].b, 1u);
    EXPECT_EQ(s.links[0].nvlinks, 2u);
}

TEST(GpuMonitor, MissingFunctionsLeaveFieldsEmpty) {
    GpuMonitor monitor(fake("normal", FAKE_NVML_MINIMAL_PATH));
    const TelemetrySnapshot s = monitor.sample_now();
    EXPECT_EQ(s.status, "");
    EXPECT_EQ(s.source, "NVML");
    ASSERT_EQ(s.gpus.size(), 2u);
    EXPECT_EQ(s.gpus[1].name, "GPU 1");
    EXPECT_TRUE(s.gpus[0].uuid.empty());
    EXPECT_EQ(s.gpus[0].memory_total, 24ull << 30);
    const GpuSample& r = s.latest[0];
    EXPECT_TRUE(r.responding);
    EXPECT_EQ(r.memory_used, 3ull << 30);
    EXPECT_FALSE(r.temperature_c || r.power_w || r.fan_percent || r.gpu_utilization || r.sm_clock_mhz ||
                 r.process_memory || r.throttle_reasons || r.energy_j);
    EXPECT_TRUE(s.links.empty());
}

TEST(GpuMonitor, UnsupportedReadingsAreEmptyNotErrors) {
    GpuMonitor monitor(fake("unsupported"));
    const TelemetrySnapshot s = monitor.sample_now();
    ASSERT_EQ(s.latest.size(), 2u);
    EXPECT_TRUE(s.latest[0].responding);
    EXPECT_FALSE(s.latest[0].temperature_c.has_value());
    EXPECT_FALSE(s.latest[0].power_w.has_value());
    EXPECT_FALSE(s.latest[0].fan_percent.has_value());
    EXPECT_EQ(s.latest[0].gpu_utilization, 97u);
}

TEST(GpuMonitor, AGpuThatDisappearsIsReportedAndTheOthersGoOn) {
    GpuMonitor monitor(fake("lost_after:2"));  // GPU 1 answers twice (the info read counts one)
    TelemetrySnapshot s = monitor.sample_now();
    EXPECT_TRUE(s.latest[1].responding);
    s = monitor.sample_now();
    EXPECT_FALSE(s.latest[1].responding);
    EXPECT_EQ(s.latest[1].problem, "GPU 1 not responding: GPU is lost (NVML error 15)");
    EXPECT_FALSE(s.latest[1].memory_used.has_value());
    EXPECT_TRUE(s.latest[0].responding);
    EXPECT_EQ(s.latest[0].temperature_c, 71u);
    s = monitor.sample_now();
    EXPECT_FALSE(s.latest[1].responding);
}

TEST(GpuMonitor, NoDriverIsAStateNotAFailure) {
    {
        GpuMonitor monitor(fake("no_driver"));
        const TelemetrySnapshot s = monitor.sample_now();
        EXPECT_EQ(s.status, "no NVIDIA driver found (the kernel driver is not loaded)");
        EXPECT_TRUE(s.gpus.empty());
        EXPECT_TRUE(s.latest.empty());
    }
    {
        GpuMonitor monitor(fake("no_gpus"));
        EXPECT_EQ(monitor.sample_now().status, "no NVIDIA GPU found");
    }
    {
        GpuMonitorOptions options;
        options.nvml = "/nonexistent/libnvidia-ml.so.1";
        GpuMonitor monitor(options);
        const TelemetrySnapshot s = monitor.sample_now();
        EXPECT_EQ(s.status, "no NVIDIA driver found (/nonexistent/libnvidia-ml.so.1 could not be loaded)");
        EXPECT_TRUE(s.gpus.empty());
    }
}

TEST(GpuMonitor, KeepsABoundedHistoryAndNotifiesSubscribers) {
    GpuMonitorOptions options = fake("normal");
    options.interval = 10ms;
    GpuMonitor monitor(options);
    std::atomic<int> calls{0};
    const uint64_t id = monitor.subscribe([&](const TelemetrySnapshot& s) {
        if (s.gpus.size() == 2) ++calls;
    });
    monitor.start();
    while (calls.load() < 5) std::this_thread::sleep_for(5ms);
    monitor.unsubscribe(id);
    monitor.stop();
    const int seen = calls.load();
    const std::vector<GpuSample> h = monitor.history(0);
    ASSERT_EQ(h.size(), 3u);  // options.history
    EXPECT_LT(h[0].time, h[1].time);
    EXPECT_LT(h[1].time, h[2].time);
    EXPECT_TRUE(monitor.history(7).empty());
    monitor.sample_now();
    EXPECT_EQ(calls.load(), seen);  // unsubscribed
}

TEST(SimulatedGpus, FollowTheEngineAndSayTheyAreSimulated) {
    GpuMonitorOptions options;
    options.simulate = "RTX 4090:24;RTX 4090:24;A100:80";
    GpuMonitor monitor(options);
    TelemetrySnapshot s = monitor.sample_now();
    EXPECT_TRUE(s.simulated);
    EXPECT_EQ(s.source, "simulated");
    EXPECT_EQ(s.status, "");
    ASSERT_EQ(s.gpus.size(), 3u);
    EXPECT_EQ(s.gpus[2].name, "A100");
    EXPECT_EQ(s.gpus[2].memory_total, 80ull << 30);
    for (const GpuInfo& g : s.gpus) EXPECT_TRUE(g.simulated);
    EXPECT_NE(s.gpus[0].uuid, s.gpus[1].uuid);
    EXPECT_EQ(s.latest[0].gpu_utilization, 0u);
    const double idle_power = s.latest[0].power_w.value();

    monitor.report_activity(0, 1.0f, 20ull << 30);
    for (int i = 0; i < 30; ++i) s = monitor.sample_now();
    EXPECT_GT(s.latest[0].gpu_utilization.value(), 90u);
    EXPECT_GT(s.latest[0].power_w.value(), idle_power * 5);
    EXPECT_LE(s.latest[0].power_w.value(), 450.0);
    EXPECT_GE(s.latest[0].memory_used.value(), 20ull << 30);
    EXPECT_EQ(s.latest[0].process_memory, 20ull << 30);
    EXPECT_EQ(s.latest[1].gpu_utilization, 0u);  // the other one stays idle
}

TEST(SimulatedGpus, AMalformedSpecSaysWhy) {
    for (const char* spec : {"RTX 4090", "RTX 4090:lots", "A100:0", ":24", "A100:80;H100"}) {
        GpuMonitorOptions options;
        options.simulate = spec;
        GpuMonitor monitor(options);
        const TelemetrySnapshot s = monitor.sample_now();
        EXPECT_TRUE(s.gpus.empty()) << spec;
        EXPECT_NE(s.status.find("NAME:GiB"), std::string::npos) << spec << ": " << s.status;
    }
}

TEST(Telemetry, PciBusIdsMatchWhateverTheSpelling) {
    EXPECT_EQ(normalize_pci_bus_id("00000000:41:00.0"), "0000:41:00.0");
    EXPECT_EQ(normalize_pci_bus_id("0000:C1:00.0"), "0000:c1:00.0");
    EXPECT_EQ(normalize_pci_bus_id(" 00000001:01:00.0 "), "0001:01:00.0");
    GpuMonitor monitor(fake("normal"));
    const TelemetrySnapshot s = monitor.sample_now();
    EXPECT_EQ(find_by_pci_bus_id(s, "0000:41:00.0"), 1u);  // as CUDA writes it
    EXPECT_EQ(find_by_pci_bus_id(s, "00000000:01:00.0"), 0u);
    EXPECT_FALSE(find_by_pci_bus_id(s, "0000:02:00.0").has_value());
}

TEST(Telemetry, ThrottleReasonNames) {
    EXPECT_TRUE(throttle_reason_names(0).empty());
    EXPECT_EQ(throttle_reason_names(0x1 | 0x40), (std::vector<std::string>{"idle", "thermal (hardware)"}));
    EXPECT_EQ(throttle_reason_names(0x1000), std::vector<std::string>{"other (0x1000)"});
}

TEST(Telemetry, EnergyIsPowerIntegratedOverTime) {
    EnergyMeter meter;
    meter.add(0.0, 100.0);
    meter.add(1.0, 300.0);  // 200 J
    meter.add(3.0, 300.0);  // 600 J
    meter.add(2.0, 999.0);  // out of order: ignored for the integral
    EXPECT_DOUBLE_EQ(meter.joules(), 800.0);
    EXPECT_DOUBLE_EQ(meter.seconds(), 3.0);
    // 3.6 J per token is 1 kWh per million tokens.
    EXPECT_DOUBLE_EQ(cost_per_million_tokens(3.6, 0.30), 0.30);
}

}  // namespace
}  // namespace powerhouse
