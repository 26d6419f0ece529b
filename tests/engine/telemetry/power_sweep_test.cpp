// The efficiency sweep's bookkeeping (powerhouse/power.h): its steps, each step's figures,
// the marks, and runs on simulated GPUs and on the fake NVML library, including a refused
// limit, a failing workload, a step refused before its limits are set (before_set) and a
// GPU lost mid-sweep, after which the limits must be back.
// Also the throttling summary of a generation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "engine/telemetry/power_test_support.h"
#include "powerhouse/power.h"

namespace powerhouse {
namespace {

using namespace power_test;

PowerLimits limits(uint32_t gpu, std::optional<double> default_w, std::optional<double> min_w,
                   std::optional<double> max_w) {
    PowerLimits l;
    l.gpu = gpu;
    l.current_w = default_w;
    l.default_w = default_w;
    l.min_w = min_w;
    l.max_w = max_w;
    return l;
}

// Each run's figures for the workload to hand back; the samples are the monitor's.
struct Work {
    std::vector<PowerSweepStep> steps;  // as the sweep gave them
    int fail_at = -1;                   // the step whose work fails
};

// The work on simulated GPUs: loads them fully, samples five times, and counts the tokens a
// model of 100 tokens/s at full speed makes in 10 s at the slowest GPU's simulated speed.
PowerSweepWorkload simulated_work(GpuMonitor& monitor, Work& work) {
    return [&monitor, &work](const PowerSweepStep& step) -> Result<PowerSweepRun> {
        work.steps.push_back(step);
        if (static_cast<int>(step.index) == work.fail_at) {
            return make_error(ErrorCode::cancelled, "stopped by the user");
        }
        const size_t n = monitor.snapshot().gpus.size();
        for (uint32_t g = 0; g < n; ++g) monitor.report_activity(g, 1.0f, 0);
        PowerSweepRun run;
        double speed = 1;
        for (int i = 0; i < 5; ++i) {
            run.samples.push_back(monitor.sample_now());
            for (const GpuSample& s : run.samples.back().latest) speed = std::min(speed, s.simulated_speed.value_or(1));
        }
        for (uint32_t g = 0; g < n; ++g) monitor.report_activity(g, 0.0f, 0);
        run.seconds = 10;
        run.tokens = static_cast<uint64_t>(std::lround(100 * speed * run.seconds));
        return run;
    };
}

// The work on the fake NVML: three samples, and the tokens `tokens_at(limit)` gives in 10 s.
PowerSweepWorkload fake_work(GpuMonitor& monitor, Work& work, std::function<uint64_t(double)> tokens_at) {
    return [&monitor, &work, tokens_at](const PowerSweepStep& step) -> Result<PowerSweepRun> {
        work.steps.push_back(step);
        PowerSweepRun run;
        for (int i = 0; i < 3; ++i) run.samples.push_back(monitor.sample_now());
        run.seconds = 10;
        run.tokens = tokens_at(step.limits_w.front());
        return run;
    };
}

// A sweep on the fake NVML over `gpus` (empty: both) at `limits_w` (empty: the default
// steps), whose work makes `tokens_at(limit)` tokens in 10 s.
Result<PowerSweepResult> sweep_fake(
    GpuMonitor& monitor, Work& work, std::vector<uint32_t> gpus, std::vector<double> limits_w,
    std::function<uint64_t(double)> tokens_at = [](double) -> uint64_t { return 100; }) {
    PowerSweepOptions options;
    options.gpus = std::move(gpus);
    options.limits_w = std::move(limits_w);
    return run_power_sweep(monitor, options, fake_work(monitor, work, std::move(tokens_at)));
}

TEST(PowerSweepSteps, SharesOfEachDefaultClampedToItsRange) {
    const auto steps = power_sweep_limits({limits(0, 450, 150, 600), limits(1, 300, 200, 300)}, {});
    ASSERT_TRUE(steps) << steps.error().message;
    // 100% .. 60% of 450 W and of 300 W; 60% of 300 W is 180 W, below GPU 1's 200 W.
    const std::vector<std::vector<double>> expected = {{450, 300}, {405, 270}, {360, 240}, {315, 210}, {270, 200}};
    EXPECT_EQ(*steps, expected);
}

TEST(PowerSweepSteps, StepsThatClampToOneLimitRunOnce) {
    // 300 W x 100%, 90%, 80%, 70%, 60% = 300, 270, 240, 210, 180: the last three are 250 W.
    const auto steps = power_sweep_limits({limits(0, 300, 250, 300)}, {});
    ASSERT_TRUE(steps);
    EXPECT_EQ(*steps, (std::vector<std::vector<double>>{{300}, {270}, {250}}));
}

TEST(PowerSweepSteps, GivenLimitsAreUsedAsTheyAreAndMustFitEveryGpu) {
    PowerSweepOptions options;
    options.limits_w = {250, 200.5};
    auto steps = power_sweep_limits({limits(0, 450, 150, 600), limits(1, 300, 100, 300)}, options);
    ASSERT_TRUE(steps);
    EXPECT_EQ(*steps, (std::vector<std::vector<double>>{{250, 250}, {200.5, 200.5}}));
    options.limits_w = {250, 350};
    steps = power_sweep_limits({limits(0, 450, 150, 600), limits(1, 300, 100, 300)}, options);
    ASSERT_FALSE(steps);
    EXPECT_EQ(steps.error().code, ErrorCode::invalid_argument);
    EXPECT_EQ(steps.error().message, "power sweep: 350 W is outside GPU 1's range, 100 W to 300 W");
    options.limits_w = {-1};
    EXPECT_FALSE(power_sweep_limits({limits(0, 450, 150, 600)}, options));
}

TEST(PowerSweepSteps, WithoutADefaultTheLimitsMustBeGiven) {
    const auto steps = power_sweep_limits({limits(0, std::nullopt, std::nullopt, std::nullopt)}, {});
    ASSERT_FALSE(steps);
    EXPECT_EQ(steps.error().message,
              "power sweep: GPU 0 does not report its default power limit: give the limits to run at in watts");
    EXPECT_FALSE(power_sweep_limits({}, {}));
    PowerSweepOptions none;
    none.fractions.clear();
    EXPECT_FALSE(power_sweep_limits({limits(0, 450, 150, 600)}, none));
}

GpuSample reading(double watts, uint32_t temperature, uint64_t throttle) {
    GpuSample s;
    s.power_w = watts;
    s.temperature_c = temperature;
    s.throttle_reasons = throttle;
    return s;
}

TEST(PowerSweepPoint, FiguresFromTheSamples) {
    PowerSweepRun run;
    run.tokens = 600;
    run.seconds = 10;
    TelemetrySnapshot a, b, c;
    a.latest = {reading(200, 60, 0x4 | 0x1), reading(100, 70, 0x1), reading(999, 99, 0x40)};  // GPU 2 is not in it
    b.latest = {reading(220, 65, 0), reading(80, 72, 0)};
    c.latest = {reading(500, 90, 0x20), reading(0, 0, 0)};
    c.latest[1].responding = false;  // no sum without GPU 1; its peers' readings still count
    run.samples = {a, b, c};
    PowerSweepPoint p = power_sweep_point({0, 1}, {250, 150}, run);
    EXPECT_EQ(p.total_limit_w, 400.0);
    EXPECT_DOUBLE_EQ(p.tokens_per_second, 60.0);  // 600 / 10
    // (200 + 100 + 220 + 80) / 2 snapshots = 300 W; 60 tokens/s / 300 W = 0.2 tokens per joule.
    EXPECT_DOUBLE_EQ(p.average_w.value(), 300.0);
    EXPECT_DOUBLE_EQ(p.tokens_per_joule.value(), 0.2);
    EXPECT_EQ(p.peak_temperature_c, 90.0);
    // Power cap (0x4) and thermal (software, 0x20); idle is no slowdown; GPU 2's 0x40 is not counted.
    EXPECT_EQ(p.throttle_mask, 0x24u);
    EXPECT_EQ(p.throttle_reasons, (std::vector<std::string>{"power cap", "thermal (software)"}));
    EXPECT_FALSE(p.simulated_speed.has_value());

    // Energy measured otherwise wins: 2500 J over 10 s = 250 W, 60 / 250 = 0.24 tokens per joule.
    run.joules = 2500;
    p = power_sweep_point({0, 1}, {250, 150}, run);
    EXPECT_DOUBLE_EQ(p.average_w.value(), 250.0);
    EXPECT_DOUBLE_EQ(p.tokens_per_joule.value(), 0.24);

    // No power readings: speed, but no efficiency.
    run.joules.reset();
    run.samples.clear();
    p = power_sweep_point({0}, {250}, run);
    EXPECT_FALSE(p.average_w || p.tokens_per_joule || p.peak_temperature_c);
}

PowerSweepPoint point(double limit, double tokens_per_second, double watts) {
    PowerSweepPoint p;
    p.limits_w = {limit};
    p.total_limit_w = limit;
    p.tokens_per_second = tokens_per_second;
    p.average_w = watts;
    p.tokens_per_joule = tokens_per_second / watts;
    return p;
}

TEST(PowerSweepMarks, TheMostEfficientAndTheKnee) {
    PowerSweepResult r;
    // tokens per joule: 100/400 = 0.25, 99/380 = 0.2605, 97/330 = 0.2939, 94/290 = 0.3241, 85/250 = 0.34.
    r.points = {point(450, 100, 400), point(405, 99, 380), point(360, 97, 330), point(315, 94, 290),
                point(270, 85, 250)};
    mark_power_sweep(r, 0.05);
    EXPECT_EQ(r.most_efficient, 4u);  // 270 W
    // Within 5% of the fastest (100 tokens/s): 95 or more; the lowest such limit is 360 W.
    EXPECT_EQ(r.knee, 2u);
    mark_power_sweep(r, 0.10);  // 90 or more: 315 W
    EXPECT_EQ(r.knee, 3u);
    EXPECT_EQ(r.knee_tolerance, 0.10);
    // A tie in tokens per joule goes to the lower limit; the order run does not matter.
    r.points = {point(300, 60, 200), point(450, 90, 300), point(150, 30, 100)};
    mark_power_sweep(r, 0.05);
    EXPECT_EQ(r.most_efficient, 2u);
    EXPECT_EQ(r.knee, 1u);
    // Without power readings there is a knee but no most efficient.
    for (PowerSweepPoint& p : r.points) p.tokens_per_joule.reset();
    mark_power_sweep(r, 0.05);
    EXPECT_FALSE(r.most_efficient.has_value());
    EXPECT_EQ(r.knee, 1u);
}

TEST(PowerSweep, OnSimulatedGpusTheDefaultSweep) {
    GpuMonitor monitor(simulated_gpus("RTX 4090:24;RTX 4090:24"));
    Work work;
    const Result<PowerSweepResult> r = run_power_sweep(monitor, {}, simulated_work(monitor, work));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->simulated);
    EXPECT_EQ(r->label, "simulated GPUs: the watts, temperatures and speed come from a model, not from hardware");
    EXPECT_EQ(r->gpus, (std::vector<uint32_t>{0, 1}));
    ASSERT_EQ(r->points.size(), 5u);
    const double expected[] = {450, 405, 360, 315, 270};
    for (size_t i = 0; i < 5; ++i) {
        EXPECT_EQ(r->points[i].limits_w, (std::vector<double>{expected[i], expected[i]})) << i;
        EXPECT_EQ(work.steps[i].limits_w, r->points[i].limits_w) << i;
        EXPECT_EQ(work.steps[i].index, i);
    }
    // Unlimited (414 W < 450 W): full speed, no cap; at 270 W the model's speed is 0.93175
    // (power_limit_test.cpp works it out), capped by power.
    EXPECT_EQ(r->points[0].simulated_speed, 1.0);
    EXPECT_EQ(r->points[0].tokens, 1000u);
    EXPECT_TRUE(r->points[0].throttle_reasons.empty());
    EXPECT_NEAR(r->points[4].simulated_speed.value(), 0.93175, 1e-5);
    EXPECT_EQ(r->points[4].tokens, 932u);
    EXPECT_EQ(r->points[4].throttle_reasons, std::vector<std::string>{"power cap"});
    EXPECT_NEAR(r->points[0].average_w.value(), 2 * 414.0, 20.0);
    EXPECT_LE(r->points[4].average_w.value(), 2 * 270.0);
    EXPECT_TRUE(r->points[4].peak_temperature_c.has_value());
    // Tokens per joule rise as the limit falls (93.2 / ~540 W against 100 / ~828 W); the
    // knee is 315 W, the lowest within 5% of full speed (96.8%; 270 W keeps 93.2%).
    EXPECT_EQ(r->most_efficient, 4u);
    EXPECT_EQ(r->knee, 3u);
    EXPECT_EQ(r->restored_w, (std::vector<double>{450, 450}));
    EXPECT_TRUE(monitor.power_limit_changes().empty());
    EXPECT_EQ(monitor.power_limits(0)->current_w, 450.0);
    EXPECT_EQ(monitor.power_limits(1)->current_w, 450.0);
}

TEST(PowerSweep, OnASimulatedGpuTheBestLimitCanBeInside) {
    GpuMonitor monitor(simulated_gpus("RTX 4090:24"));
    Work work;
    PowerSweepOptions options;
    options.limits_w = {450, 360, 270, 225, 180};
    const Result<PowerSweepResult> r = run_power_sweep(monitor, options, simulated_work(monitor, work));
    ASSERT_TRUE(r) << r.error().message;
    // The model's tokens per joule: 100/414, 98.5/360, 93.2/270, 81.7/225 and 57.5/180 per
    // 1000 W: 2.42, 2.74, 3.45, 3.63, 3.19. Best at 225 W; the knee (95% of full speed or
    // more) at 360 W.
    EXPECT_EQ(r->most_efficient, 3u);
    EXPECT_EQ(r->knee, 1u);
    EXPECT_EQ(monitor.power_limits(0)->current_w, 450.0);
}

TEST(PowerSweep, OnTheFakeNvml) {
    GpuMonitor monitor(fake_nvml("normal"));
    Work work;
    const Result<PowerSweepResult> r = sweep_fake(monitor, work, {0}, {400, 300, 200}, [](double limit) -> uint64_t {
        return limit >= 400 ? 1000 : limit >= 300 ? 950 : 700;
    });
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_FALSE(r->simulated);
    EXPECT_EQ(r->label, "");
    // Set in order, then back to the 450 W it had.
    EXPECT_EQ(FakeNvmlLimits().sets(0), (std::vector<unsigned int>{400000, 300000, 200000, 450000}));
    EXPECT_TRUE(FakeNvmlLimits().sets(1).empty());
    ASSERT_EQ(r->points.size(), 3u);
    // The fake's GPU 0 draws its limit (below its 412.345 W), at 71 degrees, capped by power:
    // 100 / 400 = 0.25, 95 / 300 = 0.3167, 70 / 200 = 0.35 tokens per joule.
    EXPECT_DOUBLE_EQ(r->points[0].average_w.value(), 400.0);
    EXPECT_DOUBLE_EQ(r->points[1].tokens_per_joule.value(), 95.0 / 300.0);
    EXPECT_DOUBLE_EQ(r->points[2].tokens_per_joule.value(), 0.35);
    EXPECT_EQ(r->points[2].peak_temperature_c, 71.0);
    EXPECT_EQ(r->points[2].throttle_reasons, std::vector<std::string>{"power cap"});
    EXPECT_EQ(r->most_efficient, 2u);
    EXPECT_EQ(r->knee, 1u);  // 95 tokens/s is within 5% of 100
    EXPECT_TRUE(monitor.power_limit_changes().empty());
}

TEST(PowerSweep, ARefusedLimitFailsTheSweepAndPutsBackTheOthers) {
    GpuMonitor monitor(fake_nvml("set_fails@3"));  // the third set: 200 W
    Work work;
    const Result<PowerSweepResult> r = sweep_fake(monitor, work, {0}, {400, 300, 200});
    EXPECT_TRUE(
        refused(r, ErrorCode::internal,
                "power sweep: at 200 W: the driver could not set the power limit of GPU 0 (NVIDIA GeForce RTX 4090) to "
                "200 W (the driver says: Unknown Error (NVML error 999)) (the power limits are back at 450 W)"));
    EXPECT_EQ(work.steps.size(), 2u);
    EXPECT_EQ(FakeNvmlLimits().sets(0), (std::vector<unsigned int>{400000, 300000, 450000}));
    EXPECT_TRUE(monitor.power_limit_changes().empty());
}

TEST(PowerSweep, WithoutTheRightTheSweepGivesTheCommand) {
    GpuMonitor monitor(fake_nvml("power_denied"));
    Work work;
    const Result<PowerSweepResult> r = sweep_fake(monitor, work, {}, {});
    EXPECT_TRUE(refused(r, ErrorCode::io, "power sweep: at 450 W, 300 W: Powerhouse lacks the right", false));
    EXPECT_TRUE(refused(r, ErrorCode::io,
                        "run: sudo nvidia-smi -i 0 -pl 450 (the power limits are back at 450 W, 300 W)", false));
    EXPECT_TRUE(work.steps.empty());
    EXPECT_TRUE(FakeNvmlLimits().sets(0).empty());
}

TEST(PowerSweep, AFailingWorkloadFailsTheSweepAndPutsTheLimitsBack) {
    GpuMonitor monitor(simulated_gpus("RTX 4090:24;A100:80"));
    Work work;
    work.fail_at = 1;
    const Result<PowerSweepResult> r = run_power_sweep(monitor, {}, simulated_work(monitor, work));
    EXPECT_TRUE(refused(
        r, ErrorCode::cancelled,
        "power sweep: the work at 405 W, 360 W failed: stopped by the user (the power limits are back at 450 W, "
        "400 W)"));
    EXPECT_EQ(monitor.power_limits(0)->current_w, 450.0);
    EXPECT_EQ(monitor.power_limits(1)->current_w, 400.0);
    EXPECT_TRUE(monitor.power_limit_changes().empty());
}

TEST(PowerSweep, TheLimitsGoBackToWhatTheyWereBeforeTheSweep) {
    GpuMonitor monitor(fake_nvml("normal"));
    ASSERT_TRUE(monitor.set_power_limit(0, 350));  // the user's choice, made in Powerhouse
    Work work;
    const Result<PowerSweepResult> r = sweep_fake(monitor, work, {0}, {300, 250});
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->restored_w, std::vector<double>{350});
    EXPECT_EQ(FakeNvmlLimits().sets(0), (std::vector<unsigned int>{350000, 300000, 250000, 350000}));
    // Still on the books as changed from 450 W, for restoring later.
    const std::vector<PowerLimitChange> changes = monitor.power_limit_changes();
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].before_w, 450.0);
    EXPECT_EQ(changes[0].now_w, 350.0);
}

