// Whether speculative guesses pay (runtime/guess_cost.h): what steps of so many rows cost,
// read between the row counts timed; how a request's guesses fared; and the number of
// guesses that makes a step worth the most tokens a second, on a GPU-like cost (rows almost
// free), a CPU-like one (a third of a step each, as measured for SmolLM2 on 2 threads:
// 5 rows 2.4 steps) and with a draft model as slow as the model.
#include <gtest/gtest.h>

#include "runtime/guess_cost.h"

namespace powerhouse {
namespace guess_cost_test {

StepCost costs(double first, double per_row) {
    StepCost c;
    for (uint32_t rows = 1; rows <= StepCost::kMaxRows; ++rows) c.observe(rows, first + per_row * (rows - 1));
    return c;
}

TEST(StepCost, IsUnknownUntilStepsOfTwoSizesAreTimed) {
    StepCost c;
    EXPECT_FALSE(c.seconds(1));
    c.observe(1, 0.010);
    c.observe(1, 0.010);
    EXPECT_DOUBLE_EQ(*c.seconds(1), 0.010) << "a size timed is known";
    EXPECT_FALSE(c.seconds(3)) << "one point gives no line";
    c.observe(0, 1.0);   // not a step
    c.observe(2, -1.0);  // not a time
    EXPECT_FALSE(c.seconds(3));
}

TEST(StepCost, ReadsBetweenAndBeyondTheSizesTimed) {
    StepCost c;
    c.observe(1, 0.010);
    c.observe(5, 0.030);
    EXPECT_NEAR(*c.seconds(3), 0.020, 1e-12) << "between: on the line";
    EXPECT_NEAR(*c.seconds(9), 0.050, 1e-12) << "beyond: the last two's line";
    EXPECT_NEAR(*c.seconds(200), *c.seconds(StepCost::kMaxRows) + 0.005 * (200 - StepCost::kMaxRows), 1e-12);
    c.observe(9, 0.040);
    EXPECT_NEAR(*c.seconds(7), 0.035, 1e-12);
    // A size timed below those known: the two lowest's line.
    StepCost high;
    high.observe(4, 0.020);
    high.observe(6, 0.030);
    EXPECT_NEAR(*high.seconds(2), 0.010, 1e-12);
    // Noise that makes more rows look cheaper: the time of the nearest count timed, never
    // less time for more rows.
    StepCost noisy;
    noisy.observe(1, 0.020);
    noisy.observe(2, 0.015);
    EXPECT_NEAR(*noisy.seconds(5), 0.015, 1e-12);
    noisy.observe(9, 0.010);
    EXPECT_NEAR(*noisy.seconds(4), 0.015, 1e-12);
    EXPECT_NEAR(*noisy.seconds(7), 0.010, 1e-12);
}

TEST(StepCost, FollowsTheTimesAsTheyChange) {
    StepCost c;
    c.observe(1, 0.010);
    for (int i = 0; i < 40; ++i) c.observe(1, 0.020);
    EXPECT_NEAR(*c.seconds(1), 0.020, 1e-6) << "a running mean: the old time fades";
    c.observe(1, 0.040);
    EXPECT_GT(*c.seconds(1), 0.020);
    EXPECT_LT(*c.seconds(1), 0.040) << "one slow step moves it only part of the way";
}

TEST(GuessRecord, StartsAtEvenOddsAndFollowsTheGuesses) {
    GuessRecord r;
    EXPECT_DOUBLE_EQ(r.rate(), 0.5);
    r.update(4, 4);
    EXPECT_DOUBLE_EQ(r.rate(), 5.0 / 6.0) << "four kept, no miss";
    r.update(4, 1);
    EXPECT_NEAR(r.rate(), (0.9 * 4 + 1 + 1) / (0.9 * 4 + 1 + 1 + 2), 1e-12) << "one kept, then a miss";
    for (int i = 0; i < 30; ++i) r.update(3, 0);
    EXPECT_LT(r.rate(), 0.15) << "misses since outweigh the old kept ones";
    r.update(0, 0);
    EXPECT_LT(r.rate(), 0.15) << "no guesses: no change";
}

TEST(ExpectedKept, IsTheSumOfTheChancesThatEachGuessAndThoseBeforeItHold) {
    EXPECT_DOUBLE_EQ(expected_kept(0.5, 0), 0.0);
    EXPECT_DOUBLE_EQ(expected_kept(0.5, 3), 0.5 + 0.25 + 0.125);
    EXPECT_DOUBLE_EQ(expected_kept(1.0, 5), 5.0);
}

TEST(GuessesThatPay, OnAGpuEvenGuessesThatMostlyFail) {
    const StepCost gpu = costs(0.010, 0.0001);  // 8 rows: 7% more than 1
    EXPECT_GE(*guesses_that_pay(gpu, 1, 1, 0.3, 8, 0), 2u);
    EXPECT_EQ(*guesses_that_pay(gpu, 1, 1, 0.95, 8, 0), 8u) << "guesses that hold: all asked";
    EXPECT_EQ(*guesses_that_pay(gpu, 1, 1, 0.95, 3, 0), 3u) << "never past the limit";
    EXPECT_EQ(*guesses_that_pay(gpu, 1, 1, 0.95, 0, 0), 0u);
}

TEST(GuessesThatPay, OnACpuOnlyGuessesThatMostlyHold) {
    const StepCost cpu = costs(0.010, 0.0035);  // a row: 35% of a step
    EXPECT_EQ(*guesses_that_pay(cpu, 1, 1, 0.25, 8, 0), 0u) << "a story: 12 of 45 kept";
    const uint32_t code = *guesses_that_pay(cpu, 1, 1, 0.85, 8, 0);
    EXPECT_GE(code, 2u) << "text that repeats: most kept";
    // In a step of four requests' rows, a guess adds less time to the step than it adds
    // a row's worth: the same odds pay no more than alone.
    EXPECT_LE(*guesses_that_pay(cpu, 4, 4, 0.85, 8, 0), code);
}

TEST(GuessesThatPay, NotWhenTheDraftModelTakesAsLongAsTheModel) {
    const StepCost cpu = costs(0.010, 0.0035);
    EXPECT_EQ(*guesses_that_pay(cpu, 1, 1, 1.0, 8, 0.010), 0u) << "SmolLM2 drafting for itself";
    EXPECT_GE(*guesses_that_pay(cpu, 1, 1, 1.0, 8, 0.001), 2u) << "a draft ten times faster";
}

TEST(GuessesThatPay, IsUnknownWithoutTheCostOfTheRows) {
    StepCost c;
    c.observe(1, 0.010);
    EXPECT_FALSE(guesses_that_pay(c, 1, 1, 0.9, 4, 0));
}

}  // namespace guess_cost_test
}  // namespace powerhouse
