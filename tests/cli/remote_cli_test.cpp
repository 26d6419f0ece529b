// powerhouse-cli's remote engine commands (models, generate and chat --remote) against the
// remote tests' fault-injecting server (tests/app/remote/openai_fault_server.py, 127.0.0.1
// only): what a user sees on the terminal when a server misbehaves.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "cli_runner.h"
#include "http_test_server.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using test::run_cli;

class CliRemote : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        server_ =
            new test::HttpTestServer(POWERHOUSE_REMOTE_TEST_DIR "/openai_fault_server.py",
                                     std::vector<std::string>{"--fixtures", (test::data_dir() / "remote").string()});
    }
    static void TearDownTestSuite() { delete server_; }
    void SetUp() override { ASSERT_TRUE(server_->running()) << "the fault server did not start"; }

    static std::string url(const std::string& scenario) { return server_->url("/" + scenario + "/v1"); }

    static test::HttpTestServer* server_;
};

test::HttpTestServer* CliRemote::server_ = nullptr;

TEST_F(CliRemote, ModelsListsTheServersModels) {
    const test::CliRun run = run_cli("models --remote " + url("ok"));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out, "test-model\nother-model\n");
}

// A base URL with a path of its own (Gemini's ".../v1beta/openai") is used as given, not
// sent to ".../v1beta/openai/v1".
TEST_F(CliRemote, ABaseUrlWithAPathIsUsedAsGiven) {
    const test::CliRun run = run_cli("models --remote " + server_->url("/ok/v1beta/openai"));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out, "test-model\nother-model\n");
}

// A port past 65535 is refused before anything is sent, saying what a port can be.
TEST_F(CliRemote, APortOutOfRangeIsRefused) {
    const test::CliRun run = run_cli("models --remote http://127.0.0.1:70000/v1");
    EXPECT_EQ(run.status, 1);
    EXPECT_TRUE(run.out.empty()) << run.out;
    EXPECT_NE(run.err.find("the port 70000 does not exist: a port is a number from 1 to 65535"), std::string::npos)
        << run.err;
}

// A 200 whose body is an error object: the user reads the server's message.
TEST_F(CliRemote, AnErrorObjectSentWith200IsShown) {
    const test::CliRun run = run_cli("generate -m test-model -p hi --remote " + url("errjson"));
    EXPECT_EQ(run.status, 1);
    EXPECT_TRUE(run.out.empty()) << run.out;
    EXPECT_NE(run.err.find("the server answered with an error instead of a completion (HTTP 200): The model is "
                           "overloaded, try again later"),
              std::string::npos)
        << run.err;
}

// An answer interrupted before any text arrived leaves stdout empty (no lone newline): a
// script reading the answer reads nothing, and the reason is on stderr.
TEST_F(CliRemote, AnAnswerInterruptedBeforeAnyTextPrintsNothing) {
    for (const std::string scenario : {"empty", "errevent-0"}) {
        const test::CliRun run = run_cli("generate -m test-model -p hi --remote " + url(scenario));
        EXPECT_EQ(run.status, 1) << scenario << ": " << run.err;
        EXPECT_EQ(run.out, "") << scenario;
        EXPECT_NE(run.err.find("(the answer above is incomplete)"), std::string::npos) << scenario << ": " << run.err;
    }
    // With text, the answer still ends its line.
    const test::CliRun cut = run_cli("generate -m test-model -p hi --remote " + url("cut-3"));
    EXPECT_EQ(cut.status, 1) << cut.err;
    EXPECT_EQ(cut.out, "Hello, wörld\n");
    const test::CliRun ok = run_cli("generate -m test-model -p hi --remote " + url("ok"));
    EXPECT_EQ(ok.status, 0) << ok.err;
    EXPECT_EQ(ok.out, "Hello, wörld! Ünïcode ✓ and more.\n");
}

// A chat turn that brought no text (an answer without text, a stream that failed before any
// text) prints nothing on stdout, as generate does: no lone newline for a script to read as an
// empty answer. A turn with text still ends its line.
TEST_F(CliRemote, AChatTurnWithoutTextPrintsNoNewline) {
    for (const std::string scenario : {"blank", "empty", "errevent-0"}) {
        const test::CliRun run = run_cli("chat -m test-model --remote " + url(scenario), std::string("hi\n"));
        EXPECT_EQ(run.out, "") << scenario << ": " << run.err;
    }
    const test::CliRun ok = run_cli("chat -m test-model --remote " + url("ok"), std::string("hi\nand again\n"));
    EXPECT_EQ(ok.status, 0) << ok.err;
    EXPECT_EQ(ok.out, "Hello, wörld! Ünïcode ✓ and more.\nHello, wörld! Ünïcode ✓ and more.\n");
    const test::CliRun cut = run_cli("chat -m test-model --remote " + url("cut-3"), std::string("hi\n"));
    EXPECT_EQ(cut.out, "Hello, wörld\n") << cut.err;
}

