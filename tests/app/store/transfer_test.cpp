// Conversations out of the store and back in (app/core/store/transfer.h): JSON that survives
// export, import and export again; Markdown against a hand-written document; OpenAI-style
// chats; every refusal with its message, and the store untouched by a refused import.
#include "store/transfer.h"

#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "store/store.h"
#include "store_test_support.h"
#include "support/test_support.h"

namespace powerhouse::store {
namespace {

using test_support::ok;
using test_support::open_store;

constexpr int64_t kMay1 = 1714572000000;  // 2024-05-01 14:00:00 UTC



Message message(const std::string& role, const std::string& content, int64_t at,
                MessageState state = MessageState::complete) {
    Message m;
    m.role = role;
    m.content = content;
    m.state = state;
    m.created_ms = at;
    m.updated_ms = at + 500;
    return m;
}

MessageStats stats(int64_t generated, double tokens_per_second) {
    MessageStats s;
    s.model = "SmolLM2-135M-Instruct";
    s.engine = "local";
    s.prompt_tokens = 31;
    s.reused_tokens = 12;
    s.generated_tokens = generated;
    s.ttft_ms = 18.5;
    s.tokens_per_second = tokens_per_second;
    return s;
}

// Everything the store keeps about a conversation, with text that tends to break exports.
std::vector<ConversationRecord> rich_conversations() {
    ConversationRecord first;
    first.conversation.title = "Ünïcödé 🚀 日本語 \"quotes\" and\\backslash";
    first.conversation.system_prompt = "Answer briefly.\nUse ``` fences for code.";
    first.conversation.settings_json = R"({"temperature":0.3,"top_k":7,"seed":1234,"max_tokens":256})";
    first.conversation.created_ms = kMay1;
    first.conversation.updated_ms = kMay1 + 60000;
    first.messages.push_back(message("system", "You are terse.", kMay1));
    first.messages.push_back(message("user", "Write hello world in C++ ✓", kMay1 + 1000));
    Message answer = message(
        "assistant", "Here:\n\n```cpp\n#include <cstdio>\nint main() { std::puts(\"hi\"); }\n```\n", kMay1 + 2000);
    answer.stats = stats(42, 31.5);
    answer.stats.energy_joules = 3.25;
    answer.stats.recoveries = {{37, "GPU 1", "Xid 79, fell off the bus", "CPU (8 threads)"}};
    answer.reasoning = "They want C++ \"hello world\"; keep it short ✓\n";
    first.messages.push_back(answer);
    first.messages.push_back(message("user", "tabs\tand\nnewlines\r\nand a NUL-free \u00e9", kMay1 + 3000));
    Message stopped = message("assistant", "Partial ```py\nprint(", kMay1 + 4000, MessageState::stopped);
    stopped.stats = stats(3, 0);
    stopped.stats.engine = "http://gpu-box:8000/v1";
    stopped.stats.throttle = "GPU 0 throttled (thermal (software)) for 12% of the answer";
    stopped.stats.drafted_tokens = 20;  // speculative decoding: 12 of 20 guesses kept
    stopped.stats.accepted_tokens = 12;
    first.messages.push_back(stopped);
    Message failed = message("assistant", "", kMay1 + 5000, MessageState::failed);
    failed.error = "out of memory on cuda:0 <needs 2 GiB>";
    first.messages.push_back(failed);
    first.messages.push_back(message("assistant", "cut off", kMay1 + 6000, MessageState::interrupted));

    ConversationRecord second;
    second.conversation.title = "Empty settings";
    second.conversation.settings_json = "{}";
    second.conversation.created_ms = kMay1 + 100000;
    second.conversation.updated_ms = kMay1 + 100000;
    second.messages.push_back(message("user", "Hi", kMay1 + 100000));
    return {first, second};
}

TEST(Transfer, ExportImportExportGivesTheSameJson) {
    test::TempDir dir;
    Store a = open_store(dir / "a.db");
    const std::vector<int64_t> made = ok(a.insert_conversations(rich_conversations()));
    ASSERT_EQ(made.size(), 2u);
    const std::string first = ok(export_json(a, {}, {.now_ms = kMay1 + 1}));

    Store b = open_store(dir / "b.db");
    ASSERT_TRUE(b.create_conversation("Already here"));  // never overwritten
    const ImportReport report = ok(import_json(b, first));
    EXPECT_EQ(report.conversations, 2);
    EXPECT_EQ(report.messages, 8);
    ASSERT_EQ(report.ids.size(), 2u);
    EXPECT_EQ(ok(b.conversations()).size(), 3u);
    // Byte for byte, with the same export time, though the ids differ.
    EXPECT_EQ(ok(export_json(b, report.ids, {.now_ms = kMay1 + 1})), first);
    EXPECT_NE(report.ids, made);

    // What the store holds after the import is what it held before the export.
    const Conversation c = ok(b.conversation(report.ids[0]));
    EXPECT_EQ(c.title, rich_conversations()[0].conversation.title);
    EXPECT_EQ(c.system_prompt, rich_conversations()[0].conversation.system_prompt);
    EXPECT_EQ(c.created_ms, kMay1);
    EXPECT_EQ(c.updated_ms, kMay1 + 60000);
    const std::vector<Message> messages = ok(b.messages(report.ids[0]));
    ASSERT_EQ(messages.size(), 7u);
    EXPECT_EQ(messages[2].stats.energy_joules, 3.25);
    EXPECT_EQ(messages[2].stats.reused_tokens, 12);
    EXPECT_EQ(messages[2].stats.recoveries, rich_conversations()[0].messages[2].stats.recoveries);
    EXPECT_EQ(messages[2].reasoning, rich_conversations()[0].messages[2].reasoning);
    EXPECT_EQ(messages[4].reasoning, "");
    EXPECT_EQ(messages[4].state, MessageState::stopped);
    EXPECT_EQ(messages[4].stats.engine, "http://gpu-box:8000/v1");
    EXPECT_EQ(messages[4].stats.throttle, "GPU 0 throttled (thermal (software)) for 12% of the answer");
    EXPECT_TRUE(messages[2].stats.throttle.empty());
    EXPECT_EQ(messages[4].stats.drafted_tokens, 20);
    EXPECT_EQ(messages[4].stats.accepted_tokens, 12);
    EXPECT_EQ(messages[2].stats.drafted_tokens, 0);
    EXPECT_EQ(messages[5].state, MessageState::failed);
    EXPECT_EQ(messages[5].error, "out of memory on cuda:0 <needs 2 GiB>");
    EXPECT_EQ(messages[6].state, MessageState::interrupted);
    EXPECT_EQ(messages[1].updated_ms, kMay1 + 1500);

    // Into the same store: new conversations beside the old ones, equal to them.
    const ImportReport again = ok(import_json(a, first));
    EXPECT_EQ(ok(a.conversations()).size(), 4u);
    EXPECT_EQ(ok(export_json(a, again.ids, {.now_ms = kMay1 + 1})), first);
    // Search finds the imported text (the full-text index follows the inserts).
    EXPECT_EQ(ok(a.search("terse")).size(), 2u);
}

TEST(Transfer, JsonFollowsTheDocumentedShape) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    ASSERT_TRUE(s.insert_conversations(rich_conversations()));
    const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(ok(export_json(s, {}, {.now_ms = 77})));
    EXPECT_EQ(doc["format"], "powerhouse.conversations");
    EXPECT_EQ(doc["version"], 1);
    EXPECT_EQ(doc["exported_ms"], 77);
    ASSERT_EQ(doc["conversations"].size(), 2u);
    const auto& c = doc["conversations"][0];  // oldest first
    EXPECT_FALSE(c.contains("id"));
    std::vector<std::string> keys;
    for (const auto& [key, value] : c.items()) keys.push_back(key);
    EXPECT_EQ(keys,
              (std::vector<std::string>{"title", "system_prompt", "settings", "created_ms", "updated_ms", "messages"}));
    EXPECT_EQ(c["settings"]["top_k"], 7);
    EXPECT_EQ(c["messages"][0].dump(),
              R"({"role":"system","content":"You are terse.","state":"complete","created_ms":1714572000000,)"
              R"("updated_ms":1714572000500})");
    EXPECT_EQ(c["messages"][2]["stats"].dump(),
              R"({"model":"SmolLM2-135M-Instruct","engine":"local","prompt_tokens":31,"reused_tokens":12,)"
              R"("generated_tokens":42,"ttft_ms":18.5,"tokens_per_second":31.5,"energy_joules":3.25,)"
              R"("recoveries":[{"at_token":37,"failed":"GPU 1","cause":"Xid 79, fell off the bus",)"
              R"json("continued_on":"CPU (8 threads)"}]})json");
    EXPECT_FALSE(c["messages"][4]["stats"].contains("recoveries")) << "only where a device failed";
    EXPECT_EQ(c["messages"][4]["stats"]["throttle"], "GPU 0 throttled (thermal (software)) for 12% of the answer");
    EXPECT_FALSE(c["messages"][2]["stats"].contains("throttle")) << "only where the GPUs were slowed";
    EXPECT_EQ(c["messages"][4]["stats"]["drafted_tokens"], 20);
    EXPECT_EQ(c["messages"][4]["stats"]["accepted_tokens"], 12);
    EXPECT_FALSE(c["messages"][2]["stats"].contains("drafted_tokens")) << "only where tokens were guessed";
    EXPECT_EQ(c["messages"][5]["error"], "out of memory on cuda:0 <needs 2 GiB>");
    // The reasoning comes after the content, only where there is some.
    std::vector<std::string> answer_keys;
    for (const auto& [key, value] : c["messages"][2].items()) answer_keys.push_back(key);
    EXPECT_EQ(answer_keys,
              (std::vector<std::string>{"role", "content", "reasoning", "state", "created_ms", "updated_ms", "stats"}));
    EXPECT_EQ(c["messages"][2]["reasoning"], "They want C++ \"hello world\"; keep it short ✓\n");
    EXPECT_FALSE(c["messages"][4].contains("reasoning"));
    // The Markdown is what was said: the answer, not its reasoning.
    const std::string markdown = ok(export_markdown(s, {}));
    EXPECT_NE(markdown.find("std::puts"), std::string::npos);
    EXPECT_EQ(markdown.find("keep it short"), std::string::npos);
    EXPECT_EQ(doc["conversations"][1]["title"], "Empty settings");
}

TEST(Transfer, ExportsChosenConversationsInTheOrderGiven) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    const std::vector<int64_t> ids = ok(s.insert_conversations(rich_conversations()));
    const auto doc = nlohmann::json::parse(ok(export_json(s, {ids[1], ids[0], ids[1]})));
    ASSERT_EQ(doc["conversations"].size(), 2u);
    EXPECT_EQ(doc["conversations"][0]["title"], "Empty settings");

