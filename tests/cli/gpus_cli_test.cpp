// powerhouse-cli gpus: simulated GPUs, no driver, and a fake NVML library in place of the
// driver's (the telemetry tests' fake_nvml), as table and JSON.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace powerhouse {
namespace {

using test::run_cli;

class CliGpus : public ::testing::Test {
protected:
    void SetUp() override {
        unsetenv("POWERHOUSE_SIMULATE_GPUS");
        unsetenv("POWERHOUSE_NVML_LIBRARY");
    }
};

TEST_F(CliGpus, SimulatedGpusAreShownAndMarked) {
    setenv("POWERHOUSE_SIMULATE_GPUS", "RTX 4090:24;RTX 4090:24;A100:80", 1);
    const test::CliRun json = run_cli("gpus --json");
    ASSERT_EQ(json.status, 0) << json.err;
    const nlohmann::json out = nlohmann::json::parse(json.out);
    EXPECT_EQ(out.at("simulated"), true);
    ASSERT_EQ(out.at("gpus").size(), 3u);
    EXPECT_EQ(out["gpus"][2]["name"], "A100");
    EXPECT_EQ(out["gpus"][2]["memory_total_bytes"], 80ull << 30);
    EXPECT_EQ(out["gpus"][0]["simulated"], true);
    EXPECT_TRUE(out["gpus"][0]["temperature_c"].is_number());

    const test::CliRun table = run_cli("gpus");
    ASSERT_EQ(table.status, 0) << table.err;
    EXPECT_NE(table.out.find("SIMULATED"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("A100"), std::string::npos) << table.out;

    const test::CliRun watch = run_cli("gpus --json --watch 0.05 --count 3");
    ASSERT_EQ(watch.status, 0) << watch.err;
    EXPECT_EQ(std::count(watch.out.begin(), watch.out.end(), '\n'), 3) << watch.out;
}

TEST_F(CliGpus, NoDriverIsNotAnError) {
    setenv("POWERHOUSE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    const test::CliRun table = run_cli("gpus");
    EXPECT_EQ(table.status, 0);
    EXPECT_NE(table.out.find("no NVIDIA driver found"), std::string::npos) << table.out;
    const test::CliRun json = run_cli("gpus --json");
    EXPECT_EQ(json.status, 0);
    const nlohmann::json out = nlohmann::json::parse(json.out);
    EXPECT_NE(out.at("status").get<std::string>().find("no NVIDIA driver found"), std::string::npos);
    EXPECT_TRUE(out.at("gpus").empty());
}

TEST_F(CliGpus, ReadsTheDriversLibrary) {
    setenv("POWERHOUSE_NVML_LIBRARY", FAKE_NVML_PATH, 1);
    setenv("FAKE_NVML_SCENARIO", "normal", 1);
    const test::CliRun json = run_cli("gpus --json");
    ASSERT_EQ(json.status, 0) << json.err;
    const nlohmann::json out = nlohmann::json::parse(json.out);
    EXPECT_EQ(out.at("simulated"), false);
    ASSERT_EQ(out.at("gpus").size(), 2u);
    EXPECT_EQ(out["gpus"][0]["name"], "NVIDIA GeForce RTX 4090");
    EXPECT_EQ(out["gpus"][0]["power_w"], 412.345);
    EXPECT_EQ(out["gpus"][0]["throttle_reasons"], nlohmann::json::array({"power cap"}));
    EXPECT_EQ(out["gpus"][1]["ecc_enabled"], true);
    EXPECT_EQ(out.at("nvlink"), nlohmann::json::parse(R"([{"a":0,"b":1,"nvlinks":2}])"));

    const test::CliRun table = run_cli("gpus");
    ASSERT_EQ(table.status, 0) << table.err;
    EXPECT_NE(table.out.find("GPU0-GPU1 NVLink x2"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("clocks held back by: power cap"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("Gen4 x8"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace powerhouse
