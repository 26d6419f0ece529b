// What a user changes about the chat template: --chat-template FILE (chat, generate) instead of
// the model's own, and the switches it may read, --no-think (enable_thinking) and
// --reasoning-effort; what `info` says of them; and the chat's word on an answer cut by -n.
// The test model (SmolLM2) reads no switch; a copy of it with Qwen3.5's template (the think
// block opened unless enable_thinking is false) stands in for a model that has one.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli_runner.h"
#include "cli/model_copies.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using test::on_two_threads;
using test::quoted;
using test::run_cli;

const char kNoSwitch[] =
    "note: this model's chat template has no switch for thinking (enable_thinking): --no-think changes nothing";
const char kNoEffort[] =
    "note: this model's chat template reads no reasoning effort (reasoning_effort): --reasoning-effort changes "
    "nothing";
const char kTokenLimit[] = "(the answer reached its token limit)\n";

// ChatML whose generation prompt says the effort asked for, so that it shows in the prompt's
// tokens.
const char kEffortTemplate[] =
    "{%- for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\nEffort: ' + (reasoning_effort | "
    "default('medium')) + '\\n' }}{%- endif %}";

std::filesystem::path qwen35_template() {
    return test::data_dir() / "templates" / "Qwen3.5-4B.jinja";
}

void write(const std::filesystem::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
}

nlohmann::json json_of(const test::CliRun& run) {
    EXPECT_EQ(run.status, 0) << run.err;
    const nlohmann::json out = nlohmann::json::parse(run.out, nullptr, false);
    EXPECT_FALSE(out.is_discarded()) << run.out;
    return out;
}

class CliThinking : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        if (!std::filesystem::exists(test::test_model_path())) return;
        dir_ = new test::TempDir;
        switch_ = test::test_model_with_template(*dir_, test::read_file(qwen35_template()), "switch.gguf");
        effort_ = test::test_model_with_template(*dir_, kEffortTemplate, "effort.gguf");
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    void SetUp() override {
        if (!std::filesystem::exists(test::test_model_path()))
            GTEST_SKIP() << "no test model (scripts/fetch-test-model)";
        ASSERT_FALSE(switch_.empty());
        ASSERT_FALSE(effort_.empty());
    }

    static test::TempDir* dir_;
    static std::filesystem::path switch_;  // Qwen3.5's template: thinks unless enable_thinking is false
    static std::filesystem::path effort_;  // reads reasoning_effort
};

test::TempDir* CliThinking::dir_ = nullptr;
std::filesystem::path CliThinking::switch_;
std::filesystem::path CliThinking::effort_;

// --chat-template: the test model given Qwen3.5's template by file makes the prompt the copy
// with that template inside makes, and thinks as that copy does; a note says whose template it
// is. --no-think works on the template given too.
TEST_F(CliThinking, AChatTemplateFileReplacesTheModelsOwn) {
    const std::string prompt = " -n 6 --json -p 'What is 2+2?'";
    const test::CliRun given = run_cli("generate " + on_two_threads(test::test_model_path()) + " --chat-template " +
                                       quoted(qwen35_template()) + prompt);
    const test::CliRun inside = run_cli("generate " + on_two_threads(switch_) + prompt);
    const nlohmann::json a = json_of(given), b = json_of(inside);
    EXPECT_EQ(a.at("prompt_ids"), b.at("prompt_ids"));
    EXPECT_EQ(a.at("generated_ids"), b.at("generated_ids"));
    EXPECT_EQ(a.at("text"), "");
    EXPECT_FALSE(a.value("reasoning", "").empty()) << given.out;
    EXPECT_NE(given.err.find("note: using the chat template given instead of the model's own"), std::string::npos)
        << given.err;
    const test::CliRun own = run_cli("generate " + on_two_threads(test::test_model_path()) + prompt);
    EXPECT_NE(json_of(own).at("prompt_ids"), a.at("prompt_ids"));

    const test::CliRun no_think = run_cli("generate " + on_two_threads(test::test_model_path()) + " --chat-template " +
                                          quoted(qwen35_template()) + " --no-think" + prompt);
    EXPECT_FALSE(json_of(no_think).contains("reasoning")) << no_think.out;
    EXPECT_EQ(no_think.err.find("no switch for thinking"), std::string::npos) << no_think.err;

    // chat: the first turn thinks, as generate.
    const test::CliRun chat = run_cli(
        "chat " + on_two_threads(test::test_model_path()) + " -n 4 --chat-template " + quoted(qwen35_template()),
        std::string("What is 2+2?\n"));
    EXPECT_EQ(chat.status, 0) << chat.err;
    EXPECT_EQ(chat.out.rfind("<think>\n", 0), 0u) << chat.out;
}

