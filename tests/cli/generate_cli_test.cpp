// powerhouse-cli generate and chat on the test model. The greedy reference is llama.cpp's
// (tests/data/generation): the chat path's prompt ids (template render, special tokens only
// from the template) must equal llama.cpp's tokenization of jinja2's render, and a raw
// prompt whose every step is a clear choice must continue exactly as llama.cpp's does.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "cli/cli_runner.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using test::quoted;

const nlohmann::json& fixture() {
    static const nlohmann::json data =
        nlohmann::json::parse(test::read_file(test::data_dir() / "generation" / "smollm2_greedy.json"));
    return data;
}

const nlohmann::json& fixture_case(const std::string& name) {
    for (const nlohmann::json& c : fixture().at("cases")) {
        if (c.at("name") == name) return c;
    }
    throw std::runtime_error("no fixture case " + name);
}

std::string smollm2_on_two_threads() {
    return "-m " + quoted(test::test_model_path()) + " -t 2 --ctx 512";
}

TEST(CliGenerate, ChatPromptIdsEqualLlamaCppForEveryTemplatedCase) {
    int compared = 0;
    for (const nlohmann::json& c : fixture().at("cases")) {
        if (!c.at("templated").get<bool>() || c.at("messages").size() != 1) continue;
        test::TempDir dir;
        test::write_file(dir / "prompt.txt", c.at("messages").at(0).at("content").get<std::string>());
        const test::CliRun run = test::run_cli("generate " + smollm2_on_two_threads() +
                                               " --json -n 1 --temp 0 --prompt-file " + quoted(dir / "prompt.txt"));
        ASSERT_EQ(run.status, 0) << run.err;
        const nlohmann::json out = nlohmann::json::parse(run.out);
        EXPECT_EQ(out.at("prompt_ids"), c.at("prompt_ids")) << c.at("name");
        ++compared;
    }
    EXPECT_GE(compared, 4);
}

TEST(CliGenerate, RawGreedyContinuationEqualsLlamaCpp) {
    // Every step of this case is at least 2.99 logits clear of the runner-up in llama.cpp.
    const nlohmann::json& c = fixture_case("raw_counting");
    const test::CliRun run = test::run_cli("generate " + smollm2_on_two_threads() + " --raw --json --temp 0 -n 64 -p " +
                                           test::quoted(c.at("text").get<std::string>()));
    ASSERT_EQ(run.status, 0) << run.err;
    const nlohmann::json out = nlohmann::json::parse(run.out);
    EXPECT_EQ(out.at("prompt_ids"), c.at("prompt_ids"));
    EXPECT_EQ(out.at("generated_ids"), c.at("generated_ids"));
    EXPECT_EQ(out.at("text"), c.at("generated_text"));
    EXPECT_EQ(out.at("stop_reason"), "length");
}

// Speculative decoding by prompt lookup changes the steps, not the answer: still llama.cpp's
// tokens, with the guesses counted in --json's stats (--guess-always: how many are made by
// default depends on this machine's timings). A remote server decodes as it does.
TEST(CliGenerate, LookupDecodingGivesLlamaCppsContinuation) {
    const nlohmann::json& c = fixture_case("raw_counting");
    const std::string prompt =
        " --raw --json --temp 0 -n 64 --lookup-draft 8 -p " + test::quoted(c.at("text").get<std::string>());
    const test::CliRun timed = test::run_cli("generate " + smollm2_on_two_threads() + prompt);
    ASSERT_EQ(timed.status, 0) << timed.err;
    EXPECT_EQ(nlohmann::json::parse(timed.out).at("generated_ids"), c.at("generated_ids"));
    const test::CliRun run = test::run_cli("generate " + smollm2_on_two_threads() + prompt + " --guess-always");
    ASSERT_EQ(run.status, 0) << run.err;
    const nlohmann::json out = nlohmann::json::parse(run.out);
    EXPECT_EQ(out.at("generated_ids"), c.at("generated_ids"));
    EXPECT_EQ(out.at("text"), c.at("generated_text"));
    const nlohmann::json& stats = out.at("stats");
    EXPECT_GT(stats.at("drafted_tokens").get<int>(), 0) << stats.dump();
    EXPECT_GT(stats.at("accepted_tokens").get<int>(), 0) << stats.dump();
    EXPECT_EQ(stats.at("generated_tokens"), 64);

    const test::CliRun remote = test::run_cli("generate --remote http://127.0.0.1:9 --lookup-draft 8 -p hi");
    EXPECT_NE(remote.status, 0);
    EXPECT_NE(remote.err.find("--lookup-draft"), std::string::npos) << remote.err;
}

