// bench's step time over devices (app/cli/bench_roofline.h): parts on one GPU add up, GPUs
// add up under a layer split and overlap under a tensor split.
#include "bench_roofline.h"

#include <gtest/gtest.h>

#include <vector>

namespace powerhouse::cli {
namespace {

DeviceUsage on(const char* uuid) {
    DeviceUsage u;
    u.uuid = uuid;
    return u;
}

TEST(BenchRoofline, PartsOnOneGpuAddUpWhateverTheSplit) {
    const std::vector<DeviceUsage> usage{on("GPU-a"), on("GPU-a")};
    const std::vector<double> t{2.0, 3.0};
    EXPECT_DOUBLE_EQ(step_time_over_gpus(usage, t, SplitMode::layer), 5.0);
    EXPECT_DOUBLE_EQ(step_time_over_gpus(usage, t, SplitMode::tensor), 5.0);
}

TEST(BenchRoofline, GpusTakeTurnsUnderALayerSplitAndOverlapUnderATensorSplit) {
    const std::vector<DeviceUsage> usage{on("GPU-a"), on("GPU-b"), on("GPU-c")};
    const std::vector<double> t{2.0, 3.0, 1.0};
    EXPECT_DOUBLE_EQ(step_time_over_gpus(usage, t, SplitMode::layer), 6.0);
    EXPECT_DOUBLE_EQ(step_time_over_gpus(usage, t, SplitMode::tensor), 3.0);
    EXPECT_DOUBLE_EQ(step_time_over_gpus(usage, t, SplitMode::single), 6.0);
}

TEST(BenchRoofline, TwoShardsOnEachOfTwoGpus) {
    // cuda:0,0,1,1 under a tensor split: each GPU's shards add, the GPUs overlap.
    const std::vector<DeviceUsage> usage{on("GPU-a"), on("GPU-a"), on("GPU-b"), on("GPU-b")};
    const std::vector<double> t{1.0, 1.5, 2.0, 0.25};
    EXPECT_DOUBLE_EQ(step_time_over_gpus(usage, t, SplitMode::tensor), 2.5);
    EXPECT_DOUBLE_EQ(step_time_over_gpus(usage, t, SplitMode::layer), 4.75);
}

TEST(BenchRoofline, DevicesWithoutAUuidAreEachTheirOwn) {
    const std::vector<DeviceUsage> usage{on(""), on("")};
    const std::vector<double> t{2.0, 3.0};
    EXPECT_DOUBLE_EQ(step_time_over_gpus(usage, t, SplitMode::tensor), 3.0);
    EXPECT_DOUBLE_EQ(step_time_over_gpus(usage, t, SplitMode::layer), 5.0);
    EXPECT_DOUBLE_EQ(step_time_over_gpus({}, {}, SplitMode::tensor), 0.0);
}

}  // namespace
}  // namespace powerhouse::cli
