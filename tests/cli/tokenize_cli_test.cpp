// powerhouse-cli tokenize and detokenize, run as a user would: JSON lines in on stdin, JSON
// lines out on stdout, errors on stderr with the line number.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli_runner.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using test::CliRun;
using test::quoted;

CliRun cli(const std::string& args, const std::string& input) { return test::run_cli(args, input); }

std::vector<nlohmann::json> json_lines(const std::string& out) {
    std::vector<nlohmann::json> lines;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
    return lines;
}

std::string vocab(const std::string& name) {
    return quoted(test::shared_testdata_dir() / "vocab" / ("ggml-vocab-" + name + ".gguf"));
}

TEST(CliTokenize, TokenizesEachLine) {
    const CliRun run = cli("tokenize --no-bos -m " + vocab("gpt-2"),
                           "{\"text\": \"Hello world\"}\n{\"text\": \"\"}\n\n{\"text\": \"<|endoftext|>\"}\n");
    ASSERT_EQ(run.status, 0) << run.err;
    const auto lines = json_lines(run.out);
    ASSERT_EQ(lines.size(), 3u) << run.out;
    EXPECT_EQ(lines[0]["ids"], nlohmann::json::parse("[15496, 995]"));
    EXPECT_EQ(lines[1]["ids"], nlohmann::json::array());
    EXPECT_NE(lines[2]["ids"], nlohmann::json::parse("[50256]"));  // typed markup stays text
    EXPECT_TRUE(run.err.empty()) << run.err;
}

TEST(CliTokenize, SpecialAndBosFlags) {
    const CliRun special = cli("tokenize --no-bos --special -m " + vocab("gpt-2"), "{\"text\": \"<|endoftext|>\"}\n");
    ASSERT_EQ(special.status, 0) << special.err;
    EXPECT_EQ(json_lines(special.out).at(0)["ids"], nlohmann::json::parse("[50256]"));
    // Llama 2 asks for a BOS token; --no-bos leaves it out.
    const CliRun bos = cli("tokenize -m " + vocab("llama-spm"), "{\"text\": \"Hello\"}\n");
    ASSERT_EQ(bos.status, 0) << bos.err;
    EXPECT_EQ(json_lines(bos.out).at(0)["ids"], nlohmann::json::parse("[1, 15043]"));
    const CliRun no_bos = cli("tokenize --no-bos -m " + vocab("llama-spm"), "{\"text\": \"Hello\"}\n");
    EXPECT_EQ(json_lines(no_bos.out).at(0)["ids"], nlohmann::json::parse("[15043]"));
}

TEST(CliTokenize, BadLinesAreNamed) {
    const CliRun bad = cli("tokenize -m " + vocab("gpt-2"), "{\"text\": \"ok\"}\nnot json\n{\"text\": \"x\"}\n");
    EXPECT_EQ(bad.status, 1);
    EXPECT_EQ(json_lines(bad.out).size(), 1u);  // the lines before it were answered
    EXPECT_NE(bad.err.find("stdin line 2: not valid JSON"), std::string::npos) << bad.err;
    const CliRun no_text = cli("tokenize -m " + vocab("gpt-2"), "{\"txt\": \"ok\"}\n");
    EXPECT_EQ(no_text.status, 1);
    EXPECT_NE(no_text.err.find("stdin line 1: expected {\"text\": \"...\"}"), std::string::npos) << no_text.err;
}

TEST(CliTokenize, MissingModelAndBadUsage) {
    test::TempDir dir;
    const CliRun missing = cli("tokenize -m " + quoted(dir / "missing.gguf"), "");
    EXPECT_EQ(missing.status, 1);
    EXPECT_NE(missing.err.find("missing.gguf"), std::string::npos) << missing.err;
    EXPECT_EQ(cli("tokenize", "").status, 2);
    EXPECT_EQ(cli("detokenize --bogus -m x.gguf", "").status, 2);
}

TEST(CliDetokenize, RoundTripsThroughBothCommands) {
    const std::string text = "Hello, мир! 你好 🦀\\n\\tcode()";
    for (const char* name : {"gpt-2", "llama-spm", "starcoder"}) {
        const CliRun tokens = cli("tokenize --no-bos -m " + vocab(name), "{\"text\": \"" + text + "\"}\n");
        ASSERT_EQ(tokens.status, 0) << tokens.err;
        const CliRun back = cli("detokenize -m " + vocab(name), tokens.out);
        ASSERT_EQ(back.status, 0) << back.err;
        EXPECT_EQ(json_lines(back.out).at(0)["text"], "Hello, мир! 你好 🦀\n\tcode()") << name;
    }
}

TEST(CliDetokenize, SpecialsBrokenBytesAndErrors) {
    // <0xE4> <0xBD> alone are half a character: shown as U+FFFD.
    const CliRun broken = cli("detokenize -m " + vocab("llama-spm"), "{\"ids\": [1, 15043, 231, 192]}\n");
    ASSERT_EQ(broken.status, 0) << broken.err;
    EXPECT_EQ(json_lines(broken.out).at(0)["text"], "Hello\xEF\xBF\xBD");
    const CliRun shown = cli("detokenize --special -m " + vocab("gpt-2"), "{\"ids\": [50256, 15496]}\n");
    EXPECT_EQ(json_lines(shown.out).at(0)["text"], "<|endoftext|>Hello");
    const CliRun hidden = cli("detokenize -m " + vocab("gpt-2"), "{\"ids\": [50256, 15496]}\n");
    EXPECT_EQ(json_lines(hidden.out).at(0)["text"], "Hello");
    const CliRun out_of_range = cli("detokenize -m " + vocab("gpt-2"), "{\"ids\": [1]}\n{\"ids\": [50257]}\n");
    EXPECT_EQ(out_of_range.status, 1);
    EXPECT_NE(out_of_range.err.find("stdin line 2: 50257 is not a token id"), std::string::npos) << out_of_range.err;
    const CliRun not_ids = cli("detokenize -m " + vocab("gpt-2"), "{\"ids\": \"1 2\"}\n");
    EXPECT_EQ(not_ids.status, 1);
    EXPECT_NE(not_ids.err.find("stdin line 1"), std::string::npos) << not_ids.err;
}

}  // namespace
}  // namespace powerhouse
