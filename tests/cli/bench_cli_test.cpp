// powerhouse-cli bench on the test model: the JSON report has every field, with values that
// agree with the request, and impossible requests fail with a message. Speed is never
// asserted here (DESIGN.md section 5): only that it was measured.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using test::CliRun;
using test::quoted;

void expect_positive_stats(const nlohmann::json& stats, const char* what) {
    ASSERT_TRUE(stats.is_object()) << what;
    ASSERT_TRUE(stats["mean"].is_number()) << what;
    ASSERT_TRUE(stats["stddev"].is_number()) << what;
    EXPECT_GT(stats["mean"].get<double>(), 0.0) << what;
    EXPECT_GE(stats["stddev"].get<double>(), 0.0) << what;
}

TEST(CliBench, JsonReportsWhatWasMeasured) {
    const auto model = test::test_model_path();
    const CliRun run = test::run_cli("bench -p 32 -n 8 -r 1 --json -t 2 -m " + quoted(model));
    ASSERT_EQ(run.status, 0) << run.err;
    const auto json = nlohmann::json::parse(run.out);

    EXPECT_EQ(json["engine"], "powerhouse");
    EXPECT_EQ(json["architecture"], "llama");
    EXPECT_EQ(json["file_type"], "Q4_1");
    EXPECT_EQ(json["threads"], 2);
    EXPECT_EQ(json["repetitions"], 1);
    EXPECT_EQ(json["tg_input"], "argmax");
    EXPECT_EQ(json["n_params"], 134515008);
    const auto file_size = static_cast<uint64_t>(std::filesystem::file_size(model));
    EXPECT_EQ(json["file_size_bytes"].get<uint64_t>(), file_size);
    EXPECT_GT(json["model_size_bytes"].get<uint64_t>(), file_size / 2);
    EXPECT_LE(json["model_size_bytes"].get<uint64_t>(), file_size);
    EXPECT_GE(json["n_ctx"].get<uint32_t>(), 40u);  // p + n

    EXPECT_EQ(json["pp"]["tokens"], 32);
    EXPECT_EQ(json["tg"]["tokens"], 8);
    expect_positive_stats(json["pp"]["tokens_per_second"], "pp tokens/s");
    expect_positive_stats(json["tg"]["tokens_per_second"], "tg tokens/s");
    expect_positive_stats(json["ttft_ms"], "ttft");
    ASSERT_EQ(json["pp"]["seconds"].size(), 1u);
    ASSERT_EQ(json["tg"]["seconds"].size(), 1u);
    const double pp_seconds = json["pp"]["seconds"][0].get<double>();
    const double tg_seconds = json["tg"]["seconds"][0].get<double>();
    EXPECT_GT(pp_seconds, 0.0);
    EXPECT_GT(tg_seconds, 0.0);
    // One repetition: the rates are the counts over the times, and the first token comes
    // after the prompt and before the end of generation.
    EXPECT_NEAR(json["pp"]["tokens_per_second"]["mean"].get<double>(), 32 / pp_seconds, 1e-6 * 32 / pp_seconds);
    EXPECT_NEAR(json["tg"]["tokens_per_second"]["mean"].get<double>(), 8 / tg_seconds, 1e-6 * 8 / tg_seconds);
    const double ttft_seconds = json["ttft_ms"]["mean"].get<double>() / 1e3;
    EXPECT_GT(ttft_seconds, pp_seconds);
    EXPECT_LE(ttft_seconds, pp_seconds + tg_seconds * (1 + 1e-9));
    // The weights are mapped and every one is read: most of the file is resident.
    EXPECT_GT(json["peak_rss_bytes"].get<uint64_t>(), file_size / 2);
}