    const Result<std::string> unknown = export_json(s, {ids[0], 999});
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().message, "no conversation 999");
    // Deleted conversations are not exported, by id or with all.
    ASSERT_TRUE(s.delete_conversation(ids[1]));
    EXPECT_FALSE(export_markdown(s, {ids[1]}));
    EXPECT_EQ(nlohmann::json::parse(ok(export_json(s, {})))["conversations"].size(), 1u);
}

TEST(Transfer, TextThatIsNotUtf8IsExportedWithReplacementCharacters) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    const Conversation c = ok(s.create_conversation("bad \xff bytes"));
    ASSERT_TRUE(s.add_message(c.id, "user", std::string("caf\xc3") + " ok"));
    const std::string text = ok(export_json(s, {}));
    EXPECT_NE(text.find("bad \xEF\xBF\xBD bytes"), std::string::npos) << text;
    EXPECT_NE(text.find("caf\xEF\xBF\xBD ok"), std::string::npos) << text;
    EXPECT_TRUE(import_json(s, text));
}

TEST(Transfer, MarkdownReadsAsTheConversation) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    ConversationRecord capitals;
    capitals.conversation.title = "Capitals";
    capitals.conversation.system_prompt = "Answer briefly.";
    capitals.conversation.created_ms = kMay1;
    capitals.conversation.updated_ms = kMay1;
    capitals.messages.push_back(message("user", "What is the capital of France?", kMay1));
    Message paris =
        message("assistant", "The capital of France is **Paris**.\n\n```python\nprint(\"Paris\")\n```\n", kMay1);
    paris.stats = stats(12, 41.27);
    paris.stats.drafted_tokens = 20;
    paris.stats.accepted_tokens = 12;
    paris.stats.recoveries = {{7, "GPU 1", "Xid 79, fell off the bus", "GPU 0 (RTX 4090)"},
                              {9, "GPU 0", "did not answer within 60 s", "CPU (8 threads)"}};
    capitals.messages.push_back(paris);
    capitals.messages.push_back(message("user", "And of Italy?", kMay1));
    Message rome = message("assistant", "Rome:\n\n```python\nprint(\"Ro", kMay1, MessageState::stopped);
    rome.stats = stats(5, 0);
    rome.stats.throttle = "GPU 0 throttled (power cap) for 40% of the answer, 18% slower";
    capitals.messages.push_back(rome);

    ConversationRecord fences;
    fences.conversation.title = "C_ode *fences* <3 # 1";
    fences.conversation.system_prompt = "Reply in\n```\nfences\n```";
    fences.conversation.created_ms = kMay1 + 86400000;
    fences.conversation.updated_ms = kMay1 + 86400000;
    fences.messages.push_back(message("user", "~~~\nnot closed", kMay1));
    Message failed = message("assistant", "", kMay1, MessageState::failed);
    failed.error = "out of memory on cuda:0 <needs 2 GiB>";
    fences.messages.push_back(failed);
    fences.messages.push_back(message("assistant", "half", kMay1, MessageState::interrupted));
    ASSERT_TRUE(s.insert_conversations({capitals, fences}));

    const std::string expected = R"md(# Capitals

