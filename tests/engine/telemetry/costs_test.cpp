// Money (powerhouse/costs.h) against examples worked out by hand in the comments: tokens per
// unit of the user's currency over a day, a week and a month at home, with and without the
// hardware written off, and the same tokens on a rented GPU.
#include "powerhouse/costs.h"

#include <gtest/gtest.h>

#include <cmath>

#include "powerhouse/plan.h"
#include "powerhouse/telemetry.h"

namespace powerhouse {
namespace {

// 50 tokens/s at 300 W, 8 hours a day, electricity at 0.30 a kWh.
LocalUsage evenings() {
    LocalUsage u;
    u.tokens_per_second = 50;
    u.watts = 300;
    u.hours_per_day = 8;
    u.price_per_kwh = 0.30;
    return u;
}

TEST(Costs, ElectricityAloneOverADayAWeekAndAMonth) {
    const Result<UsageCosts> c = local_costs(evenings());
    ASSERT_TRUE(c) << c.error().message;
    // A day: 50 x 8 h x 3600 s = 1,440,000 tokens; 300 W x 8 h = 2.4 kWh, x 0.30 = 0.72;
    // 1,440,000 / 0.72 = 2,000,000 tokens per unit; 0.72 / 1.44 million = 0.50 per million.
    EXPECT_DOUBLE_EQ(c->day.days, 1.0);
    EXPECT_DOUBLE_EQ(c->day.generation_hours, 8.0);
    EXPECT_DOUBLE_EQ(c->day.tokens, 1'440'000.0);
    EXPECT_DOUBLE_EQ(c->day.kwh, 2.4);
    EXPECT_DOUBLE_EQ(c->day.energy_cost, 0.72);
    EXPECT_DOUBLE_EQ(c->day.hardware_cost, 0.0);
    EXPECT_DOUBLE_EQ(c->day.total_cost, 0.72);
    EXPECT_DOUBLE_EQ(c->day.tokens_per_unit.value(), 2'000'000.0);
    EXPECT_DOUBLE_EQ(c->day.cost_per_million_tokens.value(), 0.5);
    // The same as the dashboard's figure: 300 W / 50 tokens/s = 6 J a token.
    EXPECT_DOUBLE_EQ(c->day.cost_per_million_tokens.value(), cost_per_million_tokens(6.0, 0.30));
    // A week: 7 days: 10,080,000 tokens, 16.8 kWh, 5.04.
    EXPECT_DOUBLE_EQ(c->week.tokens, 10'080'000.0);
    EXPECT_DOUBLE_EQ(c->week.kwh, 16.8);
    EXPECT_DOUBLE_EQ(c->week.total_cost, 5.04);
    // A month: 365.25 / 12 = 30.4375 days, 243.5 hours: 43,830,000 tokens, 73.05 kWh, 21.915.
    EXPECT_DOUBLE_EQ(c->month.days, 30.4375);
    EXPECT_DOUBLE_EQ(c->month.generation_hours, 243.5);
    EXPECT_DOUBLE_EQ(c->month.tokens, 43'830'000.0);
    EXPECT_DOUBLE_EQ(c->month.kwh, 73.05);
    EXPECT_DOUBLE_EQ(c->month.total_cost, 21.915);
    EXPECT_DOUBLE_EQ(c->month.tokens_per_unit.value(), 2'000'000.0);
}

TEST(Costs, TheHardwareWrittenOff) {
    LocalUsage u = evenings();
    u.hardware_price = 1600;
    u.write_off_months = 24;
    const Result<UsageCosts> c = local_costs(u);
    ASSERT_TRUE(c) << c.error().message;
    // 1600 over 24 months of 30.4375 days = 1600 / 730.5 = 2.19028 a day, every day;
    // a day: 0.72 + 2.19028 = 2.91028, so 1,440,000 / 2.91028 = 494,797.6 tokens per unit.
    EXPECT_NEAR(c->day.hardware_cost, 2.190281, 1e-6);
    EXPECT_NEAR(c->day.total_cost, 2.910281, 1e-6);
    EXPECT_NEAR(c->day.tokens_per_unit.value(), 494'797.6, 0.1);
    // A month: 1600 / 24 = 66.6667 of hardware + 21.915 of electricity = 88.5817, 2.0210 per
    // million tokens; every cost grows with the days, so tokens per unit do not change.
    EXPECT_NEAR(c->month.hardware_cost, 1600.0 / 24, 1e-9);
    EXPECT_NEAR(c->month.total_cost, 88.581667, 1e-6);
    EXPECT_NEAR(c->month.cost_per_million_tokens.value(), 2.021028, 1e-6);
    EXPECT_NEAR(c->month.tokens_per_unit.value(), c->day.tokens_per_unit.value(), 1e-6);
    // A week: 7 x 2.91028 = 20.3720.
    EXPECT_NEAR(c->week.total_cost, 20.371964, 1e-6);
}

TEST(Costs, FreeElectricityHasNoTokensPerUnit) {
    LocalUsage u = evenings();
    u.price_per_kwh = 0;
    const Result<PeriodCost> c = local_cost(u, 1);
    ASSERT_TRUE(c);
    EXPECT_DOUBLE_EQ(c->total_cost, 0.0);
    EXPECT_FALSE(c->tokens_per_unit.has_value());
    EXPECT_DOUBLE_EQ(c->cost_per_million_tokens.value(), 0.0);
}

TEST(Costs, BadInputSaysWhichAndWhy) {
    const auto message = [](LocalUsage u, double days = 1) {
        Result<PeriodCost> c = local_cost(u, days);
        EXPECT_FALSE(c);
        EXPECT_EQ(c.error().code, ErrorCode::invalid_argument);
        return c.error().message;
    };
    LocalUsage u = evenings();
    u.tokens_per_second = 0;
    EXPECT_EQ(message(u), "the generation speed (tokens/s) must be above 0, not 0");
    u = evenings();
    u.hours_per_day = 25;
    EXPECT_EQ(message(u), "the hours of generation a day must be above 0 and at most 24, not 25");
    u = evenings();
    u.watts = -1;
    EXPECT_EQ(message(u), "the power (W) must be 0 or more, not -1");
    u = evenings();
    u.price_per_kwh = std::nan("");
    EXPECT_EQ(message(u), "the electricity price (per kWh) must be 0 or more, not nan");
    u = evenings();
    u.hardware_price = 1600;
    EXPECT_EQ(message(u), "the months to write the hardware off over must be above 0 when it has a price, not 0");
    EXPECT_EQ(message(evenings(), 0), "the days must be above 0, not 0");
    u = evenings();
    u.hours_per_day = 0;
    EXPECT_FALSE(local_costs(u));
}

TEST(CloudCosts, AtTheSpeedOfTheBandwidthRoofline) {
    CloudGpu gpu;
    gpu.price_per_hour = 1.60;
    gpu.bandwidth_gb_s = 2000;
    // 2000 GB/s reading 4 GB a token: 500 tokens/s. A day's 1,440,000 tokens take 2880 s =
    // 0.8 h, x 1.60 = 1.28; 1,440,000 / 1.28 = 1,125,000 tokens per unit, 0.8889 per million.
    Result<CloudCost> c = cloud_cost(gpu, 1'440'000, 4e9);
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_DOUBLE_EQ(c->tokens_per_second, 500.0);
    EXPECT_DOUBLE_EQ(c->hours, 0.8);
    EXPECT_DOUBLE_EQ(c->cost, 1.28);
    EXPECT_DOUBLE_EQ(c->tokens_per_unit.value(), 1'125'000.0);
    EXPECT_NEAR(c->cost_per_million_tokens.value(), 0.888889, 1e-6);
    // At half the roofline, as measured at home: 250 tokens/s, twice the hours and the cost.
    gpu.roofline_share = 0.5;
    c = cloud_cost(gpu, 1'440'000, 4e9);
    ASSERT_TRUE(c);
    EXPECT_DOUBLE_EQ(c->tokens_per_second, 250.0);
    EXPECT_DOUBLE_EQ(c->cost, 2.56);
}

TEST(CloudCosts, TheBandwidthFromThePlannersTableOrTheSpeedGiven) {
    CloudGpu a100;
    a100.name = "A100";
    a100.price_per_hour = 1.60;
    // The planner's A100: 2039 GB/s; a 5 GB model: 407.8 tokens/s.
    ASSERT_EQ(guess_bandwidth_gb_s("A100"), 2039.0);
    Result<double> speed = cloud_tokens_per_second(a100, 5e9);
    ASSERT_TRUE(speed);
    EXPECT_DOUBLE_EQ(*speed, 407.8);
    // A speed given wins: 100 tokens/s, 1,440,000 tokens = 14,400 s = 4 h = 6.40.
    a100.tokens_per_second = 100;
    const Result<CloudCost> c = cloud_cost(a100, 1'440'000);
    ASSERT_TRUE(c);
    EXPECT_DOUBLE_EQ(c->hours, 4.0);
    EXPECT_DOUBLE_EQ(c->cost, 6.4);
    a100.tokens_per_second = 0;
    speed = cloud_tokens_per_second(a100, 0);
    ASSERT_FALSE(speed);
    EXPECT_EQ(speed.error().message,
              "the speed of the rented GPU (A100) needs either its tokens/s or the bytes the model reads per token");
    a100.roofline_share = 1.5;
    EXPECT_FALSE(cloud_tokens_per_second(a100, 5e9));
    a100.roofline_share = 1;
    a100.price_per_hour = -1;
    EXPECT_FALSE(cloud_cost(a100, 1, 5e9));
}

TEST(CloudCosts, TheSameTokensAsEachPeriodAtHome) {
    const Result<UsageCosts> home = local_costs(evenings());
    ASSERT_TRUE(home);
    CloudGpu gpu;
    gpu.price_per_hour = 1.60;
    gpu.tokens_per_second = 100;
    const Result<CloudCosts> cloud = cloud_costs(gpu, *home);
    ASSERT_TRUE(cloud) << cloud.error().message;
    // Twice as fast as at home (100 against 50 tokens/s): half the 8 hours a day, 4 h x 1.60
    // = 6.40 a day, 44.80 a week, 4 x 30.4375 = 121.75 h = 194.80 a month, against 0.72,
    // 5.04 and 21.915 of electricity at home.
    EXPECT_DOUBLE_EQ(cloud->day.tokens, home->day.tokens);
    EXPECT_DOUBLE_EQ(cloud->day.cost, 6.4);
    EXPECT_DOUBLE_EQ(cloud->week.cost, 44.8);
    EXPECT_DOUBLE_EQ(cloud->month.hours, 121.75);
    EXPECT_DOUBLE_EQ(cloud->month.cost, 194.8);
    EXPECT_DOUBLE_EQ(cloud->month.tokens_per_unit.value(), 225'000.0);  // 360,000 tokens an hour / 1.60
}

}  // namespace
}  // namespace powerhouse
