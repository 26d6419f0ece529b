// powerhouse-cli synth run as a user would: the preset list with its experts column, and
// --dry-run, which sizes a file without writing it.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/cli_runner.h"
#include "powerhouse/synth.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using test::CliRun;
using test::contains;
using test::quoted;

TEST(SynthCli, ListShowsTheExperts) {
    const CliRun run = test::run_cli("synth --list");
    ASSERT_EQ(run.status, 0) << run.err;
    for (const char* fragment : {"experts/used x ffn", "qwen3-30b-a3b *", "128/8x768", "qwen3-235b-a22b", "128/8x1536",
                                 "mixtral-8x7b", "8/2x14336"}) {
        EXPECT_TRUE(contains(run.out, fragment)) << "missing '" << fragment << "' in\n" << run.out;
    }
    // Dense presets have none.
    const size_t line = run.out.find("llama3-8b *");
    ASSERT_NE(line, std::string::npos);
    EXPECT_TRUE(contains(run.out.substr(line, run.out.find('\n', line) - line), "  -  ")) << run.out;
}

TEST(SynthCli, DryRunPrintsThePlannedSizeAndWritesNothing) {
    test::TempDir dir;
    const std::filesystem::path file = dir / "mixtral.gguf";
    const CliRun run = test::run_cli("synth --like mixtral-8x7b --type q4_k_m --dry-run -o " + quoted(file));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_FALSE(std::filesystem::exists(file));
    EXPECT_FALSE(std::filesystem::exists(dir / "mixtral.gguf.part"));

    SynthOptions options;
    options.preset = "mixtral-8x7b";
    options.type = "q4_k_m";
    Result<SynthPlan> plan = plan_synth_model(options);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    for (const std::string& fragment :
         {std::string("would write"), std::string("mixtral-8x7b (Mixtral 8x7B Instruct v0.1), 32 layers, q4_k_m"),
          std::string("323 tensors"), "(" + std::to_string(plan->file_bytes) + " bytes)", std::string("Q8_0       64"),
          std::string("Q5_K       32")}) {
        EXPECT_TRUE(contains(run.out, fragment)) << "missing '" << fragment << "' in\n" << run.out;
    }

    // Without a file name, and with fewer layers.
    const CliRun small = test::run_cli("synth --like qwen3-235b-a22b --layers 2 --dry-run");
    ASSERT_EQ(small.status, 0) << small.err;
    EXPECT_TRUE(contains(small.out, "would write (no file): qwen3-235b-a22b")) << small.out;
    EXPECT_TRUE(contains(small.out, "2 layers, q4_k_m, 27 tensors")) << small.out;

    // Neither a file nor --dry-run (nor --list): a usage error.
    EXPECT_EQ(test::run_cli("synth --like mixtral-8x7b").status, 2);
}

// The model is written beside the output and renamed onto it, which over a device would
// put the model in the device node's place (as root, -o /dev/null --force replaced
// /dev/null) and over a folder failed only once the whole model was written.
TEST(SynthCli, RefusesToReplaceAFolderOrADeviceEvenWithForce) {
    test::TempDir dir;
    std::filesystem::create_directory(dir / "folder.gguf");
    const CliRun folder =
        test::run_cli("synth --like smollm2-135m --layers 1 --threads 1 --force -o " + quoted(dir / "folder.gguf"));
    EXPECT_EQ(folder.status, 1);
    EXPECT_TRUE(contains(folder.err, "folder.gguf is a folder, not a file")) << folder.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "folder.gguf.part"));

    // A link to the device stands for it (the link, not /dev/null, is what a rename replaces).
    std::filesystem::create_symlink("/dev/null", dir / "null.gguf");
    const CliRun device =
        test::run_cli("synth --like smollm2-135m --layers 1 --threads 1 --force -o " + quoted(dir / "null.gguf"));
    EXPECT_EQ(device.status, 1);
    EXPECT_TRUE(contains(device.err, "null.gguf is a device or other special file")) << device.err;
    EXPECT_TRUE(std::filesystem::is_symlink(dir / "null.gguf"));
}

// gpt-oss at full size, in the published files' type: MXFP4 experts, Q8_0 elsewhere.
TEST(SynthCli, DryRunOfGptOss120b) {
    const CliRun list = test::run_cli("synth --list");
    ASSERT_EQ(list.status, 0) << list.err;
    for (const char* fragment : {"gpt-oss-20b *", "32/4x2880", "gpt-oss-120b", "128/4x2880", "mxfp4_moe"}) {
        EXPECT_TRUE(contains(list.out, fragment)) << "missing '" << fragment << "' in\n" << list.out;
    }
    const CliRun run = test::run_cli("synth --like gpt-oss-120b --type mxfp4_moe --dry-run");
    ASSERT_EQ(run.status, 0) << run.err;
    SynthOptions options;
    options.preset = "gpt-oss-120b";
    options.type = "mxfp4_moe";
    Result<SynthPlan> plan = plan_synth_model(options);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    for (const std::string& fragment :
         {std::string("gpt-oss-120b (gpt-oss 120B), 36 layers, mxfp4_moe, 687 tensors"),
          "(" + std::to_string(plan->file_bytes) + " bytes)", std::string("MXFP4      108"),
          std::string("Q8_0       146")}) {
        EXPECT_TRUE(contains(run.out, fragment)) << "missing '" << fragment << "' in\n" << run.out;
    }
}

}  // namespace
}  // namespace powerhouse