*2024-05-01 14:00 UTC*

**System prompt**

```text
Answer briefly.
```

**You**

What is the capital of France?

**Assistant**

The capital of France is **Paris**.

```python
print("Paris")
```

*SmolLM2-135M-Instruct · 12 tokens · 41.3 tokens/s · 12 of 20 guesses kept*

*Continued on GPU 0 (RTX 4090) after GPU 1 failed at token 7: Xid 79, fell off the bus*

*Continued on CPU (8 threads) after GPU 0 failed at token 9: did not answer within 60 s*

**You**

And of Italy?

**Assistant**

Rome:

```python
print("Ro
```

*Stopped before the end.*

*SmolLM2-135M-Instruct · 5 tokens*

*GPU 0 throttled (power cap) for 40% of the answer, 18% slower*

---

# C\_ode \*fences\* \<3 \# 1

*2024-05-02 14:00 UTC*

**System prompt**

````text
Reply in
```
fences
```
````

**You**

~~~
not closed
~~~

**Assistant**

*Failed: out of memory on cuda:0 \<needs 2 GiB\>*

**Assistant**

half

*Interrupted: Powerhouse ended while this answer was being written.*
)md";
    EXPECT_EQ(ok(export_markdown(s, {}, {.utc = true})), expected);

    // Without statistics, and with nothing to export.
    const std::string plain = ok(export_markdown(s, {}, {.utc = true, .stats = false}));
    EXPECT_EQ(plain.find("tokens"), std::string::npos);
    EXPECT_EQ(plain.find("Continued on"), std::string::npos);
    Store empty = open_store(dir / "empty.db");
    EXPECT_EQ(ok(export_markdown(empty, {})), "");
}

