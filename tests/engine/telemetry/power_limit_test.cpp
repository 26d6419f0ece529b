// Power limits through the monitor (issue 24): read and set on the fake NVML library
// (fake_nvml.cpp records every limit set and refuses as the driver does), the words of each
// refusal, restoring, the monitor putting limits back when it goes unless told to keep them,
// and simulated GPUs' limits and the power and speed that follow them.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <string_view>
#include <thread>

#include "engine/telemetry/power_test_support.h"
#include "powerhouse/telemetry.h"

namespace powerhouse {
namespace {

using namespace power_test;

constexpr const char* kGpu0Uuid = "GPU-00000000-1111-2222-3333-444444444444";

TEST(PowerLimits, ReadFromNvml) {
    GpuMonitor monitor(fake_nvml("normal"));
    Result<PowerLimits> l = monitor.power_limits(0);
    ASSERT_TRUE(l) << l.error().message;
    EXPECT_EQ(l->gpu, 0u);
    EXPECT_EQ(l->current_w, 450.0);
    EXPECT_EQ(l->enforced_w, 450.0);
    EXPECT_EQ(l->default_w, 450.0);
    EXPECT_EQ(l->min_w, 150.0);
    EXPECT_EQ(l->max_w, 600.0);
    EXPECT_FALSE(l->changed_from_w.has_value());
    EXPECT_FALSE(l->simulated);
    l = monitor.power_limits(1);
    ASSERT_TRUE(l);
    EXPECT_EQ(l->default_w, 300.0);
    EXPECT_EQ(l->min_w, 100.0);
    EXPECT_EQ(l->max_w, 300.0);
    Result<PowerLimits> none = monitor.power_limits(2);
    EXPECT_TRUE(refused(none, ErrorCode::invalid_argument, "there is no GPU 2: the GPUs are numbered 0 to 1"));
}

TEST(PowerLimits, ASetIsRecordedWithTheLimitBeforeAndRestored) {
    FakeNvmlLimits fake_limits;
    ASSERT_TRUE(fake_limits.loaded());
    GpuMonitor monitor(fake_nvml("normal"));
    Result<PowerLimits> l = monitor.set_power_limit(0, 300);
    ASSERT_TRUE(l) << l.error().message;
    EXPECT_EQ(l->current_w, 300.0);
    EXPECT_EQ(l->enforced_w, 300.0);
    EXPECT_EQ(l->changed_from_w, 450.0);
    EXPECT_EQ(fake_limits.now(0), 300000u);
    // The GPU draws 412 W unlimited; now its limit holds it, and the GPU card's limit follows.
    const TelemetrySnapshot s = monitor.sample_now();
    EXPECT_DOUBLE_EQ(s.latest[0].power_w.value(), 300.0);
    EXPECT_EQ(s.gpus[0].power_limit_w, 300.0);

    // A second change keeps the first "before": restoring goes back to what the GPU had.
    l = monitor.set_power_limit(0, 287.5);
    ASSERT_TRUE(l) << l.error().message;
    EXPECT_EQ(l->changed_from_w, 450.0);
    const std::vector<PowerLimitChange> changes = monitor.power_limit_changes();
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].gpu, 0u);
    EXPECT_EQ(changes[0].uuid, kGpu0Uuid);
    EXPECT_EQ(changes[0].before_w, 450.0);
    EXPECT_EQ(changes[0].now_w, 287.5);

    ASSERT_TRUE(monitor.restore_power_limit(0));
    EXPECT_EQ(fake_limits.now(0), 450000u);
    EXPECT_EQ(fake_limits.sets(0), (std::vector<unsigned int>{300000, 287500, 450000}));
    EXPECT_TRUE(monitor.power_limit_changes().empty());
    EXPECT_FALSE(monitor.power_limits(0)->changed_from_w.has_value());
    EXPECT_EQ(monitor.sample_now().gpus[0].power_limit_w, 450.0);
    // Nothing changed: nothing to do.
    EXPECT_TRUE(monitor.restore_power_limit(1));
    EXPECT_TRUE(fake_limits.sets(1).empty());
}

TEST(PowerLimits, SettingTheLimitBeforeAgainDropsTheRecord) {
    GpuMonitor monitor(fake_nvml("normal"));
    ASSERT_TRUE(monitor.set_power_limit(1, 250));
    ASSERT_EQ(monitor.power_limit_changes().size(), 1u);
    ASSERT_TRUE(monitor.set_power_limit(1, 300));
    EXPECT_TRUE(monitor.power_limit_changes().empty());
}