// A draft model changes the steps, not the answer: the model's own twin guesses every greedy
// token (made always: by default, a draft as slow as the model is seldom asked), and the
// continuation is still llama.cpp's. A missing file is named; a remote server
// decodes as it does.
TEST(CliGenerate, ADraftModelGivesLlamaCppsContinuation) {
    const nlohmann::json& c = fixture_case("raw_counting");
    const test::CliRun run =
        test::run_cli("generate " + smollm2_on_two_threads() +
                      " --raw --json --temp 0 -n 64 --guess-always --draft-tokens 6 --draft-model " +
                      quoted(test::test_model_path()) + " -p " + test::quoted(c.at("text").get<std::string>()));
    ASSERT_EQ(run.status, 0) << run.err;
    const nlohmann::json out = nlohmann::json::parse(run.out);
    EXPECT_EQ(out.at("generated_ids"), c.at("generated_ids"));
    const nlohmann::json& stats = out.at("stats");
    EXPECT_GT(stats.at("drafted_tokens").get<int>(), 30) << stats.dump();
    EXPECT_EQ(stats.at("accepted_tokens"), stats.at("drafted_tokens")) << stats.dump();

    const test::CliRun missing =
        test::run_cli("generate " + smollm2_on_two_threads() + " -p hi --draft-model /nonexistent/draft.gguf");
    EXPECT_EQ(missing.status, 1);
    EXPECT_NE(missing.err.find("--draft-model /nonexistent/draft.gguf: no such file"), std::string::npos)
        << missing.err;
    const test::CliRun remote =
        test::run_cli("generate --remote http://127.0.0.1:9 -p hi --draft-model " + quoted(test::test_model_path()));
    EXPECT_EQ(remote.status, 2);
    EXPECT_NE(remote.err.find("--draft-model"), std::string::npos) << remote.err;
}