TEST(Transfer, ImportsAnOpenAiStyleChat) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    const std::string bare = R"([{"role": "system", "content": "Be kind."},
        {"role": "user", "content": "\n  How do I boil an egg? Tell me everything you know about eggs, please, in detail.\nThanks"},
        {"role": "assistant", "content": "Put it in boiling water.", "name": "ignored"}])";
    const ImportReport report = ok(import_json(s, bare, {.now_ms = kMay1}));
    EXPECT_EQ(report.conversations, 1);
    EXPECT_EQ(report.messages, 3);
    const Conversation c = ok(s.conversation(report.ids[0]));
    // The app's own rule: the first line of the first user message, 60 characters at most.
    EXPECT_EQ(c.title, "How do I boil an egg? Tell me everything you know about eggs");
    EXPECT_EQ(c.created_ms, kMay1);
    EXPECT_EQ(c.settings_json, "{}");
    const std::vector<Message> messages = ok(s.messages(c.id));
    ASSERT_EQ(messages.size(), 3u);
    EXPECT_EQ(messages[2].content, "Put it in boiling water.");
    EXPECT_EQ(messages[2].state, MessageState::complete);
    EXPECT_EQ(messages[2].created_ms, kMay1);

    // A chat request's body: its "messages" (and the rest ignored); a title when it has one.
    const ImportReport request = ok(import_json(
        s, R"({"model": "gpt-4o", "messages": [{"role": "user", "content": "日本語のタイトル"}], "stream": true})"));
    EXPECT_EQ(ok(s.conversation(request.ids[0])).title, "日本語のタイトル");
    const ImportReport titled =
        ok(import_json(s, R"({"title": "Mine", "messages": [{"role": "assistant", "content": "hello"}]})"));
    EXPECT_EQ(ok(s.conversation(titled.ids[0])).title, "Mine");
    const ImportReport untitled = ok(import_json(s, R"([{"role": "assistant", "content": "hello"}])"));
    EXPECT_EQ(ok(s.conversation(untitled.ids[0])).title, "Imported conversation");
}

