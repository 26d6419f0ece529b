// powerhouse-cli search against the loopback Hugging Face Hub (hub_test_server.py on
// 127.0.0.1, HF_ENDPOINT pointing at it): repositories by query across pages, a repository's
// GGUF models by quantization, JSON, and what goes wrong (no GGUF, unknown repository, a
// broken answer, bad usage). Then the listed file pulled and verified.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "hub_test_server.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

namespace fs = std::filesystem;
using test::contains;
using test::quoted;
using test::run_cli;

class CliSearch : public ::testing::Test {
protected:
    static void SetUpTestSuite() { hub_ = new test::HubTestServer(); }
    static void TearDownTestSuite() { delete hub_; }
    void SetUp() override {
        ASSERT_TRUE(hub_->running());
        setenv("HF_ENDPOINT", hub_->endpoint().c_str(), 1);
        unsetenv("HF_TOKEN");
    }
    void TearDown() override { unsetenv("HF_ENDPOINT"); }
    static test::HubTestServer* hub_;
};

test::HubTestServer* CliSearch::hub_ = nullptr;

TEST_F(CliSearch, RepositoriesMostDownloadedFirstAcrossPages) {
    const test::CliRun run = run_cli("search gguf");
    ASSERT_EQ(run.status, 0) << run.err;
    // The last column notes gated repositories (empty cells keep their separator).
    const std::string expected =
        "repository                            downloads  likes     updated  \n"
        "split-org/Big-Model-GGUF                 310455    842  2025-03-30  \n"
        "gated-org/Gated-Model-GGUF               120034    410  2025-02-20  gated\n"
        "smol-org/SmolLM2-135M-Instruct-GGUF       48213     37  2025-01-14  \n"
        "quant-lab/SmolLM2-1.7B-Instruct-GGUF       9120     12  2024-12-03  \n"
        "plain-org/Model-GGUF-Pending               5022      3  2024-08-01  \n";
    EXPECT_EQ(run.out, expected);
    EXPECT_TRUE(contains(run.err, "search --files OWNER/NAME")) << run.err;

    // Fewer than the Hub has: no notes column when none is gated, and the rest is mentioned.
    const test::CliRun two = run_cli("search smollm2 --limit 2");
    ASSERT_EQ(two.status, 0) << two.err;
    EXPECT_EQ(two.out,
              "repository                            downloads  likes     updated\n"
              "smol-org/SmolLM2-135M-Instruct-GGUF       48213     37  2025-01-14\n"
              "quant-lab/SmolLM2-1.7B-Instruct-GGUF       9120     12  2024-12-03\n");
    EXPECT_TRUE(contains(two.err, "the first 2 shown")) << two.err;
}

TEST_F(CliSearch, Json) {
    const test::CliRun run = run_cli("search 'SmolLM2' --json");
    ASSERT_EQ(run.status, 0) << run.err;
    const nlohmann::json out = nlohmann::json::parse(run.out);
    EXPECT_EQ(out["query"], "SmolLM2");
    EXPECT_EQ(out["more"], false);
    ASSERT_EQ(out["models"].size(), 3u);
    EXPECT_EQ(out["models"][0]["id"], test::kHubSmolRepo);
    EXPECT_EQ(out["models"][0]["downloads"], 48213);
    EXPECT_EQ(out["models"][0]["likes"], 37);
    EXPECT_EQ(out["models"][0]["updated"], "2025-01-14");
    EXPECT_EQ(out["models"][2]["updated"], "2024-11-20") << "no lastModified: the creation date";
}

TEST_F(CliSearch, NothingFoundIsNotAnError) {
    const test::CliRun run = run_cli("search 'no such thing'");
    EXPECT_EQ(run.status, 0);
    EXPECT_EQ(run.out, "");
    EXPECT_TRUE(contains(run.err, "no GGUF repository on " + hub_->endpoint() + " matches \"no such thing\""))
        << run.err;
}