TEST(PowerSweep, AGpuLostMidSweepFailsItAndSaysWhatIsLeft) {
    GpuMonitor monitor(fake_nvml("lost_after:1"));  // GPU 1's first sample finds it lost
    Work work;
    const Result<PowerSweepResult> r = sweep_fake(monitor, work, {1}, {250, 200});
    const std::string lost =
        "GPU 1 (NVIDIA RTX A6000) is lost (fallen off the bus, or gone until a reset): its power "
        "limit cannot be read or changed";
    EXPECT_TRUE(refused(r, ErrorCode::device_failed,
                        "power sweep: at 200 W: " + lost + "; and GPU 1 could not be set back to 300 W: " + lost));
    EXPECT_EQ(work.steps.size(), 1u);
    EXPECT_EQ(monitor.power_limit_changes().size(), 1u);  // still owed, should the GPU come back
}

TEST(PowerSweep, BeforeSetIsCalledOncePerStepBeforeItsLimitsAreSet) {
    GpuMonitor monitor(simulated_gpus("RTX 4090:24;A100:80"));  // 450 W and 400 W by default
    Work work;
    std::vector<std::string> order;         // "ask 1", "work 1", ...
    std::vector<std::vector<double>> seen;  // each GPU's limit when before_set was called
    PowerSweepOptions options;
    options.before_set = [&](const PowerSweepStep& step) -> Result<void> {
        order.push_back("ask " + std::to_string(step.index));
        seen.push_back({*monitor.power_limits(0)->current_w, *monitor.power_limits(1)->current_w});
        return {};
    };
    const PowerSweepWorkload simulated = simulated_work(monitor, work);
    const Result<PowerSweepResult> r = run_power_sweep(monitor, options, [&](const PowerSweepStep& step) {
        order.push_back("work " + std::to_string(step.index));
        return simulated(step);
    });
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(r->points.size(), 5u);
    EXPECT_EQ(order, (std::vector<std::string>{"ask 0", "work 0", "ask 1", "work 1", "ask 2", "work 2", "ask 3",
                                               "work 3", "ask 4", "work 4"}));
    // Asked before each step's limits: the GPUs are still at their own (450 W, 400 W), then
    // at the step before's (90% of the default is 405 W and 360 W, and so on).
    EXPECT_EQ(seen, (std::vector<std::vector<double>>{{450, 400}, {450, 400}, {405, 360}, {360, 320}, {315, 280}}));
    EXPECT_EQ(monitor.power_limits(0)->current_w, 450.0);
    EXPECT_EQ(monitor.power_limits(1)->current_w, 400.0);
}