// A chat exported from a server that sends a reasoning model's thinking apart (DeepSeek's
// API, vLLM, SGLang, llama.cpp's server: "reasoning_content"; OpenRouter: "reasoning") keeps
// that thinking as the answers' reasoning, and a null one (sent on messages without any) is
// none; the text stays the content.
TEST(Transfer, ImportsTheReasoningOfAnOpenAiStyleChat) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    const std::string chat = R"([{"role": "user", "content": "2+2?", "reasoning_content": null},
        {"role": "assistant", "content": "4.", "reasoning_content": "Two and two make four."},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": "6.", "reasoning": "Three and three make six."},
        {"role": "user", "content": "Thanks"},
        {"role": "assistant", "content": "You're welcome.", "reasoning": null, "reasoning_content": null}])";
    const ImportReport report = ok(import_json(s, chat, {.now_ms = kMay1}));
    const std::vector<Message> messages = ok(s.messages(report.ids[0]));
    ASSERT_EQ(messages.size(), 6u);
    EXPECT_EQ(messages[0].reasoning, "");
    EXPECT_EQ(messages[1].content, "4.");
    EXPECT_EQ(messages[1].reasoning, "Two and two make four.");
    EXPECT_EQ(messages[3].content, "6.");
    EXPECT_EQ(messages[3].reasoning, "Three and three make six.");
    EXPECT_EQ(messages[5].reasoning, "");
    // Exported as ours, it reads back the same.
    const std::string exported = ok(export_json(s, {report.ids[0]}, {.now_ms = kMay1}));
    const ImportReport again = ok(import_json(s, exported, {.now_ms = kMay1}));
    EXPECT_EQ(ok(s.messages(again.ids[0]))[1].reasoning, "Two and two make four.");
    // A reasoning of another type is refused, naming it.
    const auto refused = import_json(s, R"([{"role": "assistant", "content": "x", "reasoning_content": 7}])");
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().message, "[0].reasoning_content: 7 is not a string");
}