// A chat whose lines are piped in ends with exit status 1 when an answer broke, as generate
// --remote does, so that a script sees it: before any text (the message taken back) or after
// some (kept). An answer without text that did not fail (a tool call) is no failure.
TEST_F(CliRemote, APipedChatWhoseAnswerBrokeExitsWithStatus1) {
    for (const std::string scenario : {"errevent-0", "empty"}) {
        const test::CliRun run = run_cli("chat -m test-model --remote " + url(scenario), std::string("hi\n"));
        EXPECT_EQ(run.status, 1) << scenario << ": " << run.err;
        EXPECT_NE(run.err.find("interrupted before any text came: your message is taken back"), std::string::npos)
            << scenario << ": " << run.err;
    }
    const test::CliRun cut = run_cli("chat -m test-model --remote " + url("cut-3"), std::string("hi\n"));
    EXPECT_EQ(cut.status, 1) << cut.err;
    EXPECT_EQ(cut.out, "Hello, wörld\n");
    EXPECT_NE(cut.err.find("what arrived stays in the conversation"), std::string::npos) << cut.err;
    const test::CliRun tool = run_cli("chat -m test-model --remote " + url("toolcall"), std::string("hi\n"));
    EXPECT_EQ(tool.status, 0) << tool.err;
    const test::CliRun ok = run_cli("chat -m test-model --remote " + url("ok"), std::string("hi\n"));
    EXPECT_EQ(ok.status, 0) << ok.err;
}

// A reasoning model's thinking, sent apart from the text (either field), is shown before the
// answer between "<think>" and "</think>" lines, as a local reasoning model's think block
// reads; --json gives it as "reasoning". The chat keeps only the answer in the conversation.
TEST_F(CliRemote, ReasoningIsShownBeforeTheAnswer) {
    const std::string shown =
        "<think>\nThe user greets me; greet them back.\n</think>\n\nHello, wörld! Ünïcode ✓ and more.\n";
    for (const std::string field : {"reasoning_content", "reasoning"}) {
        for (const std::string kind : {"think-", "thinkjson-"}) {
            const test::CliRun run = run_cli("generate -m test-model -p hi --remote " + url(kind + field));
            EXPECT_EQ(run.status, 0) << kind << field << ": " << run.err;
            EXPECT_EQ(run.out, shown) << kind << field;
        }
        const test::CliRun json = run_cli("generate --json -m test-model -p hi --remote " + url("think-" + field));
        ASSERT_EQ(json.status, 0) << json.err;
        const nlohmann::json out = nlohmann::json::parse(json.out);
        EXPECT_EQ(out["text"], "Hello, wörld! Ünïcode ✓ and more.") << field;
        EXPECT_EQ(out["reasoning"], "The user greets me; greet them back.") << field;
    }
    const test::CliRun chat =
        run_cli("chat -m test-model --remote " + url("think-reasoning_content"), std::string("hi\nand again\n"));
    EXPECT_EQ(chat.status, 0) << chat.err;
    EXPECT_EQ(chat.out, shown + shown);
    const nlohmann::json sent = server_->get_json("/think-reasoning_content/last")["body"]["messages"];
    ASSERT_EQ(sent.size(), 3u) << sent.dump();
    EXPECT_EQ(sent[1], nlohmann::json({{"role", "assistant"}, {"content", "Hello, wörld! Ünïcode ✓ and more."}}));
    // Without reasoning, --json has no "reasoning".
    const test::CliRun plain = run_cli("generate --json -m test-model -p hi --remote " + url("ok"));
    ASSERT_EQ(plain.status, 0) << plain.err;
    EXPECT_FALSE(nlohmann::json::parse(plain.out).contains("reasoning")) << plain.out;
}

// --no-think and --reasoning-effort reach the server as the servers read them (the request's
// chat_template_kwargs and OpenAI's reasoning_effort), in generate and in every turn of a chat;
// without them, neither field is sent.
TEST_F(CliRemote, ThinkingSwitchesAreSentInTheRequest) {
    const auto sent = [] { return server_->get_json("/ok/last")["body"]; };
    const nlohmann::json kwargs = {{"enable_thinking", false}};
    const test::CliRun run =
        run_cli("generate -m test-model -p hi --no-think --reasoning-effort high --remote " + url("ok"));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(sent()["chat_template_kwargs"], kwargs);
    EXPECT_EQ(sent()["reasoning_effort"], "high");
    const test::CliRun chat =
        run_cli("chat -m test-model --no-think --remote " + url("ok"), std::string("hi\nagain\n"));
    ASSERT_EQ(chat.status, 0) << chat.err;
    EXPECT_EQ(sent()["messages"].size(), 3u) << sent().dump();  // the second turn
    EXPECT_EQ(sent()["chat_template_kwargs"], kwargs);
    EXPECT_FALSE(sent().contains("reasoning_effort")) << sent().dump();
    ASSERT_EQ(run_cli("generate -m test-model -p hi --remote " + url("ok")).status, 0);
    EXPECT_FALSE(sent().contains("chat_template_kwargs")) << sent().dump();
    EXPECT_FALSE(sent().contains("reasoning_effort")) << sent().dump();
    // A template is the local model's: refused with --remote.
    const test::CliRun templated =
        run_cli("generate -m test-model -p hi --chat-template x.jinja --remote " + url("ok"));
    EXPECT_EQ(templated.status, 2);
    EXPECT_NE(templated.err.find("--chat-template excludes --remote"), std::string::npos) << templated.err;
}

