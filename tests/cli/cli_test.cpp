#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using test::CliRun;
using test::quoted;
using test::run_cli;

TEST(CliInfo, JsonReportsSmolLM2Shape) {
    const CliRun run = run_cli("info --json " + quoted(test::test_model_path()));
    ASSERT_EQ(run.status, 0) << run.err;
    const auto json = nlohmann::json::parse(run.out);
    EXPECT_EQ(json["architecture"], "llama");
    EXPECT_EQ(json["n_layer"], 30);
    EXPECT_EQ(json["n_head"], 9);
    EXPECT_EQ(json["n_head_kv"], 3);
    EXPECT_EQ(json["n_embd"], 576);
    EXPECT_EQ(json["n_ff"], 1536);
    EXPECT_EQ(json["n_vocab"], 49152);
    EXPECT_EQ(json["file_type"], "Q4_1");
    EXPECT_EQ(json["tokenizer_model"], "gpt2");
    EXPECT_EQ(json["has_chat_template"], true);
    EXPECT_EQ(json["file_size"], 98362432);
    EXPECT_EQ(json["tensor_types"][0]["type"], "Q4_1");
    EXPECT_EQ(json["memory"]["n_ctx"], 8192);
    EXPECT_EQ(json["memory"]["kv_cache_bytes"], 30ll * 8192 * 3 * 128 * 2);
    EXPECT_TRUE(run.err.empty()) << run.err;
}

TEST(CliInfo, ContextAndKvTypeChangeTheEstimate) {
    const CliRun run = run_cli("info --json --ctx 1024 --kv-type q8_0 " + quoted(test::test_model_path()));
    ASSERT_EQ(run.status, 0) << run.err;
    const auto json = nlohmann::json::parse(run.out);
    EXPECT_EQ(json["memory"]["n_ctx"], 1024);
    EXPECT_EQ(json["memory"]["kv_type"], "q8_0");
    EXPECT_EQ(json["memory"]["kv_cache_bytes"], 30ll * 1024 * 3 * 128 / 32 * 34);
}

TEST(CliInfo, TextOutputNamesTheEssentials) {
    const CliRun run = run_cli("info " + quoted(test::test_model_path()));
    ASSERT_EQ(run.status, 0) << run.err;
    for (const char* fragment : {"architecture       llama", "layers             30", "quantization       Q4_1",
                                 "49152 tokens, tokenizer gpt2 / smollm", "chat template      yes", "Q4_1      210"}) {
        EXPECT_NE(run.out.find(fragment), std::string::npos) << "missing '" << fragment << "' in\n" << run.out;
    }
}