// OpenAI's format writes an assistant's turn that only calls tools with "content": null and
// its "tool_calls": such a turn is kept, with empty content and its calls, and exported and
// imported again unchanged. A null content on a message that calls no tools is still
// refused, naming the message.
TEST(Transfer, ImportsAnAnswerThatOnlyCallsTools) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    const std::string chat = R"([{"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "assistant", "content": "Looking it up.", "tool_calls": [{"id": "call_2", "type": "function",
            "function": {"name": "get_time", "arguments": "{}"}}]},
        {"role": "assistant", "content": "It is sunny.", "tool_calls": null}])";
    const ImportReport report = ok(import_json(s, chat, {.now_ms = kMay1}));
    EXPECT_EQ(report.messages, 4);
    const std::vector<Message> messages = ok(s.messages(report.ids[0]));
    ASSERT_EQ(messages.size(), 4u);
    EXPECT_EQ(messages[1].role, "assistant");
    EXPECT_EQ(messages[1].content, "");
    EXPECT_EQ(messages[1].state, MessageState::complete);
    EXPECT_EQ(messages[1].tool_calls,
              R"([{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": )"
              R"(\"Paris\"}"}}])");
    EXPECT_EQ(messages[2].content, "Looking it up.");
    EXPECT_NE(messages[2].tool_calls.find("get_time"), std::string::npos);
    EXPECT_EQ(messages[3].tool_calls, "");

    // Exported as ours: the calls after the content, only where there are some; imported again,
    // the same bytes.
    const std::string exported = ok(export_json(s, {report.ids[0]}, {.now_ms = kMay1}));
    const auto doc = nlohmann::ordered_json::parse(exported);
    const auto& call = doc["conversations"][0]["messages"][1];
    EXPECT_EQ(call["content"], "");
    EXPECT_EQ(call["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_FALSE(doc["conversations"][0]["messages"][3].contains("tool_calls"));
    std::vector<std::string> keys;
    for (const auto& [key, value] : call.items()) keys.push_back(key);
    EXPECT_EQ(keys, (std::vector<std::string>{"role", "content", "tool_calls", "state", "created_ms", "updated_ms"}));
    const ImportReport again = ok(import_json(s, exported));
    EXPECT_EQ(ok(export_json(s, again.ids, {.now_ms = kMay1})), exported);

    // Refused, naming the message and what to do.
    const std::vector<std::pair<std::string, std::string>> refused = {
        {R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": null}])",
         "[1].content: null, and the message calls no tools: only an assistant's message with \"tool_calls\" may "
         "have no content; give its text as a string"},
        {R"([{"role": "assistant", "content": null, "tool_calls": []}])",
         "[0].content: null, and the message calls no tools: only an assistant's message with \"tool_calls\" may "
         "have no content; give its text as a string"},
        {R"([{"role": "user", "content": null, "tool_calls": [{"function": {"name": "f"}}]}])",
         "[0].tool_calls: a user message calls no tools; only an assistant's does"},
        {R"([{"role": "assistant", "content": null, "tool_calls": {"function": {"name": "f"}}}])",
         "[0].tool_calls: an object is not an array of tool calls"},
        {R"([{"role": "assistant", "content": null, "tool_calls": ["f"]}])",
         "[0].tool_calls[0]: \"f\" is not an object (a tool call)"},
        {R"([{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1"}]}])",
         "[0].tool_calls[0]: no \"function\""},
        {R"([{"role": "assistant", "content": null, "tool_calls": [{"function": {"arguments": "{}"}}]}])",
         "[0].tool_calls[0].function: no \"name\""},
        {R"([{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": 3}}]}])",
         "[0].tool_calls[0].function.name: 3 is not a string"},
    };
    for (const auto& [input, message] : refused) {
        const Result<ImportReport> r = import_json(s, input);
        ASSERT_FALSE(r) << input;
        EXPECT_EQ(r.error().message, message) << input;
    }
}

TEST(Transfer, AStreamingAnswerComesInInterrupted) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    const std::string text = R"({"format": "powerhouse.conversations", "version": 1, "conversations": [
        {"title": "t", "messages": [{"role": "user", "content": "q"},
                                    {"role": "assistant", "content": "half an ans", "state": "streaming"}]}]})";
    const ImportReport report = ok(import_json(s, text));
    EXPECT_EQ(ok(s.messages(report.ids[0]))[1].state, MessageState::interrupted);
    EXPECT_EQ(ok(s.messages(report.ids[0]))[1].reasoning, "") << "exports from before reasoning have none";
    // A file with a byte-order mark (some editors write one) reads the same.
    EXPECT_TRUE(import_json(s, "\xEF\xBB\xBF" + text));
}