// An answer cut by the token limit while the model was still thinking shows the thinking and
// says that no answer came, instead of an empty answer without a word; the chat takes the
// turn back.
TEST_F(CliRemote, AnAnswerCutWhileReasoningSaysSo) {
    const std::string shown = "<think>\nThe user greets me; greet them back.\n</think>\n";
    for (const std::string field : {"reasoning_content", "reasoning"}) {
        const test::CliRun run = run_cli("generate -m test-model -p hi --remote " + url("thinkcut-" + field));
        EXPECT_EQ(run.status, 0) << field << ": " << run.err;
        EXPECT_EQ(run.out, shown) << field;
        EXPECT_NE(run.err.find("reached its token limit while the model was still reasoning: no answer came; allow "
                               "more tokens with -n"),
                  std::string::npos)
            << field << ": " << run.err;
        const test::CliRun chat =
            run_cli("chat -m test-model --remote " + url("thinkcut-" + field), std::string("hi\nagain\n"));
        EXPECT_EQ(chat.status, 0) << field << ": " << chat.err;
        EXPECT_EQ(chat.out, shown + shown) << field;
        EXPECT_NE(chat.err.find("still reasoning: no answer came, and your message is taken back"), std::string::npos)
            << field << ": " << chat.err;
        EXPECT_EQ(chat.err.find("(the answer reached its token limit)"), std::string::npos) << chat.err;
        // The first message got no answer: the second turn is sent without it.
        const nlohmann::json sent = server_->get_json("/thinkcut-" + field + "/last")["body"]["messages"];
        ASSERT_EQ(sent.size(), 1u) << sent.dump();
        EXPECT_EQ(sent[0]["content"], "again");
    }
}

// An error body that is partly binary reaches the terminal as text: "café" readable, the
// ANSI escape and the bytes that are not UTF-8 written as \xNN, the C1 control as \u009b.
TEST_F(CliRemote, ABinaryErrorBodyIsShownEscaped) {
    const test::CliRun run = run_cli("models --remote " + url("status-502"));
    EXPECT_EQ(run.status, 1);
    EXPECT_TRUE(run.out.empty()) << run.out;
    EXPECT_NE(run.err.find("HTTP 502 (Bad Gateway): café \\x1b[31mred \\x80\\xff\\xfe \\xc0\\xaf \\xed\\xa0\\x80 "
                           "\\u009b2J end \\xe2\\x9c"),
              std::string::npos)
        << run.err;
    for (const char c : run.err) {
        const auto byte = static_cast<unsigned char>(c);
        EXPECT_TRUE(c == '\n' || (byte >= 0x20 && byte != 0x7f)) << "a control byte reached the terminal: " << run.err;
    }
    // Every byte at or above 0x80 left is part of "café".
    std::string high;
    for (const char c : run.err) {
        if (static_cast<unsigned char>(c) >= 0x80) high += c;
    }
    EXPECT_EQ(high, "é") << run.err;
}

// A server's model ids reach the terminal with their control characters escaped (one id per
// line stays one line), and --json gives them as they are.
TEST_F(CliRemote, ModelIdsWithControlCharactersAreShownEscaped) {
    const test::CliRun run = run_cli("models --remote " + url("oddids"));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out, "test-model\nclear\\x1b[2Jscreen\ntwo\\nlines\ncafé\n");
    const test::CliRun json = run_cli("models --json --remote " + url("oddids"));
    ASSERT_EQ(json.status, 0) << json.err;
    EXPECT_EQ(nlohmann::json::parse(json.out)["models"],
              nlohmann::json({"test-model", "clear\x1b[2Jscreen", "two\nlines", "café"}));

    // Choosing among them, and naming one the server lacks: the list in the error is escaped too.
    test::CliRun choose = run_cli("generate -p hi --remote " + url("oddids"));
    EXPECT_EQ(choose.status, 1);
    EXPECT_NE(choose.err.find("several models: test-model, clear\\x1b[2Jscreen, two\\nlines, café;"), std::string::npos)
        << choose.err;
    EXPECT_EQ(choose.err.find('\x1b'), std::string::npos) << choose.err;
}

