// generate and chat on a model whose thinking comes apart from its answer
// (GenerateCommand::read_answer): shown between "<think>" and "</think>" lines as chat --remote
// shows a server's reasoning, "reasoning" in generate's --json, an answer cut while thinking
// said on stderr. No reasoning model is at hand offline: the test model (SmolLM2, which never
// thinks) is given Qwen3.5's template, whose prompt opens the think block, so that everything
// it writes is thinking. And a model that does not think answers as it did before.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_runner.h"
#include "cli/model_copies.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

const char kCutWhileReasoning[] =
    "(the answer reached its token limit while the model was still reasoning: no answer came";

using test::on_two_threads;

class CliReasoning : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        if (!std::filesystem::exists(test::test_model_path())) return;
        dir_ = new test::TempDir;
        model_ =
            test::test_model_with_template(*dir_, test::read_file(test::data_dir() / "templates" / "Qwen3.5-4B.jinja"));
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    void SetUp() override {
        if (!std::filesystem::exists(test::test_model_path()))
            GTEST_SKIP() << "no test model (scripts/fetch-test-model)";
        ASSERT_FALSE(model_.empty());
    }

    static test::TempDir* dir_;
    static std::filesystem::path model_;  // thinks from its first token
};

test::TempDir* CliReasoning::dir_ = nullptr;
std::filesystem::path CliReasoning::model_;

// All the model wrote is thinking, and the token limit came before any answer: the thinking
// in its block on stdout, no answer line, and the reason on stderr, as generate --remote.
TEST_F(CliReasoning, GenerateShowsTheThinkingInItsBlockAndSaysNoAnswerCame) {
    const std::string args = "generate " + on_two_threads(model_) + " -n 4 -p 'What is 2+2?'";
    const test::CliRun run = test::run_cli(args);
    ASSERT_EQ(run.status, 0) << run.err;
    ASSERT_GT(run.out.size(), std::strlen("<think>\n\n</think>\n")) << run.out;
    EXPECT_EQ(run.out.rfind("<think>\n", 0), 0u) << run.out;
    EXPECT_EQ(run.out.substr(run.out.size() - 10), "\n</think>\n") << run.out;
    EXPECT_NE(run.err.find(std::string(kCutWhileReasoning) + "; allow more tokens with -n)"), std::string::npos)
        << run.err;

    // --json: the thinking as "reasoning" (what the block showed), no text.
    const test::CliRun json = test::run_cli(args + " --json");
    ASSERT_EQ(json.status, 0) << json.err;
    const nlohmann::json out = nlohmann::json::parse(json.out);
    EXPECT_EQ(out.at("text"), "");
    EXPECT_EQ(out.at("stop_reason"), "length");
    ASSERT_TRUE(out.contains("reasoning")) << json.out;
    const std::string reasoning = out.at("reasoning");
    EXPECT_EQ(run.out, "<think>\n" + reasoning + "\n</think>\n");
    EXPECT_NE(json.err.find(kCutWhileReasoning), std::string::npos) << json.err;

    // The same prompt written out with --raw is no chat: what the model wrote is the text.
    const test::CliRun raw = test::run_cli("generate " + on_two_threads(model_) + " -n 4 --raw --json -p " +
                                           test::quoted("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>"
                                                        "assistant\n<think>\n"));
    ASSERT_EQ(raw.status, 0) << raw.err;
    const nlohmann::json raw_out = nlohmann::json::parse(raw.out);
    EXPECT_EQ(raw_out.at("prompt_ids"), out.at("prompt_ids"));
    EXPECT_EQ(raw_out.at("generated_ids"), out.at("generated_ids"));
    EXPECT_FALSE(raw_out.contains("reasoning")) << raw.out;
    EXPECT_NE(raw_out.at("text").get<std::string>().find(reasoning), std::string::npos) << raw.out;
    EXPECT_EQ(raw.err.find(kCutWhileReasoning), std::string::npos) << raw.err;
}

// Thinking that ends with the model's end-of-answer token, before the limit, is not cut: the
// block alone, nothing said (as generate --remote).
TEST_F(CliReasoning, ThinkingThatEndsBeforeTheLimitIsNotCalledCut) {
    const test::CliRun run = test::run_cli("generate " + on_two_threads(model_) + " -n 64 --json -p 'What is 2+2?'");
    ASSERT_EQ(run.status, 0) << run.err;
    const nlohmann::json out = nlohmann::json::parse(run.out);
    ASSERT_EQ(out.at("stop_reason"), "eos") << run.out;
    EXPECT_EQ(out.at("text"), "");
    EXPECT_FALSE(out.at("reasoning").get<std::string>().empty()) << run.out;
    EXPECT_EQ(run.err.find(kCutWhileReasoning), std::string::npos) << run.err;
}

// A turn that only thought is no answer: its block is shown, the chat says why nothing came
// and takes the message back, so that the next turn is asked as the first was.
TEST_F(CliReasoning, ChatShowsTheThinkingAndTakesBackATurnThatOnlyThought) {
    const test::CliRun run = test::run_cli("chat " + on_two_threads(model_) + " -n 8", std::string("hi\nhi\n"));
    EXPECT_EQ(run.status, 0) << run.err;
    const size_t block = run.out.find("\n</think>\n");
    ASSERT_NE(block, std::string::npos) << run.out;
    const std::string first = run.out.substr(0, block + 10);
    EXPECT_EQ(first.rfind("<think>\n", 0), 0u) << run.out;
    EXPECT_EQ(run.out, first + first);
    EXPECT_NE(run.err.find(std::string(kCutWhileReasoning) + ", and your message is taken back"), std::string::npos)
        << run.err;
}

std::string trimmed(const std::string& text) {
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return {};
    return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// A model that does not think answers as before: its chat answer, read in its format, is the
// text the same tokens make without any reading (--raw), its ends trimmed, and --json has no
// "reasoning".
TEST(CliReasoningNone, AModelThatDoesNotThinkAnswersAsBefore) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model (scripts/fetch-test-model)";
    const std::string system =
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n";
    for (const std::string prompt :
         {"Write a Python function that reverses a string.", "What is 12 * 7? Answer with just the number."}) {
        SCOPED_TRACE(prompt);
        const std::string args = "generate " + on_two_threads(test::test_model_path()) + " -n 64";
        const test::CliRun chat = test::run_cli(args + " --json -p " + test::quoted(prompt));
        ASSERT_EQ(chat.status, 0) << chat.err;
        const test::CliRun raw =
            test::run_cli(args + " --json --raw -p " +
                          test::quoted(system + "<|im_start|>user\n" + prompt + "<|im_end|>\n<|im_start|>assistant\n"));
        ASSERT_EQ(raw.status, 0) << raw.err;
        const nlohmann::json a = nlohmann::json::parse(chat.out);
        const nlohmann::json b = nlohmann::json::parse(raw.out);
        EXPECT_EQ(a.at("prompt_ids"), b.at("prompt_ids"));
        EXPECT_EQ(a.at("generated_ids"), b.at("generated_ids"));
        // The answer's content has its ends trimmed (GenerateCommand::read_answer).
        EXPECT_EQ(a.at("text"), trimmed(b.at("text")));
        EXPECT_FALSE(a.contains("reasoning")) << chat.out;
        const test::CliRun plain = test::run_cli(args + " -p " + test::quoted(prompt));
        ASSERT_EQ(plain.status, 0) << plain.err;
        EXPECT_EQ(plain.out, a.at("text").get<std::string>() + "\n");
        EXPECT_EQ(plain.err, "");
    }
}

}  // namespace
}  // namespace powerhouse