// --tools offers a local model the file's tools, in its template's format; --tool-choice NAME
// (or required) makes the answer that call, printed after the text, in --json as OpenAI's
// tool_calls; none offers nothing. A chat turn that only called tools is taken back.
TEST(CliGenerate, ALocalModelCallsTheToolItIsOffered) {
    test::TempDir dir;
    test::write_file(dir / "tools.json",
                     R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",)"
                     R"( "parameters": {"type": "object", "properties": {"city": {"type": "string"}},)"
                     R"( "required": ["city"]}}}])");
    const std::string ask = "generate " + smollm2_on_two_threads() + " --temp 0 -n 60 -p " +
                            quoted("What is the weather in Paris?") + " --tools " + quoted(dir / "tools.json");
    const test::CliRun forced = test::run_cli(ask + " --tool-choice get_weather");
    ASSERT_EQ(forced.status, 0) << forced.err;
    EXPECT_NE(forced.out.find("<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":"), std::string::npos)
        << forced.out;
    EXPECT_NE(forced.out.find("</tool_call>"), std::string::npos) << forced.out;
    const test::CliRun json_run = test::run_cli(ask + " --tool-choice required --json");
    ASSERT_EQ(json_run.status, 0) << json_run.err;
    const nlohmann::json out = nlohmann::json::parse(json_run.out);
    ASSERT_EQ(out.at("tool_calls").size(), 1u) << json_run.out;
    EXPECT_EQ(out.at("tool_calls").at(0).at("function").at("name"), "get_weather");
    EXPECT_TRUE(nlohmann::json::parse(out.at("tool_calls").at(0).at("function").at("arguments").get<std::string>())
                    .contains("city"));
    EXPECT_EQ(out.at("text"), "");
    const test::CliRun none = test::run_cli(ask + " --tool-choice none --json");
    ASSERT_EQ(none.status, 0) << none.err;
    EXPECT_FALSE(nlohmann::json::parse(none.out).contains("tool_calls")) << none.out;
    EXPECT_NE(nlohmann::json::parse(none.out).at("text"), "");

    const test::CliRun chat = test::run_cli("chat " + smollm2_on_two_threads() + " --temp 0 -n 60 --tools " +
                                                quoted(dir / "tools.json") + " --tool-choice get_weather",
                                            "What is the weather in Paris?\n");
    ASSERT_EQ(chat.status, 0) << chat.err;
    EXPECT_NE(chat.out.find("<tool_call>"), std::string::npos) << chat.out;
    EXPECT_NE(chat.err.find("only called tools"), std::string::npos) << chat.err;
}

// A raw prompt that writes the chat template by hand: its special tokens become their ids
// (as the tokenizer's --special gives them), or stay text with --no-special.
TEST(CliGenerate, RawPromptsParseTheSpecialTokensWrittenInThem) {
    const std::string text = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    const nlohmann::json line = {{"text", text}};
    const auto ids_of = [&](const std::string& flags) {
        const test::CliRun run =
            test::run_cli("tokenize -m " + quoted(test::test_model_path()) + " " + flags, line.dump() + "\n");
        EXPECT_EQ(run.status, 0) << run.err;
        return nlohmann::json::parse(run.out).at("ids");
    };
    const nlohmann::json special = ids_of("--special");
    const nlohmann::json plain = ids_of("");
    ASSERT_NE(special, plain);
    ASSERT_LT(special.size(), plain.size()) << "<|im_start|> and <|im_end|> are one token each";
    const test::CliRun run =
        test::run_cli("generate " + smollm2_on_two_threads() + " --raw --json --temp 0 -n 1 -p " + test::quoted(text));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(nlohmann::json::parse(run.out).at("prompt_ids"), special);
    const test::CliRun literal = test::run_cli("generate " + smollm2_on_two_threads() +
                                               " --raw --no-special --json --temp 0 -n 1 -p " + test::quoted(text));
    ASSERT_EQ(literal.status, 0) << literal.err;
    EXPECT_EQ(nlohmann::json::parse(literal.out).at("prompt_ids"), plain);
    const test::CliRun without_raw = test::run_cli("generate " + smollm2_on_two_threads() + " --no-special -n 1 -p hi");
    EXPECT_NE(without_raw.status, 0) << "--no-special needs --raw";
}

// The same case on virtual CPU devices, split by layer and by tensor.
TEST(CliGenerate, SplitOverDevicesStillEqualsLlamaCpp) {
    const nlohmann::json& c = fixture_case("raw_counting");
    const nlohmann::json want = c.at("generated_ids");
    ASSERT_GE(want.size(), 16u);
    for (const char* devices : {"--devices cpu:3 --split layer", "--devices cpu:2 --split tensor"}) {
        SCOPED_TRACE(devices);
        const test::CliRun run =
            test::run_cli("generate " + smollm2_on_two_threads() + " --raw --json --temp 0 -n 16 " + devices + " -p " +
                          test::quoted(c.at("text").get<std::string>()));
        ASSERT_EQ(run.status, 0) << run.err;
        const nlohmann::json out = nlohmann::json::parse(run.out);
        EXPECT_EQ(out.at("generated_ids"),
                  nlohmann::json(std::vector<nlohmann::json>(want.begin(), want.begin() + 16)));
    }
    const test::CliRun bad =
        test::run_cli("generate " + smollm2_on_two_threads() + " --raw -n 4 --devices gpu:7 -p hi");
    EXPECT_EQ(bad.status, 1);
    EXPECT_NE(bad.err.find("cpu:N"), std::string::npos) << bad.err;
}

TEST(CliGenerate, SameSeedSameTextAndStopStrings) {
    const std::string args =
        "generate " + smollm2_on_two_threads() + " --raw --json -n 24 --temp 1.0 --seed 42 -p 'Once upon a time'";
    const test::CliRun a = test::run_cli(args);
    const test::CliRun b = test::run_cli(args);
    ASSERT_EQ(a.status, 0) << a.err;
    // All but the stats, whose timings differ from run to run.
    nlohmann::json first = nlohmann::json::parse(a.out), second = nlohmann::json::parse(b.out);
    first.erase("stats");
    second.erase("stats");
    EXPECT_EQ(first, second);
    const test::CliRun other = test::run_cli("generate " + smollm2_on_two_threads() +
                                             " --raw --json -n 24 --temp 1.0 --seed 43 -p 'Once upon a time'");
    EXPECT_NE(nlohmann::json::parse(other.out).at("generated_ids"), nlohmann::json::parse(a.out).at("generated_ids"));

    // Greedy "1, 2, 3, 4," continues " 5, 6, ...": stop at "7" and show nothing of it.
    const test::CliRun stopped = test::run_cli("generate " + smollm2_on_two_threads() +
                                               " --raw --json --temp 0 -n 64 --stop 7 -p '1, 2, 3, 4,'");
    ASSERT_EQ(stopped.status, 0) << stopped.err;
    const nlohmann::json out = nlohmann::json::parse(stopped.out);
    EXPECT_EQ(out.at("stop_reason"), "stop");
    EXPECT_EQ(out.at("text"), " 5, 6, ");
}

TEST(CliGenerate, LogitBiasBansAndForcesTokens) {
    const std::string greedy = "generate " + smollm2_on_two_threads() + " --raw --json --temp 0 -n 1 -p '1, 2, 3, 4,'";
    const test::CliRun plain = test::run_cli(greedy);
    ASSERT_EQ(plain.status, 0) << plain.err;
    const int first = nlohmann::json::parse(plain.out).at("generated_ids").at(0).get<int>();
    const test::CliRun banned = test::run_cli(greedy + " --logit-bias " + std::to_string(first) + "-inf");
    ASSERT_EQ(banned.status, 0) << banned.err;
    EXPECT_NE(nlohmann::json::parse(banned.out).at("generated_ids").at(0).get<int>(), first);

    // 21285 is " banana" in SmolLM2's vocabulary: +100 makes it the whole answer, greedy or sampled.
    for (const char* sampling : {"--temp 0", "--temp 1 --seed 5"}) {
        const test::CliRun forced = test::run_cli("generate " + smollm2_on_two_threads() + " --raw --json -n 3 " +
                                                  sampling + " -p 'Once upon a time' --logit-bias 21285=100");
        ASSERT_EQ(forced.status, 0) << forced.err;
        EXPECT_EQ(nlohmann::json::parse(forced.out).at("text"), " banana banana banana") << sampling;
    }

    for (const char* bad : {"12", "x+1", "12+", "-3+1", "12+abc", "12=nan"}) {
        const test::CliRun refused =
            test::run_cli("generate " + smollm2_on_two_threads() + " -p hi -n 1 --logit-bias " + quoted(bad));
        EXPECT_NE(refused.status, 0) << bad;
        EXPECT_NE(refused.err.find("TOKEN_ID+BIAS"), std::string::npos) << bad << ": " << refused.err;
    }
    const test::CliRun remote = test::run_cli("generate --remote http://127.0.0.1:9 -p hi --logit-bias 5+1");
    EXPECT_EQ(remote.status, 1);
    EXPECT_NE(remote.err.find("--remote"), std::string::npos) << remote.err;
}

// An empty answer (SmolLM2's <|im_end|>, id 2, forced first) prints nothing on stdout, as
// generate --remote and chat do: no lone newline for a script to read as an answer.
TEST(CliGenerate, AnEmptyAnswerPrintsNoNewline) {
    const test::CliRun run =
        test::run_cli("generate " + smollm2_on_two_threads() + " --temp 0 -n 8 --logit-bias 2+inf -p hi");
    EXPECT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out, "");
}

TEST(CliGenerate, BadInputIsReported) {
    const test::CliRun missing = test::run_cli("generate -m /nonexistent.gguf -p hi");
    EXPECT_EQ(missing.status, 1);
    EXPECT_NE(missing.err.find("/nonexistent.gguf"), std::string::npos) << missing.err;
    const test::CliRun no_prompt = test::run_cli("generate " + smollm2_on_two_threads());
    EXPECT_EQ(no_prompt.status, 2);
    const test::CliRun bad_temp = test::run_cli("generate " + smollm2_on_two_threads() + " -p hi --temp -1");
    EXPECT_EQ(bad_temp.status, 1);
    EXPECT_NE(bad_temp.err.find("temperature"), std::string::npos) << bad_temp.err;
    const test::CliRun vocab_only = test::run_cli(
        "generate -p hi -m " + quoted(test::shared_testdata_dir() / "vocab" / "ggml-vocab-gpt-2.gguf"));
    EXPECT_EQ(vocab_only.status, 1);
    EXPECT_FALSE(vocab_only.err.empty());
}

TEST(CliChat, AnswersEachLineAndResets) {
    const test::CliRun run = test::run_cli("chat " + smollm2_on_two_threads() + " --temp 0 -n 24",
                                           std::string("What is 2+2?\nAnd 3+3?\n/reset\nName a colour.\n"));
    ASSERT_EQ(run.status, 0) << run.err;
    std::istringstream lines(run.out);
    std::string line;
    int answers = 0;
    while (std::getline(lines, line)) answers += line.empty() ? 0 : 1;
    EXPECT_GE(answers, 3) << run.out;
    EXPECT_NE(run.err.find("new conversation"), std::string::npos) << run.err;
}

// An empty answer (the end-of-generation token first, forced here with a logit bias) prints
// nothing on stdout, as chat --remote does: no lone newline for a script to read as an answer.
TEST(CliChat, AnEmptyAnswerPrintsNoNewline) {
    // SmolLM2's <|im_end|> (id 2) ends the answer before it begins.
    const test::CliRun run = test::run_cli("chat " + smollm2_on_two_threads() + " --temp 0 -n 8 --logit-bias 2+inf",
                                           std::string("hi\nand again\n"));
    EXPECT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out, "");
}