// A file that is missing, a folder, empty, does not parse, or cannot render a message fails
// before the weights load, naming the file and what is wrong, with exit status 1.
TEST_F(CliThinking, AChatTemplateThatCannotBeUsedIsNamed) {
    const std::filesystem::path empty = *dir_ / "empty.jinja", broken = *dir_ / "broken.jinja",
                                raising = *dir_ / "raising.jinja", missing = *dir_ / "missing.jinja";
    write(empty, "  \n");
    write(broken, "{% if messages %}no end");
    write(raising, "{{ raise_exception('This template refuses every conversation.') }}");
    const std::vector<std::pair<std::filesystem::path, std::string>> cases = {
        {missing, "error: --chat-template: cannot open '" + missing.string() + "': No such file or directory"},
        {dir_->path(), "error: --chat-template: '" + dir_->path().string() + "' is a folder: name a file"},
        {empty,
         "error: --chat-template '" + empty.string() + "' is empty: name a file that holds a Jinja chat template"},
        {broken, "error: --chat-template " + broken.string() + ": the chat template given cannot be used: 1:"},
        {raising, "error: --chat-template " + raising.string() +
                      ": the chat template given cannot be used: 1:4: This template refuses every conversation."},
    };
    for (const auto& [file, message] : cases) {
        SCOPED_TRACE(file.string());
        for (const std::string command : {"generate -p hi", "chat"}) {
            const test::CliRun run =
                run_cli(command + " " + on_two_threads(test::test_model_path()) + " --chat-template " + quoted(file),
                        std::string("hi\n"));
            EXPECT_EQ(run.status, 1) << command << ": " << run.err;
            EXPECT_EQ(run.out, "") << command;
            EXPECT_EQ(run.err.rfind(message, 0), 0u) << command << ": " << run.err;
        }
    }
    // "-" would take the template from standard input, which holds the conversation.
    for (const std::string command : {"generate --prompt-file -", "chat"}) {
        const test::CliRun run = run_cli(command + " " + on_two_threads(test::test_model_path()) + " --chat-template -",
                                         std::string("hi\n"));
        EXPECT_EQ(run.status, 1) << command << ": " << run.err;
        EXPECT_EQ(run.err.rfind("error: --chat-template - would read the template from standard input", 0), 0u)
            << command << ": " << run.err;
    }
}

// --no-think on a template that has the switch: the prompt closes the think block, so what the
// model writes is its answer, not reasoning; nothing noted. Without it the copy thinks.
TEST_F(CliThinking, NoThinkMakesAModelWithTheSwitchAnswerWithoutThinking) {
    const std::string args = "generate " + on_two_threads(switch_) + " -n 8 --json -p 'What is 2+2?'";
    const nlohmann::json thinking = json_of(run_cli(args));
    EXPECT_EQ(thinking.at("text"), "");
    EXPECT_FALSE(thinking.value("reasoning", "").empty());
    const test::CliRun run = run_cli(args + " --no-think");
    const nlohmann::json answer = json_of(run);
    EXPECT_FALSE(answer.contains("reasoning")) << run.out;
    EXPECT_FALSE(answer.at("text").get<std::string>().empty()) << run.out;
    EXPECT_EQ(run.err, "");

    // chat: every turn without thinking, no think block shown.
    const test::CliRun chat =
        run_cli("chat " + on_two_threads(switch_) + " -n 8 --no-think", std::string("What is 2+2?\nAnd 3+3?\n"));
    EXPECT_EQ(chat.status, 0) << chat.err;
    EXPECT_FALSE(chat.out.empty());
    EXPECT_EQ(chat.out.find("<think>"), std::string::npos) << chat.out;
    EXPECT_EQ(chat.err.find("no switch for thinking"), std::string::npos) << chat.err;
}

// SmolLM2's template has neither switch: the options are not silently dropped, a note says the
// model answers as it always does, and it does.
TEST_F(CliThinking, ASwitchTheTemplateDoesNotReadIsNoted) {
    const std::string args = "generate " + on_two_threads(test::test_model_path()) + " -n 8 --json -p hi";
    const nlohmann::json plain = json_of(run_cli(args));
    const test::CliRun run = run_cli(args + " --no-think --reasoning-effort high");
    const nlohmann::json noted = json_of(run);
    EXPECT_EQ(noted.at("prompt_ids"), plain.at("prompt_ids"));
    EXPECT_EQ(noted.at("generated_ids"), plain.at("generated_ids"));
    EXPECT_NE(run.err.find(kNoSwitch), std::string::npos) << run.err;
    EXPECT_NE(run.err.find(kNoEffort), std::string::npos) << run.err;
    // chat says it once, before the first turn.
    const test::CliRun chat =
        run_cli("chat " + on_two_threads(test::test_model_path()) + " -n 4 --no-think", std::string("hi\nhi again\n"));
    EXPECT_EQ(chat.status, 0) << chat.err;
    EXPECT_EQ(chat.err.rfind(kNoSwitch, 0), 0u) << chat.err;
    EXPECT_EQ(chat.err.find(kNoSwitch, 1), std::string::npos) << chat.err;
    EXPECT_EQ(chat.err.find(kNoEffort), std::string::npos) << chat.err;
}