// Each way the driver refuses a limit, in its own words; nothing is recorded or changed,
// and the GPU that was not refused (or the next call) still goes through.
TEST(PowerLimits, EachRefusalInItsOwnWords) {
    struct Case {
        const char* scenario;
        uint32_t gpu;
        double watts;
        ErrorCode code;
        const char* message;
    };
    const Case cases[] = {
        {"power_denied", 1, 250, ErrorCode::io,
         "Powerhouse lacks the right to change the power limit of GPU 1 (NVIDIA RTX A6000): the NVIDIA driver lets "
         "only root (or users its settings allow) do that. To set it yourself, run: sudo nvidia-smi -i 1 -pl 250"},
        {"power_unsupported", 1, 250, ErrorCode::unsupported,
         "GPU 1 (NVIDIA RTX A6000) does not allow setting its power limit (the driver says: Not Supported (NVML "
         "error 3))"},
        {"normal", 0, 700, ErrorCode::invalid_argument,
         "GPU 0 (NVIDIA GeForce RTX 4090) takes a power limit from 150 W to 600 W; 700 W is outside that range"},
        {"normal", 0, 149.9, ErrorCode::invalid_argument,
         "GPU 0 (NVIDIA GeForce RTX 4090) takes a power limit from 150 W to 600 W; 149.9 W is outside that range"},
        // The driver's own answer, where it does not tell the range to check against first.
        {"power_range_hidden", 0, 700, ErrorCode::invalid_argument,
         "the driver refused 700 W as the power limit of GPU 0 (NVIDIA GeForce RTX 4090): outside the range it "
         "allows, which it does not report (the driver says: Invalid Argument (NVML error 2))"},
        {"set_fails@1", 0, 300, ErrorCode::internal,
         "the driver could not set the power limit of GPU 0 (NVIDIA GeForce RTX 4090) to 300 W (the driver says: "
         "Unknown Error (NVML error 999))"},
    };
    FakeNvmlLimits fake_limits;
    for (const Case& c : cases) {
        GpuMonitor monitor(fake_nvml(c.scenario));
        EXPECT_TRUE(refused(monitor.set_power_limit(c.gpu, c.watts), c.code, c.message)) << c.scenario;
        EXPECT_TRUE(monitor.power_limit_changes().empty()) << c.scenario;
        EXPECT_TRUE(fake_limits.sets(static_cast<int>(c.gpu)).empty()) << c.scenario;
        if (std::string_view(c.scenario) != "power_denied") {
            EXPECT_TRUE(monitor.set_power_limit(0, 400)) << c.scenario;
        }
    }
}

TEST(PowerLimits, TheNvidiaSmiCommandIsTheLimitAsked) {
    GpuMonitor monitor(fake_nvml("power_denied"));
    EXPECT_TRUE(
        refused(monitor.set_power_limit(0, 287.5), ErrorCode::io, "run: sudo nvidia-smi -i 0 -pl 287.5", false));
    EXPECT_EQ(nvidia_smi_power_limit_command(3, 300), "sudo nvidia-smi -i 3 -pl 300");
}

TEST(PowerLimits, TheEndsOfTheRangeAreInAndNonsenseIsOut) {
    FakeNvmlLimits fake_limits;
    GpuMonitor monitor(fake_nvml("normal"));
    EXPECT_TRUE(monitor.set_power_limit(0, 150));
    EXPECT_TRUE(monitor.set_power_limit(0, 600));
    for (const double watts : {0.0, -5.0, std::nan("")}) {
        EXPECT_TRUE(refused(monitor.set_power_limit(0, watts), ErrorCode::invalid_argument,
                            "a power limit is a number of watts above 0", false))
            << watts;
    }
    EXPECT_EQ(fake_limits.sets(0), (std::vector<unsigned int>{150000, 600000}));
    GpuMonitor hidden(fake_nvml("power_range_hidden"));
    const Result<PowerLimits> limits = hidden.power_limits(0);
    ASSERT_TRUE(limits);
    EXPECT_FALSE(limits->min_w || limits->max_w);
}