TEST(CliChat, DropsTheOldestTurnsWhenTheContextIsFull) {
    std::string input;
    for (int i = 0; i < 4; ++i) input += "Tell me a long story about a dragon, a knight and a castle by the sea.\n";
    const test::CliRun run = test::run_cli("chat -m " + quoted(test::test_model_path()) +
                                               " -t 2 --ctx 96 --temp 0 -n 16",
                                           input);
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_NE(run.err.find("outgrew the context"), std::string::npos) << run.err;
}

// A system prompt that leaves no room: the error said "the last message alone makes a
// prompt of N tokens ... shorten the message" about a one-word message.
TEST(CliChat, ASystemPromptTooLongIsNamed) {
    std::string system;
    for (int i = 0; i < 40; ++i) system += "Answer briefly. ";
    const test::CliRun run = test::run_cli(
        "chat -m " + quoted(test::test_model_path()) + " -t 1 --ctx 32 --temp 0 -n 4 --system '" + system + "'",
        std::string("Hi\n"));
    EXPECT_NE(run.err.find("the system prompt and the last message alone make a prompt of"), std::string::npos)
        << run.err;
    EXPECT_NE(run.err.find("shorten them"), std::string::npos) << run.err;
    // Its lines piped in, a chat with a failed turn ends with status 1: a script sees it.
    EXPECT_EQ(run.status, 1) << run.err;
}

}  // namespace
}  // namespace powerhouse