// Every refusal: the message names the place and the problem, and nothing is stored.
TEST(Transfer, RefusesBadInputWithItsPlaceAndLeavesTheStoreAlone) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    ASSERT_TRUE(s.insert_conversations(rich_conversations()));
    const std::string before = ok(export_json(s, {}, {.now_ms = 1}));

    const auto doc = [](const std::string& conversations) {
        return R"({"format": "powerhouse.conversations", "version": 1, "conversations": )" + conversations + "}";
    };
    const std::string good = R"({"title": "ok", "messages": [{"role": "user", "content": "fine"}]})";
    const std::string robot =
        R"({"title": "r", "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
        {"role": "assistant", "content": "c"}, {"role": "user", "content": "d"}, {"role": "assistant", "content": "e"},
        {"role": "robot", "content": "f"}]})";
    const struct {
        std::string input;
        std::string message;
    } cases[] = {
        {"{\"format\": ",
         "not valid JSON: parse error at line 1, column 12: syntax error while parsing value - "
         "unexpected end of input; expected '[', '{', or a literal"},
        {"",
         "not valid JSON: parse error at line 1, column 1: syntax error while parsing value - unexpected end of "
         "input; expected '[', '{', or a literal"},
        // nlohmann's parser refuses ill-formed UTF-8 in strings; the bad byte is shown escaped.
        {doc("[{\"title\": \"caf\xff\", \"messages\": []}]"),
         "not valid JSON: parse error at line 1, column 86: syntax error while parsing value - invalid string: "
         "ill-formed UTF-8 byte; last read: '\"caf\\xFF'"},
        {R"({"format": "powerhouse.conversations", "version": 2, "conversations": []})",
         "version: this file is powerhouse.conversations version 2, from a newer Powerhouse; this one reads "
         "version 1: update Powerhouse to import it"},
        {R"({"format": "powerhouse.conversations", "version": "1", "conversations": []})",
         "version: \"1\" is not a version number (1 or more)"},
        {R"({"format": "powerhouse.conversations", "conversations": []})", "no \"version\""},
        {R"({"format": "something.else", "version": 1, "conversations": []})",
         "format: \"something.else\" is not \"powerhouse.conversations\""},
        {R"({"format": "powerhouse.conversations", "version": 1})", "no \"conversations\""},
        {doc("{}"), "conversations: an object is not an array"},
        {doc("[" + good + ", " + good + ", " + robot + "]"),
         "conversations[2].messages[5].role: \"robot\" is not one of system, user, assistant"},
        {doc(R"([{"messages": [{"role": "user"}]}])"), "conversations[0].messages[0]: no \"content\""},
        {doc(R"([{"messages": [{"content": "x"}]}])"), "conversations[0].messages[0]: no \"role\""},
        {doc(R"([{"messages": [{"role": "user", "content": 42}]}])"),
         "conversations[0].messages[0].content: 42 is not a string"},
        {doc(R"([{"messages": [{"role": "assistant", "content": "x", "reasoning": ["a"]}]}])"),
         "conversations[0].messages[0].reasoning: an array is not a string"},
        {doc(R"([{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}])"),
         "conversations[0].messages[0].content: an array is not a string"},
        {doc(R"([{"title": "x"}])"), "conversations[0]: no \"messages\""},
        {doc(R"([{"title": 7, "messages": []}])"), "conversations[0].title: 7 is not a string"},
        {doc(R"([{"settings": "hot", "messages": []}])"), "conversations[0].settings: \"hot\" is not an object"},
        {doc(R"([{"created_ms": 1.5, "messages": []}])"), "conversations[0].created_ms: 1.5 is not a whole number"},
        {doc(R"([{"messages": [{"role": "user", "content": "x", "state": "done"}]}])"),
         "conversations[0].messages[0].state: \"done\" is not one of complete, streaming, stopped, failed, "
         "interrupted"},
        {doc(R"([{"messages": [{"role": "assistant", "content": "x", "stats": {"generated_tokens": -3}}]}])"),
         "conversations[0].messages[0].stats.generated_tokens: -3 is negative"},
        {doc(R"([{"messages": [{"role": "assistant", "content": "x", "stats": {"drafted_tokens": -1}}]}])"),
         "conversations[0].messages[0].stats.drafted_tokens: -1 is negative"},
        {doc(R"([{"messages": [{"role": "assistant", "content": "x", "stats": {"drafted_tokens": 4, )"
             R"("accepted_tokens": 5}}]}])"),
         "conversations[0].messages[0].stats.accepted_tokens: 5 is more than the 4 drafted_tokens: only guessed "
         "tokens can be kept"},
        {doc(R"([{"messages": [{"role": "assistant", "content": "x", "stats": {"ttft_ms": "fast"}}]}])"),
         "conversations[0].messages[0].stats.ttft_ms: \"fast\" is not a number"},
        {doc(R"([{"messages": [{"role": "assistant", "content": "x", "stats": {"recoveries": {}}}]}])"),
         "conversations[0].messages[0].stats.recoveries: an object is not an array of recoveries"},
        {doc(R"([{"messages": [{"role": "assistant", "content": "x", "stats": {"recoveries": [{"at_token": -1}]}}]}])"),
         "conversations[0].messages[0].stats.recoveries[0].at_token: -1 is negative"},
        {doc(R"([{"messages": [{"role": "assistant", "content": "x", "stats": {"recoveries": ["GPU 1"]}}]}])"),
         "conversations[0].messages[0].stats.recoveries[0]: \"GPU 1\" is not an object (a recovery)"},
        {doc(R"([{"messages": [{"role": "assistant", "content": "x", "stats": []}]}])"),
         "conversations[0].messages[0].stats: an array is not an object (an answer's statistics)"},
        {doc(R"([{"messages": [{"role": "user", "content": "x", "created_ms": 18446744073709551615}]}])"),
         "conversations[0].messages[0].created_ms: 18446744073709551615 is too large"},
        {doc(R"([{"messages": ["hello"]}])"), "conversations[0].messages[0]: \"hello\" is not an object (a message)"},
        {doc(R"([3])"), "conversations[0]: 3 is not an object (a conversation)"},
        {R"([{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}])",
         "[1].role: \"tool\" is not one of system, user, assistant"},
        {R"({"messages": [{"role": "assistant", "content": null}]})",
         "messages[0].content: null, and the message calls no tools: only an assistant's message with "
         "\"tool_calls\" may have no content; give its text as a string"},
        {"[]", "the chat holds no messages"},
        {R"({"model": "x"})", "neither a Powerhouse export (no \"format\") nor a chat (no \"messages\")"},
        {"\"text\"", "the file holds \"text\", not a Powerhouse export or a list of chat messages"},
        {doc(R"([{"messages": [], "settings": )" + std::string(100, '[') + std::string(100, ']') + "}]"),
         "conversations[0].settings: an array is not an object"},
        {doc(R"([{"settings": {"a": )" + std::string(100, '[') + std::string(100, ']') + R"(}, "messages": []}])"),
         "conversations[0].settings: nested deeper than 64 levels"},
    };
    for (const auto& c : cases) {
        const Result<ImportReport> r = import_json(s, c.input);
        ASSERT_FALSE(r) << c.input;
        EXPECT_EQ(r.error().message, c.message) << c.input;
    }
    // Too big: refused before it is parsed (a small limit stands in for the 256 MiB).
    const std::string big = doc("[" + good + "]");
    const Result<ImportReport> too_big = import_json(s, big, {.max_bytes = 64});
    ASSERT_FALSE(too_big);
    EXPECT_EQ(too_big.error().message,
              "the file is " + std::to_string(big.size()) + " bytes; Powerhouse imports files of up to 64 bytes");
    EXPECT_EQ(check_import_size(300ull << 20).error().message,
              "the file is 300.0 MiB; Powerhouse imports files of up to 256.0 MiB");
    EXPECT_TRUE(check_import_size(256ull << 20));
    EXPECT_TRUE(import_json(s, big, {.max_bytes = big.size()}));  // exactly the limit is fine
    ASSERT_TRUE(s.delete_conversation(ok(s.conversations())[0].id));
    ASSERT_TRUE(s.purge_deleted());

    EXPECT_EQ(ok(export_json(s, {}, {.now_ms = 1})), before) << "a refused import changed the store";
}