TEST(PowerLimits, ALostGpuSaysSoAndRestoringNamesIt) {
    FakeNvmlLimits fake_limits;
    GpuMonitor monitor(fake_nvml("lost_after:1"));  // GPU 1's first sample finds it lost
    ASSERT_TRUE(monitor.set_power_limit(0, 400));
    ASSERT_TRUE(monitor.set_power_limit(1, 250));
    monitor.sample_now();
    const std::string lost =
        "GPU 1 (NVIDIA RTX A6000) is lost (fallen off the bus, or gone until a reset): its power limit cannot be read "
        "or changed";
    Result<PowerLimits> l = monitor.power_limits(1);
    EXPECT_TRUE(refused(l, ErrorCode::device_failed, lost));
    EXPECT_TRUE(refused(monitor.set_power_limit(1, 200), ErrorCode::device_failed, lost));

    // GPU 0 goes back; GPU 1 cannot, and stays on the books for a later try.
    Result<void> r = monitor.restore_power_limits();
    EXPECT_TRUE(
        refused(r, ErrorCode::device_failed, "GPU 1's power limit is still 250 W, not back at its 300 W: " + lost));
    EXPECT_EQ(fake_limits.now(0), 450000u);
    const std::vector<PowerLimitChange> left = monitor.power_limit_changes();
    ASSERT_EQ(left.size(), 1u);
    EXPECT_EQ(left[0].gpu, 1u);
}

TEST(PowerLimits, AnOldDriverWithoutTheFunctionsChangesNothing) {
    GpuMonitor monitor(fake_nvml("normal", FAKE_NVML_MINIMAL_PATH));
    const Result<PowerLimits> limits = monitor.power_limits(0);
    ASSERT_TRUE(limits);
    EXPECT_FALSE(limits->current_w || limits->enforced_w || limits->default_w || limits->min_w || limits->max_w);
    Result<PowerLimits> l = monitor.set_power_limit(0, 300);
    EXPECT_TRUE(
        refused(l, ErrorCode::unsupported,
                "GPU 0 does not report its power limit, so Powerhouse could not put it back: it is left as it is"));
}

TEST(PowerLimits, TheMonitorPutsThemBackWhenItGoesUnlessToldToKeepThem) {
    FakeNvmlLimits fake_limits;
    ASSERT_TRUE(fake_limits.loaded());
    {
        GpuMonitor monitor(fake_nvml("normal"));
        monitor.start();  // the sampler is running when the monitor goes
        ASSERT_TRUE(monitor.set_power_limit(0, 300));
        ASSERT_TRUE(monitor.set_power_limit(1, 250));
    }
    EXPECT_EQ(fake_limits.now(0), 450000u);
    EXPECT_EQ(fake_limits.now(1), 300000u);
    EXPECT_EQ(fake_limits.sets(1), (std::vector<unsigned int>{250000, 300000}));
    {
        GpuMonitorOptions options = fake_nvml("normal");
        options.keep_power_limits = true;
        GpuMonitor monitor(options);
        ASSERT_TRUE(monitor.set_power_limit(0, 300));
    }
    EXPECT_EQ(fake_limits.now(0), 300000u);
    {
        GpuMonitorOptions options = fake_nvml("normal");
        options.keep_power_limits = true;
        GpuMonitor monitor(options);
        ASSERT_TRUE(monitor.set_power_limit(0, 350));
        monitor.keep_power_limits(false);  // the user changed their mind
    }
    EXPECT_EQ(fake_limits.now(0), 450000u);
}

TEST(PowerLimits, SetsAndSamplesFromSeveralThreads) {
    GpuMonitorOptions options = fake_nvml("normal");
    options.interval = std::chrono::milliseconds(1);
    GpuMonitor monitor(options);
    monitor.start();
    std::atomic<int> failures{0};
    std::thread other([&] {
        for (int i = 0; i < 200; ++i) {
            if (!monitor.set_power_limit(1, 200 + i % 100)) ++failures;
            monitor.snapshot();
        }
    });
    for (int i = 0; i < 200; ++i) {
        if (!monitor.set_power_limit(0, 300 + i % 100)) ++failures;
        if (!monitor.restore_power_limit(0)) ++failures;
    }
    other.join();
    EXPECT_EQ(failures.load(), 0);
    ASSERT_TRUE(monitor.restore_power_limits());
    EXPECT_TRUE(monitor.power_limit_changes().empty());
}

TEST(SimulatedPowerLimits, ByTheBoardsName) {
    GpuMonitor monitor(simulated_gpus("RTX 4090:24;A100:80;H200:141;Mystery GPU:8"));
    struct Expected {
        double default_w, min_w, max_w;
    };
    const Expected expected[] = {{450, 150, 600}, {400, 100, 400}, {700, 200, 700}, {300, 150, 300}};
    for (uint32_t gpu = 0; gpu < 4; ++gpu) {
        const Result<PowerLimits> l = monitor.power_limits(gpu);
        ASSERT_TRUE(l) << l.error().message;
        EXPECT_TRUE(l->simulated);
        EXPECT_EQ(l->default_w, expected[gpu].default_w) << gpu;
        EXPECT_EQ(l->current_w, expected[gpu].default_w) << gpu;
        EXPECT_EQ(l->enforced_w, expected[gpu].default_w) << gpu;
        EXPECT_EQ(l->min_w, expected[gpu].min_w) << gpu;
        EXPECT_EQ(l->max_w, expected[gpu].max_w) << gpu;
        EXPECT_EQ(monitor.snapshot().gpus[gpu].power_limit_w, expected[gpu].default_w);
    }
}