TEST_F(CliSearch, TheFilesOfARepositoryByQuantization) {
    const test::CliRun run = run_cli("search --files split-org/Big-Model-GGUF");
    ASSERT_EQ(run.status, 0) << run.err;
    const std::string expected =
        "split-org/Big-Model-GGUF: 3 GGUF models\n"
        "\n"
        "quantization      size  parts  file\n"
        "IQ4_XS        3.93 GiB      1  Big-Model-IQ4_XS.gguf\n"
        "Q4_K_M        4.36 GiB      2  Q4_K_M/Big-Model-Q4_K_M-00001-of-00002.gguf\n"
        "Q8_0          7.55 GiB      3  Q8_0/Big-Model-Q8_0-00001-of-00003.gguf\n";
    EXPECT_EQ(run.out, expected);
    EXPECT_TRUE(contains(run.err, "powerhouse-cli pull " + hub_->endpoint() + "/split-org/Big-Model-GGUF/resolve/main/"))
        << run.err;

    const test::CliRun json = run_cli("search --files split-org/Big-Model-GGUF --json");
    ASSERT_EQ(json.status, 0) << json.err;
    const nlohmann::json out = nlohmann::json::parse(json.out);
    EXPECT_EQ(out["repository"], "split-org/Big-Model-GGUF");
    ASSERT_EQ(out["models"].size(), 3u);
    const nlohmann::json& q4 = out["models"][1];
    EXPECT_EQ(q4["quantization"], "Q4_K_M");
    EXPECT_EQ(q4["size"], 4680000000ull);
    EXPECT_EQ(q4["parts"], 2);
    EXPECT_EQ(q4["complete"], true);
    ASSERT_EQ(q4["files"].size(), 2u);
    EXPECT_EQ(q4["files"][1]["url"],
              hub_->endpoint() + "/split-org/Big-Model-GGUF/resolve/main/Q4_K_M/Big-Model-Q4_K_M-00002-of-00002.gguf");
    EXPECT_EQ(q4["files"][1]["sha256"].get<std::string>().size(), 64u);
}

TEST_F(CliSearch, ErrorsSayWhatIsWrong) {
    const test::CliRun pending = run_cli("search --files plain-org/Model-GGUF-Pending");
    EXPECT_EQ(pending.status, 1);
    EXPECT_TRUE(contains(pending.err, "error: plain-org/Model-GGUF-Pending has no GGUF files")) << pending.err;

    const test::CliRun missing = run_cli("search --files nobody/nothing");
    EXPECT_EQ(missing.status, 1);
    EXPECT_TRUE(contains(missing.err, "HTTP 404")) << missing.err;

    const test::CliRun broken = run_cli("search malformed-downloads");
    EXPECT_EQ(broken.status, 1);
    EXPECT_TRUE(contains(broken.err, "error: model 'quant-lab/SmolLM2-1.7B-Instruct-GGUF': downloads is not a count"))
        << broken.err;

    EXPECT_EQ(run_cli("search").status, 2);
    EXPECT_EQ(run_cli("search x --files a/b").status, 2);
    const test::CliRun bad_repo = run_cli("search --files just-a-name");
    EXPECT_EQ(bad_repo.status, 2);
    EXPECT_TRUE(contains(bad_repo.err, "OWNER/NAME")) << bad_repo.err;
    EXPECT_EQ(run_cli("search x --limit 0").status, 2);
}

TEST_F(CliSearch, AListedFilePullsAndVerifies) {
    if (!fs::exists(test::test_model_path())) GTEST_SKIP() << "no test model (scripts/fetch-test-model)";
    const test::CliRun listed = run_cli(std::string("search --files ") + test::kHubSmolRepo + " --json");
    ASSERT_EQ(listed.status, 0) << listed.err;
    std::string url;
    const nlohmann::json answer = nlohmann::json::parse(listed.out);
    for (const auto& model : answer["models"]) {
        if (model["quantization"] == "Q4_1") url = model["files"][0]["url"];
    }
    ASSERT_FALSE(url.empty()) << listed.out;
    test::TempDir dir;
    const test::CliRun pulled = run_cli("pull " + url + " -o " + quoted(dir.path()));
    ASSERT_EQ(pulled.status, 0) << pulled.err;
    EXPECT_TRUE(contains(pulled.out, "verified (X-Linked-Etag)")) << pulled.out;
    EXPECT_EQ(fs::file_size(dir / test::kHubSmolFile), fs::file_size(test::test_model_path()));
}

}  // namespace
}  // namespace powerhouse