// --tools offers the file's tools (and --tool-choice a forced one) to the server; the calls
// the answer makes are printed after its text, one <tool_call> block each (the arguments as
// JSON, the id last), and generate --json gives them in OpenAI's form.
TEST_F(CliRemote, ToolCallsArePrintedAfterTheAnswer) {
    test::TempDir dir;
    const nlohmann::json tools = nlohmann::json::parse(
        R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}])");
    test::write_file(dir / "tools.json", tools.dump());
    const std::string offer = " --tools " + test::quoted(dir / "tools.json");
    const std::string calls =
        "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Zürich "
        "✓\"},\"id\":\"call_a\"}\n</tool_call>\n"
        "<tool_call>\n{\"name\":\"get_time\",\"arguments\":{\"zone\":\"Europe/Paris\"},\"id\":\"call_b\"}\n</"
        "tool_call>\n";

    const test::CliRun run =
        run_cli("generate -m test-model -p hi --tool-choice get_time" + offer + " --remote " + url("tools"));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out, "Let me check.\n" + calls);
    const nlohmann::json sent = server_->get_json("/tools/last")["body"];
    EXPECT_EQ(sent["tools"], tools);
    EXPECT_EQ(sent["tool_choice"], nlohmann::json::parse(R"({"type": "function", "function": {"name": "get_time"}})"));

    const test::CliRun json = run_cli("generate --json -m test-model -p hi" + offer + " --remote " + url("tools"));
    ASSERT_EQ(json.status, 0) << json.err;
    const nlohmann::json out = nlohmann::json::parse(json.out);
    EXPECT_EQ(out["stop_reason"], "tool_calls");
    EXPECT_EQ(out["tool_calls"][0], nlohmann::json::parse(R"({"id": "call_a", "type": "function", "function":
        {"name": "get_weather", "arguments": "{\"city\": \"Zürich ✓\"}"}})"));
    EXPECT_EQ(out["tool_calls"][1]["function"]["name"], "get_time");
    EXPECT_FALSE(server_->get_json("/tools/last")["body"].contains("tool_choice"));

    // A chat shows them too. Calls it cannot answer take the turn back (with a word on
    // stderr); no failure.
    const test::CliRun chat =
        run_cli("chat -m test-model" + offer + " --remote " + url("tooljson"), std::string("hi\n"));
    ASSERT_EQ(chat.status, 0) << chat.err;
    EXPECT_EQ(chat.out, calls);
    EXPECT_NE(chat.err.find("only called tools, which this chat cannot answer: your message is taken back"),
              std::string::npos)
        << chat.err;
}

// A call the server garbled is an incomplete answer, said on stderr, with exit status 1; the
// tool options are refused where they mean nothing, and a forced tool must be one offered.
TEST_F(CliRemote, ToolOptionsAndGarbledCallsAreReported) {
    test::TempDir dir;
    test::write_file(dir / "tools.json", R"([{"type": "function", "function": {"name": "get_weather"}}])");
    const std::string offer = " --tools " + test::quoted(dir / "tools.json");
    const test::CliRun bad = run_cli("generate -m test-model -p hi" + offer + " --remote " + url("toolbad-noname"));
    EXPECT_EQ(bad.status, 1);
    EXPECT_EQ(bad.out, "");
    EXPECT_NE(bad.err.find("the tool call at index 1 (id 'call_n') ended without a function name"), std::string::npos)
        << bad.err;
    EXPECT_NE(bad.err.find("(the answer above is incomplete)"), std::string::npos) << bad.err;

    const test::CliRun unknown =
        run_cli("generate -m test-model -p hi --tool-choice get_time" + offer + " --remote " + url("ok"));
    EXPECT_EQ(unknown.status, 1);
    EXPECT_NE(unknown.err.find("--tool-choice get_time: no tool of --tools has that name; give auto, none, required "
                               "or one of: get_weather"),
              std::string::npos)
        << unknown.err;
    test::write_file(dir / "object.json", R"({"type": "function"})");
    const test::CliRun object =
        run_cli("generate -m test-model -p hi --tools " + test::quoted(dir / "object.json") + " --remote " + url("ok"));
    EXPECT_EQ(object.status, 1);
    EXPECT_NE(object.err.find("the file should hold an array of OpenAI tool objects"), std::string::npos) << object.err;
    const test::CliRun raw = run_cli("generate --raw -p hi" + offer);
    EXPECT_EQ(raw.status, 2);
    EXPECT_NE(raw.err.find("--raw excludes --tools"), std::string::npos) << raw.err;
    EXPECT_NE(run_cli("models --remote " + url("ok") + offer).status, 0);
}

}  // namespace
}  // namespace powerhouse