TEST(PowerSweep, ARefusalBeforeAStepSetsNothingOfItAndPutsTheLimitsBack) {
    GpuMonitor monitor(fake_nvml("normal"));  // GPU 0 at 450 W, GPU 1 (an RTX A6000) at 300 W
    Work work;
    size_t asked = 0;
    PowerSweepOptions options;
    options.gpus = {0, 1};
    options.limits_w = {250, 200, 150};
    options.before_set = [&](const PowerSweepStep& step) -> Result<void> {
        ++asked;
        if (step.index == 1) return make_error(ErrorCode::io, "the record of power limits was refused: disk full");
        return {};
    };
    const Result<PowerSweepResult> r =
        run_power_sweep(monitor, options, fake_work(monitor, work, [](double) -> uint64_t { return 100; }));
    EXPECT_TRUE(refused(r, ErrorCode::io,
                        "power sweep: at 200 W: the record of power limits was refused: disk full (the power limits "
                        "are back at 450 W, 300 W)"));
    EXPECT_EQ(asked, 2u) << "not asked again after a refusal";
    EXPECT_EQ(work.steps.size(), 1u);
    // The first step's 250 W, then straight back: 200 W is never set on either GPU.
    EXPECT_EQ(FakeNvmlLimits().sets(0), (std::vector<unsigned int>{250000, 450000}));
    EXPECT_EQ(FakeNvmlLimits().sets(1), (std::vector<unsigned int>{250000, 300000}));
    EXPECT_TRUE(monitor.power_limit_changes().empty());

    // Refused before the first step: nothing is set at all, and the error's code is kept.
    GpuMonitor simulated(simulated_gpus("RTX 4090:24"));
    Work none;
    PowerSweepOptions first;
    first.limits_w = {300, 250};
    first.before_set = [](const PowerSweepStep&) -> Result<void> {
        return make_error(ErrorCode::cancelled, "the sweep was cancelled");
    };
    const Result<PowerSweepResult> stopped = run_power_sweep(simulated, first, simulated_work(simulated, none));
    EXPECT_TRUE(refused(stopped, ErrorCode::cancelled,
                        "power sweep: at 300 W: the sweep was cancelled (the power limits are back at 450 W)"));
    EXPECT_TRUE(none.steps.empty());
    EXPECT_EQ(simulated.power_limits(0)->current_w, 450.0);
    EXPECT_TRUE(simulated.power_limit_changes().empty());
}

