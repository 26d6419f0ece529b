// powerhouse-cli plan on the test model: the table and JSON for given devices, a split
// that cannot be made, a model that does not fit, and bad options.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using test::quoted;
using test::run_cli;

std::string smollm2() {
    return "-m " + quoted(test::test_model_path());
}

TEST(CliPlan, LayerSplitAsJsonAndTable) {
    const test::CliRun json =
        run_cli("plan " + smollm2() + " --devices 'RTX 4090:24;RTX 3090:24' --split layer --ratios 2,1 --json");
    ASSERT_EQ(json.status, 0) << json.err;
    const nlohmann::json out = nlohmann::json::parse(json.out);
    EXPECT_EQ(out.at("mode"), "layer");
    ASSERT_EQ(out.at("devices").size(), 2u);
    EXPECT_EQ(out["devices"][0]["first_layer"], 0);
    const int first = out["devices"][0]["n_layers"];
    EXPECT_EQ(out["devices"][1]["first_layer"], first);
    EXPECT_EQ(first + out["devices"][1]["n_layers"].get<int>(), 30);
    EXPECT_GT(first, 15);  // two thirds of the bytes
    EXPECT_EQ(out.at("transfers_per_token"), 1);
    EXPECT_EQ(out["devices"][1]["output"], true);

    const test::CliRun table = run_cli("plan " + smollm2() + " --devices 'RTX 4090:24;RTX 3090:24' --split tensor");
    ASSERT_EQ(table.status, 0) << table.err;
    EXPECT_NE(table.out.find("tensor split"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("60 all-reduces"), std::string::npos) << table.out;
}

TEST(CliPlan, ImpossibleRequestsAreExplained) {
    // SmolLM2 has 3 KV heads.
    const test::CliRun heads = run_cli("plan " + smollm2() + " --devices 'a:24;b:24;c:24;d:24' --split tensor");
    EXPECT_EQ(heads.status, 1);
    EXPECT_NE(heads.err.find("needs at least 4 KV heads"), std::string::npos) << heads.err;
    const test::CliRun small = run_cli("plan " + smollm2() + " --devices 'tiny:0.75;big:24' --use 0 --ctx 8192");
    EXPECT_EQ(small.status, 1);
    EXPECT_NE(small.err.find("device 0 (tiny): needs"), std::string::npos) << small.err;
    EXPECT_NE(small.err.find("lower the context to"), std::string::npos) << small.err;
    EXPECT_NE(small.err.find("add device 1 (big)"), std::string::npos) << small.err;
    const test::CliRun bad = run_cli("plan " + smollm2() + " --devices 'RTX 4090'");
    EXPECT_EQ(bad.status, 1);
    EXPECT_NE(bad.err.find("NAME:GiB"), std::string::npos) << bad.err;
    const test::CliRun mode = run_cli("plan " + smollm2() + " --split pipeline --devices 'a:24'");
    EXPECT_EQ(mode.status, 1);
    EXPECT_NE(mode.err.find("auto, single, layer, tensor"), std::string::npos) << mode.err;
}

// The virtual CPU devices that generate, chat and bench run on (--devices cpu:N).
TEST(CliPlan, VirtualCpuDevices) {
    const test::CliRun run = run_cli("plan " + smollm2() + " --devices cpu:3 --split tensor --reserve-mib 0 --json");
    ASSERT_EQ(run.status, 0) << run.err;
    const nlohmann::json out = nlohmann::json::parse(run.out);
    ASSERT_EQ(out.at("devices").size(), 3u);
    EXPECT_EQ(out["devices"][2]["name"], "CPU 2");
    EXPECT_EQ(out["devices"][2]["kv_head_begin"], 2);
    EXPECT_EQ(out["devices"][2]["ff_end"], 1536);
    const test::CliRun bad = run_cli("plan " + smollm2() + " --devices cpu:0");
    EXPECT_EQ(bad.status, 1);
    EXPECT_NE(bad.err.find("cpu:N"), std::string::npos) << bad.err;
}

TEST(CliPlan, UsesTheSimulatedGpus) {
    setenv("POWERHOUSE_SIMULATE_GPUS", "RTX 4090:24;A100:80", 1);
    const test::CliRun run = run_cli("plan " + smollm2());
    unsetenv("POWERHOUSE_SIMULATE_GPUS");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_NE(run.out.find("2 from simulated GPUs"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("single split"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace powerhouse