// --reasoning-effort is the template's reasoning_effort: the prompt says the effort asked for.
// A value that is no effort is refused as bad usage; so are the switches with --raw, which
// uses no template.
TEST_F(CliThinking, ReasoningEffortReachesTheTemplate) {
    const std::string args = "generate " + on_two_threads(effort_) + " -n 1 --json -p hi";
    const nlohmann::json medium = json_of(run_cli(args));
    const test::CliRun run = run_cli(args + " --reasoning-effort high");
    const nlohmann::json high = json_of(run);
    EXPECT_EQ(run.err, "");
    const nlohmann::json written =
        json_of(run_cli("generate " + on_two_threads(effort_) + " -n 1 --json --raw -p " +
                        quoted("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nEffort: high\n")));
    EXPECT_EQ(high.at("prompt_ids"), written.at("prompt_ids"));
    EXPECT_NE(high.at("prompt_ids"), medium.at("prompt_ids"));

    const test::CliRun bad = run_cli("generate " + on_two_threads(effort_) + " -p hi --reasoning-effort extreme");
    EXPECT_EQ(bad.status, 2);
    EXPECT_NE(bad.err.find("--reasoning-effort: extreme not in {low,medium,high}"), std::string::npos) << bad.err;
    for (const std::string option : {"--no-think", "--reasoning-effort low", "--chat-template x.jinja"}) {
        const test::CliRun raw = run_cli("generate " + on_two_threads(effort_) + " --raw -p hi " + option);
        EXPECT_EQ(raw.status, 2) << option;
        EXPECT_NE(raw.err.find("excludes --raw"), std::string::npos) << option << ": " << raw.err;
    }
}

// info reads what the template would do from the file's header: its tool-call format and the
// switches it reads, in text and in --json.
TEST_F(CliThinking, InfoSaysWhichSwitchesTheTemplateReads) {
    struct Case {
        std::filesystem::path model;
        const char* tool_format;
        bool thinking, effort;
    };
    for (const Case& c : {Case{test::test_model_path(), "generic", false, false},
                          Case{switch_, "qwen3_coder", true, false}, Case{effort_, "generic", false, true}}) {
        SCOPED_TRACE(c.model.string());
        const test::CliRun text = run_cli("info " + quoted(c.model));
        ASSERT_EQ(text.status, 0) << text.err;
        EXPECT_NE(text.out.find(std::string("\ntool calls         ") + c.tool_format + "\n"), std::string::npos)
            << text.out;
        EXPECT_NE(text.out.find(c.thinking ? "\nthinking switch    yes (enable_thinking: --no-think turns thinking "
                                             "off)\n"
                                           : "\nthinking switch    no\n"),
                  std::string::npos)
            << text.out;
        EXPECT_NE(text.out.find(c.effort ? "\nreasoning effort   yes" : "\nreasoning effort   no\n"), std::string::npos)
            << text.out;
        const nlohmann::json json = json_of(run_cli("info --json " + quoted(c.model)));
        EXPECT_EQ(json.at("tool_call_format"), c.tool_format);
        EXPECT_EQ(json.at("has_thinking_switch"), c.thinking);
        EXPECT_EQ(json.at("has_reasoning_effort"), c.effort);
        EXPECT_EQ(json.at("chat_template_note"), "");
    }
}

// A chat answer cut by -n says so, as chat --remote does; one that ended on its own says
// nothing; one cut while the model still thought says that instead.
TEST_F(CliThinking, ChatSaysWhenAnAnswerReachedItsTokenLimit) {
    const test::CliRun cut =
        run_cli("chat " + on_two_threads(test::test_model_path()) + " -n 3", std::string("Tell me a long story.\n"));
    EXPECT_EQ(cut.status, 0) << cut.err;
    EXPECT_FALSE(cut.out.empty());
    EXPECT_EQ(cut.err, kTokenLimit);
    const test::CliRun whole =
        run_cli("chat " + on_two_threads(test::test_model_path()) + " -n 200", std::string("hi\n"));
    EXPECT_EQ(whole.status, 0) << whole.err;
    EXPECT_EQ(whole.err, "");
    const test::CliRun thinking = run_cli("chat " + on_two_threads(switch_) + " -n 3", std::string("hi\n"));
    EXPECT_EQ(thinking.status, 0) << thinking.err;
    EXPECT_EQ(thinking.err.find(kTokenLimit), std::string::npos) << thinking.err;
    EXPECT_NE(thinking.err.find("while the model was still reasoning"), std::string::npos) << thinking.err;
}

}  // namespace
}  // namespace powerhouse