TEST(PowerSweep, ARangeErrorChangesNothing) {
    GpuMonitor monitor(fake_nvml("normal"));
    Work work;
    const Result<PowerSweepResult> r = sweep_fake(monitor, work, {}, {300, 350});  // GPU 1 goes to 300 W at most
    EXPECT_TRUE(refused(r, ErrorCode::invalid_argument, "power sweep: 350 W is outside GPU 1's range, 100 W to 300 W"));
    EXPECT_TRUE(work.steps.empty());
    EXPECT_TRUE(FakeNvmlLimits().sets(0).empty());
}

GpuSample throttled_at(double time, uint64_t reasons) {
    GpuSample s;
    s.time = time;
    s.throttle_reasons = reasons;
    return s;
}

TEST(Throttling, HowLongWhyAndTheSpeedWithAndWithout) {
    // Each sample stands for the second before it; the first opens the window.
    const std::vector<GpuSample> samples = {
        throttled_at(0, 0x4),        // not counted
        throttled_at(1, 0),          // 1 s free, 50 tokens
        throttled_at(2, 0x4),        // 1 s capped by power, 40 tokens
        throttled_at(3, 0x4 | 0x1),  // 1 s capped (idle too), 42 tokens
        throttled_at(4, 0x40),       // 1 s thermal (hardware), 30 tokens
        throttled_at(5, 0x1),        // 1 s idle: free, 50 tokens
    };
    const ThrottleSummary t = summarize_throttling(samples, {99, 50, 40, 42, 30, 50});
    EXPECT_TRUE(t.throttled());
    EXPECT_DOUBLE_EQ(t.seconds, 5.0);
    EXPECT_DOUBLE_EQ(t.throttled_seconds, 3.0);
    EXPECT_EQ(t.reasons, 0x44u);
    EXPECT_EQ(t.reason_names, (std::vector<std::string>{"power cap", "thermal (hardware)"}));
    EXPECT_DOUBLE_EQ(t.tokens_per_second_throttled.value(), (40.0 + 42 + 30) / 3);  // 37.33
    EXPECT_DOUBLE_EQ(t.tokens_per_second_unthrottled.value(), (50.0 + 50) / 2);     // 50

    // Without token counts (or with the wrong number of them): the time and reasons only.
    for (const std::vector<uint64_t>& tokens : {std::vector<uint64_t>{}, std::vector<uint64_t>{1, 2}}) {
        const ThrottleSummary u = summarize_throttling(samples, tokens);
        EXPECT_DOUBLE_EQ(u.throttled_seconds, 3.0);
        EXPECT_FALSE(u.tokens_per_second_throttled || u.tokens_per_second_unthrottled);
    }
}

