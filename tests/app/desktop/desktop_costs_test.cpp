// The Costs view's figures (CostsController) against hand-worked examples: the measured speed
// and power of the recent answers, a day and a month at home with the hardware written off,
// the rented A100's speed from its bandwidth and the model's bytes per token, the settings
// kept in the store, and the answers measured before a restart counted again.
#include <gtest/gtest.h>

#include <QVariantMap>

#include <tuple>

#include "costs_controller.h"
#include "desktop_test_support.h"
#include "support/test_support.h"

namespace {

TEST(DesktopCosts, FiguresMatchHandWorkedExamples) {
    powerhouse::test::TempDir dir;
    auto store = powerhouse::test::open_store(dir);
    CostsController costs(store);
    EXPECT_TRUE(costs.periods().isEmpty());
    EXPECT_FALSE(costs.problem().isEmpty());
    EXPECT_EQ(costs.cloudGpu().toStdString(), "A100 80GB");
    EXPECT_DOUBLE_EQ(costs.cloudPricePerHour(), 1.60);

    // 500 tokens at 50 tokens/s (10 s) for 3000 J: 300 W, 6 J/token.
    costs.recordAnswer(500, 50, 3000);
    costs.setElectricityPrice(0.30);
    costs.setHoursPerDay(8);
    costs.setHardwarePrice(1800);
    costs.setWriteOffMonths(36);
    costs.setCurrency("EUR");
    EXPECT_DOUBLE_EQ(costs.tokensPerSecond(), 50);
    EXPECT_DOUBLE_EQ(costs.watts(), 300);
    EXPECT_DOUBLE_EQ(costs.joulesPerToken(), 6);
    ASSERT_EQ(costs.periods().size(), 3);
    // A day: 50 x 8 x 3600 = 1,440,000 tokens; 0.3 kW x 8 h = 2.4 kWh = 0.72; the hardware
    // 1800 / (36 x 30.4375) = 1.642710 a day; 2.362710 in all: 609,469 tokens per EUR.
    const QVariantMap day = costs.periods().at(0).toMap();
    EXPECT_DOUBLE_EQ(day.value("tokens").toDouble(), 1440000);
    EXPECT_NEAR(day.value("energyCost").toDouble(), 0.72, 1e-9);
    EXPECT_NEAR(day.value("hardwareCost").toDouble(), 1.642710, 1e-6);
    EXPECT_NEAR(day.value("localCost").toDouble(), 2.362710, 1e-6);
    EXPECT_NEAR(day.value("localTokensPerUnit").toDouble(), 609469, 1);
    // A month (30.4375 days): 43,830,000 tokens; 21.915 of electricity and 50 of hardware.
    const QVariantMap month = costs.periods().at(2).toMap();
    EXPECT_NEAR(month.value("tokens").toDouble(), 43830000, 1e-3);
    EXPECT_NEAR(month.value("localCost").toDouble(), 71.915, 1e-9);
    // No model: no rented comparison, said why.
    EXPECT_FALSE(day.contains("cloudCost"));
    EXPECT_FALSE(costs.cloudProblem().isEmpty());

    // A model reading 1 GB a token: an A100 (2039 GB/s) makes 2039 tokens/s, so a day's
    // tokens take 1,440,000 / 2039 / 3600 = 0.196175 h, at 1.60 an hour 0.313880.
    costs.setModel({{"weightBytes", 1e9}, {"devices", QVariantList{}}});
    EXPECT_NEAR(costs.cloudTokensPerSecond(), 2039, 1e-9);
    const QVariantMap rented = costs.periods().at(0).toMap();
    EXPECT_NEAR(rented.value("cloudHours").toDouble(), 0.196175, 1e-6);
    EXPECT_NEAR(rented.value("cloudCost").toDouble(), 0.313880, 1e-6);
    // The GPUs' step bytes win over the weights (what a decode step reads on them).
    costs.setModel({{"weightBytes", 1e9},
                    {"devices", QVariantList{QVariantMap{{"stepBytes", 5e8}}, QVariantMap{{"stepBytes", 5e8}}}}});
    EXPECT_DOUBLE_EQ(costs.bytesPerToken(), 1e9);
}

TEST(DesktopCosts, SettingsAndMeasuredAnswersSurviveARestart) {
    powerhouse::test::TempDir dir;
    auto store = powerhouse::test::open_store(dir);
    {
        CostsController costs(store);
        costs.setCurrency("CHF");
        costs.setHoursPerDay(4);
        costs.setHardwarePrice(2500);
        costs.setWriteOffMonths(24);
        costs.setCloudGpu("H100");
        costs.setCloudPricePerHour(2.5);
    }
    // Two answers measured by the dashboard, stored with their energy: 100 tokens at 20/s
    // (5 s) for 1000 J, and 300 tokens at 60/s (5 s) for 2000 J: 40 tokens/s at 300 W.
    auto conversation = store.create_conversation("c");
    ASSERT_TRUE(conversation.ok());
    for (auto [tokens, speed, joules] : {std::tuple{100, 20.0, 1000.0}, std::tuple{300, 60.0, 2000.0}}) {
        auto m = store.add_message(conversation->id, "assistant", "", powerhouse::store::MessageState::streaming);
        ASSERT_TRUE(m.ok());
        powerhouse::store::MessageStats stats;
        stats.generated_tokens = tokens;
        stats.tokens_per_second = speed;
        stats.energy_joules = joules;
        ASSERT_TRUE(store.finish_message(m->id, "x", powerhouse::store::MessageState::complete, stats, ""));
    }
    CostsController costs(store);
    EXPECT_EQ(costs.currency().toStdString(), "CHF");
    EXPECT_DOUBLE_EQ(costs.hoursPerDay(), 4);
    EXPECT_DOUBLE_EQ(costs.hardwarePrice(), 2500);
    EXPECT_DOUBLE_EQ(costs.writeOffMonths(), 24);
    EXPECT_EQ(costs.cloudGpu().toStdString(), "H100");
    EXPECT_DOUBLE_EQ(costs.cloudPricePerHour(), 2.5);
    EXPECT_EQ(costs.answersMeasured(), 2);
    EXPECT_DOUBLE_EQ(costs.tokensPerSecond(), 40);
    EXPECT_DOUBLE_EQ(costs.watts(), 300);
}

}  // namespace