// Several sequences at once (issue 18): aggregate speed per count, the late request's time to
// first token, and KV memory that follows the positions held, not the pool.
TEST(CliBench, ParallelReportsEachCountOfSequences) {
    const CliRun run = test::run_cli("bench -p 16 -n 8 -r 1 -t 2 --parallel 1,3 --json -m " +
                                     quoted(test::test_model_path()));
    ASSERT_EQ(run.status, 0) << run.err;
    const auto json = nlohmann::json::parse(run.out);
    ASSERT_EQ(json["parallel"].size(), 2u);
    uint64_t peak_blocks[2] = {0, 0};
    for (size_t i = 0; i < 2; ++i) {
        const auto& r = json["parallel"][i];
        const uint32_t n = i == 0 ? 1 : 3;
        SCOPED_TRACE(n);
        EXPECT_EQ(r["sequences"], n);
        expect_positive_stats(r["tg_tokens_per_second"], "aggregate tg");
        expect_positive_stats(r["pp_tokens_per_second"], "aggregate pp");
        expect_positive_stats(r["ttft_batch_ms"], "ttft");
        expect_positive_stats(r["ttft_under_load_ms"], "ttft under load");
        EXPECT_EQ(r["positions_held_at_most"], (n + 1) * (16 + 8));
        peak_blocks[i] = r["peak_kv_blocks"].get<uint64_t>();
        // Blocks of 32 positions: one per sequence of 24 positions (and the late request).
        EXPECT_GE(peak_blocks[i], n);
        EXPECT_LE(peak_blocks[i], n + 1);
        EXPECT_EQ(r["peak_kv_bytes"].get<uint64_t>(),
                  peak_blocks[i] * static_cast<uint64_t>(r["kv_bytes_per_position"].get<double>() * 32));
    }
    EXPECT_GT(peak_blocks[1], peak_blocks[0]);
    const CliRun table = test::run_cli("bench -p 8 -n 4 -r 1 -t 1 --parallel 2 -m " + quoted(test::test_model_path()));
    ASSERT_EQ(table.status, 0) << table.err;
    EXPECT_NE(table.out.find("ttft ms (under load)"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("KV in use"), std::string::npos) << table.out;
}

TEST(CliBench, TableByDefault) {
    const CliRun run = test::run_cli("bench -p 8 -n 2 -r 1 -t 1 -m " + quoted(test::test_model_path()));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_NE(run.out.find("pp8"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("tg2"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("time to first token"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("peak resident memory"), std::string::npos) << run.out;
}

// Split over virtual CPU devices: each device's share and its time, computing and
// communicating, in the JSON and the table.
TEST(CliBench, ReportsEachDeviceOfASplit) {
    const std::string model = quoted(test::test_model_path());
    for (const char* split : {"layer", "tensor"}) {
        SCOPED_TRACE(split);
        const CliRun run = test::run_cli(std::string("bench -p 16 -n 4 -r 1 -t 2 --json --devices cpu:3 --split ") +
                                         split + " -m " + model);
        ASSERT_EQ(run.status, 0) << run.err;
        const auto json = nlohmann::json::parse(run.out);
        EXPECT_EQ(json["split"], split);
        ASSERT_EQ(json["per_device"].size(), 3u);
        uint64_t weights = 0;
        for (const auto& d : json["per_device"]) {
            EXPECT_GT(d["pp_busy_seconds"].get<double>(), 0.0) << d;
            EXPECT_GT(d["tg_busy_ms_per_token"].get<double>(), 0.0) << d;
            EXPECT_GE(d["tg_comm_ms_per_token"].get<double>(), 0.0) << d;
            EXPECT_LE(d["tg_comm_ms_per_token"].get<double>(), d["tg_busy_ms_per_token"].get<double>() + 1e-9) << d;
            weights += d["weight_bytes"].get<uint64_t>();
        }
        EXPECT_GE(weights, json["model_size_bytes"].get<uint64_t>());
        if (std::string(split) == "tensor") {
            // Every device of a tensor split waits in the all-reduces: their time is counted.
            EXPECT_GT(json["per_device"][1]["tg_comm_ms_per_token"].get<double>(), 0.0);
        }
    }
    const CliRun table = test::run_cli("bench -p 8 -n 2 -r 1 -t 2 --devices cpu:2 --split layer -m " + model);
    ASSERT_EQ(table.status, 0) << table.err;
    EXPECT_NE(table.out.find("2 CPU devices, layer split"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("CPU 1"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("tg comm ms/t"), std::string::npos) << table.out;
    const CliRun bad = test::run_cli("bench -p 8 -n 2 --devices cpu:4 --split tensor -m " + model);
    EXPECT_EQ(bad.status, 1);
    EXPECT_NE(bad.err.find("KV heads"), std::string::npos) << bad.err;
}

TEST(CliBench, ImpossibleRequestsFailWithAMessage) {
    const std::string model = quoted(test::test_model_path());
    const CliRun too_long = test::run_cli("bench -p 100000 --ctx 512 -m " + model);
    EXPECT_EQ(too_long.status, 1);
    EXPECT_TRUE(too_long.out.empty()) << too_long.out;
    EXPECT_NE(too_long.err.find("do not fit in --ctx 512"), std::string::npos) << too_long.err;
    // Beyond the trained context (8192), found after loading.
    const CliRun past_training = test::run_cli("bench -p 8190 -n 8 -m " + model);
    EXPECT_EQ(past_training.status, 1);
    EXPECT_NE(past_training.err.find("trained for 8192"), std::string::npos) << past_training.err;
    EXPECT_EQ(test::run_cli("bench -r 0 -m " + model).status, 2);
    EXPECT_EQ(test::run_cli("bench -p 0 -m " + model).status, 2);
    test::TempDir dir;
    const CliRun missing = test::run_cli("bench -m " + quoted(dir / "missing.gguf"));
    EXPECT_EQ(missing.status, 1);
    EXPECT_NE(missing.err.find("missing.gguf"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace powerhouse