TEST(Throttling, NoneSeen) {
    std::vector<GpuSample> samples = {throttled_at(0, 0), throttled_at(2, 0x1), throttled_at(4, 0x4)};
    samples[2].responding = false;  // a reading it did not give counts as not slowed
    const ThrottleSummary t = summarize_throttling(samples, {0, 100, 60});
    EXPECT_FALSE(t.throttled());
    EXPECT_TRUE(t.reason_names.empty());
    EXPECT_DOUBLE_EQ(t.tokens_per_second_unthrottled.value(), 160.0 / 4);
    EXPECT_FALSE(t.tokens_per_second_throttled.has_value());
    EXPECT_FALSE(summarize_throttling({}).throttled());
    EXPECT_DOUBLE_EQ(summarize_throttling({throttled_at(7, 0x4)}).seconds, 0.0);
}

TEST(Throttling, ASimulatedGpuUnderALowLimitIsCappedByPower) {
    GpuMonitor monitor(simulated_gpus("RTX 4090:24"));
    ASSERT_TRUE(monitor.set_power_limit(0, 250));
    monitor.report_activity(0, 1.0f, 0);
    for (int i = 0; i < 4; ++i) monitor.sample_now();
    const ThrottleSummary t = summarize_throttling(monitor.history(0));
    EXPECT_TRUE(t.throttled());
    EXPECT_EQ(t.reason_names, std::vector<std::string>{"power cap"});
    EXPECT_DOUBLE_EQ(t.throttled_seconds, t.seconds);
    ASSERT_TRUE(t.simulated_speed_lost.has_value());
    EXPECT_GT(*t.simulated_speed_lost, 0.0);
    EXPECT_LT(*t.simulated_speed_lost, 1.0);
}

TEST(Throttling, TheSpeedASimulatedGpuLostCountsOnlyItsSlowedSamples) {
    std::vector<GpuSample> samples = {throttled_at(0, 0x4), throttled_at(1, 0x4), throttled_at(2, 0x4),
                                      throttled_at(3, 0), throttled_at(4, 0x40)};
    samples[0].simulated_speed = 0.1;  // opens the window: not counted
    samples[1].simulated_speed = 0.8;
    samples[2].simulated_speed = 0.7;
    samples[3].simulated_speed = 0.5;  // not slowed
    samples[4].simulated_speed = 0.9;
    EXPECT_NEAR(summarize_throttling(samples).simulated_speed_lost.value(), (0.2 + 0.3 + 0.1) / 3, 1e-12);
    for (GpuSample& s : samples) s.simulated_speed.reset();  // a real GPU: no factor to go by
    EXPECT_FALSE(summarize_throttling(samples).simulated_speed_lost.has_value());
}

}  // namespace
}  // namespace powerhouse