TEST(CliInfo, MissingFileIsAClearErrorOnStderr) {
    test::TempDir dir;
    const CliRun run = run_cli("info " + quoted(dir / "missing.gguf"));
    EXPECT_EQ(run.status, 1);
    EXPECT_TRUE(run.out.empty());
    EXPECT_NE(run.err.find("error: cannot open"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("No such file"), std::string::npos) << run.err;
}

TEST(CliInfo, MalformedFileNamesFieldAndOffset) {
    test::TempDir dir;
    std::string bytes = test::read_file(test::data_dir() / "gguf/all_types.gguf");
    bytes[4] = 7;  // version 7
    test::write_file(dir / "bad.gguf", bytes);
    const CliRun run = run_cli("info " + quoted(dir / "bad.gguf"));
    EXPECT_EQ(run.status, 1);
    EXPECT_NE(run.err.find("bad.gguf: header: GGUF version 7 is not supported"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("(at byte 4)"), std::string::npos) << run.err;
}

// A folder opens like a file and reads as nothing: --prompt-file generated from an empty
// prompt, --context said "not valid JSON". Both read the file before any model is loaded.
TEST(CliFiles, AFolderGivenForATextFileIsNamed) {
    test::TempDir dir;
    const CliRun prompt =
        run_cli("generate -m " + quoted(test::test_model_path()) + " -t 1 -n 1 --prompt-file " + quoted(dir.path()));
    EXPECT_EQ(prompt.status, 1);
    EXPECT_TRUE(prompt.out.empty()) << prompt.out;
    EXPECT_NE(prompt.err.find("is a folder: name a file"), std::string::npos) << prompt.err;

    const CliRun context = run_cli("template --builtin chatml --context " + quoted(dir.path()));
    EXPECT_EQ(context.status, 1);
    EXPECT_NE(context.err.find("is a folder: name a file"), std::string::npos) << context.err;

    // A missing file says why.
    const CliRun missing = run_cli("template --builtin chatml --context " + quoted(dir / "missing.json"));
    EXPECT_EQ(missing.status, 1);
    EXPECT_NE(missing.err.find("missing.json': No such file or directory"), std::string::npos) << missing.err;
}

// JSON output holding text that is not UTF-8 (a file name, a device name, a model's
// metadata): nlohmann's dump threw, and the program aborted (status 134). Such bytes are
// written as U+FFFD.
TEST(CliJson, TextThatIsNotUtf8IsReplaced) {
    test::TempDir dir;
    const std::filesystem::path model = dir / "caf\xe9.gguf";  // Latin-1
    std::filesystem::create_symlink(test::test_model_path(), model);
    const CliRun info = run_cli("info --json " + quoted(model));
    ASSERT_EQ(info.status, 0) << info.err;
    EXPECT_TRUE(nlohmann::json::accept(info.out)) << info.out;

    const CliRun plan = run_cli("plan --json -m " + quoted(model) + " --devices 'GPU \xe9:8'");
    ASSERT_EQ(plan.status, 0) << plan.err;
    const auto json = nlohmann::json::parse(plan.out);
    EXPECT_NE(json.dump().find("GPU \xef\xbf\xbd"), std::string::npos) << plan.out;
}

// --save-logits is written to FILE.part and renamed onto FILE: as root, --save-logits
// /dev/null replaced the device node with the logits, and a folder failed only at the end
// of the run. --kl-base of a folder said "no such file".
TEST(CliPerplexity, SaveLogitsRefusesAFolderOrADevice) {
    test::TempDir dir;
    std::string text;
    for (int i = 0; i < 20; ++i) text += "The quick brown fox jumps over the lazy dog. ";
    test::write_file(dir / "text.txt", text);
    std::filesystem::create_directory(dir / "folder");
    std::filesystem::create_symlink("/dev/null", dir / "null.bin");  // the link is what a rename replaces
    const std::string run =
        "perplexity -m " + quoted(test::test_model_path()) + " -t 1 --ctx 16 --chunks 2 -f " + quoted(dir / "text.txt");

    const CliRun folder = run_cli(run + " --save-logits " + quoted(dir / "folder"));
    EXPECT_EQ(folder.status, 1);
    EXPECT_NE(folder.err.find("folder' is a folder, not a file"), std::string::npos) << folder.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "folder.part"));

    const CliRun device = run_cli(run + " --save-logits " + quoted(dir / "null.bin"));
    EXPECT_EQ(device.status, 1);
    EXPECT_NE(device.err.find("null.bin' is a device or other special file"), std::string::npos) << device.err;
    EXPECT_TRUE(std::filesystem::is_symlink(dir / "null.bin"));

    const CliRun base = run_cli(run + " --kl-base " + quoted(dir / "folder"));
    EXPECT_NE(base.status, 0);
    EXPECT_NE(base.err.find("folder': is a folder"), std::string::npos) << base.err;
}

TEST(CliUsage, BadUsageExitsWithTwo) {
    EXPECT_EQ(run_cli("info").status, 2);
    EXPECT_EQ(run_cli("info --ctx 0 x.gguf").status, 2);
    EXPECT_EQ(run_cli("info --kv-type q4 x.gguf").status, 2);
    EXPECT_EQ(run_cli("no-such-command").status, 2);
}

TEST(CliUsage, VersionAndHelp) {
    const CliRun version = run_cli("--version");
    EXPECT_EQ(version.status, 0);
    EXPECT_EQ(version.out.rfind("powerhouse-cli 0.", 0), 0u) << version.out;
    EXPECT_NE(version.out.find("commit"), std::string::npos);
    // What it finds at run time: here no driver (or a fake one), and it says so.
    EXPECT_NE(version.out.find("\nCUDA: "), std::string::npos) << version.out;
    EXPECT_NE(version.out.find("\nNVIDIA driver: "), std::string::npos) << version.out;
    EXPECT_NE(version.out.find("\nNCCL: "), std::string::npos) << version.out;
    const CliRun help = run_cli("--help");
    EXPECT_EQ(help.status, 0);
    EXPECT_NE(help.out.find("info"), std::string::npos);
    EXPECT_NE(help.out.find("synth"), std::string::npos);
}

}  // namespace
}  // namespace powerhouse