TEST(Transfer, InsertConversationsIsAllOrNothing) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    std::vector<ConversationRecord> records = rich_conversations();
    records[1].messages.push_back(message("robot", "beep", kMay1));
    const Result<std::vector<int64_t>> r = s.insert_conversations(records);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, "a message's role is system, user or assistant, not 'robot'");
    EXPECT_TRUE(ok(s.conversations()).empty());

    // A failure inside the transaction (the database refuses the second conversation's
    // message, through a trigger made for the test) rolls back the first conversation too.
    {
        SQLite::Database db((dir / "p.db").string(), SQLite::OPEN_READWRITE);
        db.exec(
            "CREATE TRIGGER refuse BEFORE INSERT ON messages WHEN new.content = 'boom' "
            "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END");
    }
    records = rich_conversations();
    records[1].messages[0].content = "boom";
    const Result<std::vector<int64_t>> refused = s.insert_conversations(records);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("refused by the test"), std::string::npos) << refused.error().message;
    EXPECT_TRUE(ok(s.conversations()).empty());
    EXPECT_TRUE(ok(s.search("terse")).empty());
    // The ids go on from where they were; an import works again once nothing refuses it.
    records[1].messages[0].content = "fine";
    EXPECT_EQ(ok(s.insert_conversations(records)).size(), 2u);
}

}  // namespace
}  // namespace powerhouse::store