TEST(SimulatedPowerLimits, PowerAndSpeedFollowTheLimit) {
    GpuMonitor monitor(simulated_gpus("RTX 4090:24"));
    monitor.report_activity(0, 1.0f, 0);
    TelemetrySnapshot s = monitor.sample_now();
    // Unlimited, a fully loaded 4090 draws 6% of 450 W idle + 0.92 x 450 - 27 for the load =
    // 414 W (the noise: 1% of 450 W), under its 450 W limit: full speed, no power cap.
    EXPECT_NEAR(s.latest[0].power_w.value(), 414.0, 15.0);
    EXPECT_EQ(s.latest[0].simulated_speed, 1.0);
    EXPECT_EQ(s.latest[0].throttle_reasons, 0u);

    // At 270 W: (270 - 27) / 387 = 0.62791 of the added draw fits; the core's share of it,
    // (0.62791 - 0.3) / 0.7 = 0.46844, is below 0.8^3, so the clock is 0.46844 / 0.64 =
    // 0.73194 and a token takes 0.2 / 0.73194 + 0.8 = 1.07325 of its time: speed 0.93175.
    ASSERT_TRUE(monitor.set_power_limit(0, 270));
    s = monitor.sample_now();
    EXPECT_NEAR(s.latest[0].simulated_speed.value(), 0.93175, 1e-5);
    EXPECT_LE(s.latest[0].power_w.value(), 270.0);
    EXPECT_GT(s.latest[0].power_w.value(), 250.0);
    EXPECT_EQ(throttle_reason_names(s.latest[0].throttle_reasons.value()), std::vector<std::string>{"power cap"});
    EXPECT_LT(s.latest[0].sm_clock_mhz.value(), 2370u * 0.74);
    // At 315 W: (288 / 387 - 0.3) / 0.7 = 0.63455 >= 0.512, clock = cbrt(0.63455) = 0.85932,
    // speed = 1 / (0.2 / 0.85932 + 0.8) = 0.96830.
    ASSERT_TRUE(monitor.set_power_limit(0, 315));
    EXPECT_NEAR(monitor.sample_now().latest[0].simulated_speed.value(), 0.96830, 1e-5);

    // Idle, any limit: full speed, nothing held back.
    monitor.report_activity(0, 0.0f, 0);
    s = monitor.sample_now();
    EXPECT_EQ(s.latest[0].simulated_speed, 1.0);
    EXPECT_EQ(s.latest[0].throttle_reasons, 0x1u);
}

TEST(SimulatedPowerLimits, RefuseAsRealOnesDo) {
    GpuMonitor monitor(simulated_gpus("RTX 4090:24:power=denied;RTX 4090:24:power=fixed;RTX 4090:24;A100:80:lost@1"));
    Result<PowerLimits> l = monitor.set_power_limit(0, 300);
    EXPECT_TRUE(refused(l, ErrorCode::io, "To set it yourself, run: sudo nvidia-smi -i 0 -pl 300", false));
    l = monitor.set_power_limit(1, 300);
    EXPECT_TRUE(refused(
        l, ErrorCode::unsupported,
        "GPU 1 (RTX 4090) does not allow setting its power limit (the driver says: Not Supported (simulated))"));
    EXPECT_TRUE(refused(monitor.set_power_limit(2, 601), ErrorCode::invalid_argument,
                        "GPU 2 (RTX 4090) takes a power limit from 150 W to 600 W; 601 W is outside that range"));
    monitor.sample_now();  // GPU 3 is lost from its first sample
    EXPECT_TRUE(refused(monitor.set_power_limit(3, 300), ErrorCode::device_failed, "GPU 3 (A100) is lost", false));
    EXPECT_FALSE(monitor.power_limits(3));
    EXPECT_TRUE(monitor.power_limit_changes().empty());
}

TEST(SimulatedPowerLimits, AMisspeltOptionSaysWhatIsAllowed) {
    GpuMonitor monitor(simulated_gpus("RTX 4090:24:power=maybe"));
    const TelemetrySnapshot s = monitor.sample_now();
    EXPECT_TRUE(s.gpus.empty());
    EXPECT_NE(s.status.find("power=denied or power=fixed"), std::string::npos) << s.status;
}

}  // namespace
}  // namespace powerhouse
