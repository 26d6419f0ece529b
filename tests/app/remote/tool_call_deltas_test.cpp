// A remote answer's tool calls (tool_call_deltas.h, openai_protocol.h): recorded chunk
// sequences read with parse_chunk and put together by index (OpenAI's and vLLM's way: the id
// and name once; llama-cpp-python's: repeated in every piece), arguments cut mid-string, in
// the middle of an escape and of a UTF-8 character; a non-streamed message's calls; and every
// malformed piece named in a format error instead of a crash or a lost call.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "remote/openai_protocol.h"
#include "remote/sse_parser.h"
#include "remote/tool_call_deltas.h"
#include "support/test_support.h"

namespace powerhouse::remote::detail {
namespace {

// The events' data read with parse_chunk and their calls put together.
Result<std::vector<ToolCall>> assemble(const std::vector<std::string>& events, std::string_view secret = "") {
    ToolCallAssembler calls{std::string(secret)};
    for (const std::string& data : events) {
        Result<ChunkDelta> chunk = parse_chunk(data, secret);
        if (!chunk) return chunk.error();
        if (Result<void> added = calls.add(chunk->tool_calls); !added) return added.error();
    }
    return calls.finish();
}

// A chunk whose delta carries `tool_calls` (JSON text).
std::string tool_chunk(const std::string& tool_calls) {
    return R"({"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"tool_calls":)" +
           tool_calls + R"(},"finish_reason":null}]})";
}

void expect_error(const Result<std::vector<ToolCall>>& r, const std::string& words) {
    ASSERT_FALSE(r.ok()) << "no error; expected one saying: " << words;
    EXPECT_EQ(r.error().code, ErrorCode::format);
    EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
}

// OpenAI's stream of two calls: each call's id and name in its first piece, then its
// arguments in pieces, the two calls interleaved, once two pieces in one chunk, the
// arguments cut mid-key and mid-string.
TEST(RemoteToolCalls, InterleavedCallsArePutTogetherByIndex) {
    const std::vector<std::string> events = {
        R"({"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]})",
        tool_chunk(R"([{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}])"),
        tool_chunk(R"([{"index":0,"function":{"arguments":"{\"ci"}}])"),
        tool_chunk(
            R"([{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"zo"}}])"),
        tool_chunk(R"([{"index":0,"function":{"arguments":"ty\": \"Par"}}])"),
        tool_chunk(
            R"([{"index":1,"function":{"arguments":"ne\": \"UTC\"}"}},{"index":0,"function":{"arguments":"is\"}"}}])"),
        R"({"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})",
    };
    Result<std::vector<ToolCall>> calls = assemble(events);
    ASSERT_TRUE(calls.ok()) << calls.error().message;
    ASSERT_EQ(calls->size(), 2u);
    EXPECT_EQ((*calls)[0].id, "call_a");
    EXPECT_EQ((*calls)[0].name, "get_weather");
    EXPECT_EQ((*calls)[0].arguments, R"({"city": "Paris"})");
    EXPECT_EQ((*calls)[1].id, "call_b");
    EXPECT_EQ((*calls)[1].name, "get_time");
    EXPECT_EQ((*calls)[1].arguments, R"({"zone": "UTC"})");
}

// The calls come out in the order of their indexes, whichever began first.
TEST(RemoteToolCalls, CallsComeOutInTheOrderOfTheirIndexes) {
    Result<std::vector<ToolCall>> calls =
        assemble({tool_chunk(R"([{"index":1,"id":"b","function":{"name":"second","arguments":"{}"}}])"),
                  tool_chunk(R"([{"index":0,"id":"a","function":{"name":"first","arguments":"{}"}}])")});
    ASSERT_TRUE(calls.ok()) << calls.error().message;
    ASSERT_EQ(calls->size(), 2u);
    EXPECT_EQ((*calls)[0].name, "first");
    EXPECT_EQ((*calls)[1].name, "second");
}

// llama-cpp-python 0.3.36's server on SmolLM2 (chat_format chatml-function-calling,
// tool_choice naming get_weather, "What is the weather in Zürich?"), its stream as it sent it
// (tests/data/remote/llama_cpp_python_tool_call.sse), read 5 bytes at a time: the id and the
// name repeated in every piece, "content": null and "tool_calls": null around them, the "ü"
// a piece of its own written as a JSON escape.
TEST(RemoteToolCalls, LlamaCppPythonsRepeatedIdAndNameAreOneCall) {
    std::ifstream file(test::data_dir() / "remote" / "llama_cpp_python_tool_call.sse", std::ios::binary);
    ASSERT_TRUE(file) << "tests/data/remote/llama_cpp_python_tool_call.sse is missing";
    const std::string stream((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    SseParser parser;
    std::vector<SseEvent> events;
    for (size_t at = 0; at < stream.size(); at += 5) ASSERT_TRUE(parser.feed(stream.substr(at, 5), events));
    ASSERT_FALSE(events.empty());
    ASSERT_EQ(events.back().data, "[DONE]");
    std::vector<std::string> data;
    for (size_t i = 0; i + 1 < events.size(); ++i) data.push_back(events[i].data);
    Result<std::vector<ToolCall>> calls = assemble(data);
    ASSERT_TRUE(calls.ok()) << calls.error().message;
    ASSERT_EQ(calls->size(), 1u);
    EXPECT_EQ((*calls)[0].id.rfind("call__0_get_weather_cmpl-", 0), 0u) << (*calls)[0].id;
    EXPECT_EQ((*calls)[0].name, "get_weather");
    EXPECT_EQ((*calls)[0].arguments, "{ \"city\": \"Z\xC3\xBCrich\" }");
    EXPECT_EQ(parse_chunk(data.back(), "")->finish_reason, "tool_calls");
}

// The arguments are text cut anywhere: in the middle of a JSON escape of the arguments (its
// "\u00e9" and a surrogate pair's two halves in different pieces) and, where a server cuts
// the bytes themselves, in the middle of a UTF-8 character. Concatenated per call, they are
// whole again.
TEST(RemoteToolCalls, ArgumentsCutInsideAnEscapeOrACharacterAreWholeAgain) {
    Result<std::vector<ToolCall>> escaped = assemble({
        tool_chunk(R"([{"index":0,"id":"e","function":{"name":"say","arguments":"{\"w\": \"caf\\u00"}}])"),
        tool_chunk(R"([{"index":0,"function":{"arguments":"e9 \\ud83d"}}])"),
        tool_chunk(R"([{"index":0,"function":{"arguments":"\\ude00\"}"}}])"),
    });
    ASSERT_TRUE(escaped.ok()) << escaped.error().message;
    ASSERT_EQ(escaped->size(), 1u);
    EXPECT_EQ((*escaped)[0].arguments, R"({"w": "caf\u00e9 \ud83d\ude00"})");
    EXPECT_EQ(nlohmann::json::parse((*escaped)[0].arguments)["w"], "caf\xC3\xA9 \xF0\x9F\x98\x80");

    // "Zürich ✓" with the ü's two bytes and the ✓'s three in different pieces.
    ToolCallAssembler bytes;
    ASSERT_TRUE(bytes.add({{0, std::string("call_u"), std::string("get_weather"), "{\"city\": \"Z\xC3"}}).ok());
    ASSERT_TRUE(bytes.add({{0, std::nullopt, std::nullopt, "\xBCrich \xE2\x9C"}}).ok());
    ASSERT_TRUE(bytes.add({{0, std::nullopt, std::nullopt, "\x93\"}"}}).ok());
    Result<std::vector<ToolCall>> calls = bytes.finish();
    ASSERT_TRUE(calls.ok()) << calls.error().message;
    EXPECT_EQ((*calls)[0].arguments, "{\"city\": \"Z\xC3\xBCrich \xE2\x9C\x93\"}");
}

// A function without parameters: no piece carried arguments, which read as "{}". An id the
// server never sent stays empty.
TEST(RemoteToolCalls, ACallWithoutArgumentsHasAnEmptyObject) {
    Result<std::vector<ToolCall>> calls = assemble({tool_chunk(R"([{"index":0,"function":{"name":"now"}}])")});
    ASSERT_TRUE(calls.ok()) << calls.error().message;
    ASSERT_EQ(calls->size(), 1u);
    EXPECT_EQ((*calls)[0].arguments, "{}");
    EXPECT_EQ((*calls)[0].id, "");
}

TEST(RemoteToolCalls, MalformedPiecesAreNamedErrors) {
    // Without its index a piece cannot be told to belong to one call or another.
    expect_error(assemble({tool_chunk(R"([{"id":"x","function":{"name":"f","arguments":"{}"}}])")}),
                 "tool call 1 in a chunk's 'tool_calls': it has no 'index'");
    expect_error(assemble({tool_chunk(R"([{"index":-1,"function":{"name":"f"}}])")}), "its 'index' is -1");
    expect_error(assemble({tool_chunk(R"([{"index":"0","function":{"name":"f"}}])")}), "its 'index' is \"0\"");
    // Arguments are text to concatenate, not an object.
    expect_error(assemble({tool_chunk(R"([{"index":0,"function":{"name":"f","arguments":{"city":"Paris"}}}])")}),
                 "'function.arguments' is an object, not a string of JSON text");
    expect_error(assemble({tool_chunk(R"([{"index":0,"function":{"name":"f","arguments":7}}])")}),
                 "'function.arguments' is a number");
    expect_error(assemble({tool_chunk(R"([{"index":0,"function":{"name":["f"]}}])")}),
                 "'function.name' is an array, not a string");
    expect_error(assemble({tool_chunk(R"([{"index":0,"id":5,"function":{"name":"f"}}])")}), "'id' is a number");
    expect_error(assemble({tool_chunk(R"([{"index":0,"function":"f"}])")}), "'function' is a string, not an object");
    expect_error(assemble({tool_chunk(R"([7])")}), "it is a number, not an object");
    expect_error(assemble({tool_chunk(R"({"index":0})")}), "'tool_calls' is an object, not an array of calls");
    // The chunk is quoted after the reason, so the user sees what came.
    Result<std::vector<ToolCall>> quoted = assemble({tool_chunk(R"([{"function":{"name":"f"}}])")});
    ASSERT_FALSE(quoted.ok());
    EXPECT_NE(quoted.error().message.find("'data: {"), std::string::npos) << quoted.error().message;
}

// A call's name does not change: a piece naming another function at the same index (with no
// id of its own to tell a new call) is a contradiction.
TEST(RemoteToolCalls, ANameThatChangesIsAnError) {
    expect_error(assemble({tool_chunk(R"([{"index":0,"function":{"name":"get_weather"}}])"),
                           tool_chunk(R"([{"index":0,"function":{"name":"get_time"}}])")}),
                 "the tool call at index 0 changed its function's name from 'get_weather' to 'get_time'");
    expect_error(assemble({tool_chunk(R"([{"index":0,"id":"a","function":{"name":"get_weather"}}])"),
                           tool_chunk(R"([{"index":0,"id":"a","function":{"name":"get_time"}}])")}),
                 "changed its function's name");
}

// Ollama (ollama/ollama#15457) and some proxies number every call of an answer 0, telling them
// apart only by their ids: a piece with a new id at an index opens a new call there, and the
// pieces without an id after it continue that call. Calls that shared an index come out in
// the order they began.
TEST(RemoteToolCalls, CallsThatShareAnIndexAreToldApartByTheirIds) {
    Result<std::vector<ToolCall>> calls = assemble({
        tool_chunk(R"([{"index":0,"id":"w1","type":"function","function":{"name":"write","arguments":"{\"path\":"}}])"),
        tool_chunk(R"([{"index":0,"function":{"arguments":" \"a.py\"}"}}])"),
        tool_chunk(R"([{"index":0,"id":"w2","type":"function","function":{"name":"write","arguments":"{\"path\""}}])"),
        tool_chunk(R"([{"index":0,"id":"w2","function":{"arguments":": \"b.py\"}"}}])"),
    });
    ASSERT_TRUE(calls.ok()) << calls.error().message;
    ASSERT_EQ(calls->size(), 2u);
    EXPECT_EQ((*calls)[0].id, "w1");
    EXPECT_EQ((*calls)[0].arguments, R"({"path": "a.py"})");
    EXPECT_EQ((*calls)[1].id, "w2");
    EXPECT_EQ((*calls)[1].name, "write");
    EXPECT_EQ((*calls)[1].arguments, R"({"path": "b.py"})");
}

// A call whose pieces never named its function cannot be made: the end of the answer says so,
// naming its index, its id and what its arguments were, with the API key blanked.
TEST(RemoteToolCalls, ACallWithoutANameAtTheEndIsAnError) {
    const std::string key = "sk-secret-42";
    Result<std::vector<ToolCall>> calls =
        assemble({tool_chunk(R"([{"index":0,"id":"call_ok","function":{"name":"f","arguments":"{}"}}])"),
                  tool_chunk(R"([{"index":1,"id":"call_n","function":{"arguments":"{\"key\": \"sk-secret-42\"}"}}])")},
                 key);
    expect_error(calls, "the tool call at index 1 (id 'call_n') ended without a function name");
    ASSERT_FALSE(calls.ok());
    EXPECT_EQ(calls.error().message.find(key), std::string::npos) << calls.error().message;
}

// A non-streamed answer's message.tool_calls: whole calls, their place their index.
TEST(RemoteToolCalls, AWholeAnswersCallsAreRead) {
    Result<ChunkDelta> whole = parse_completion(
        R"({"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,)"
        R"("tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},)"
        R"({"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]}}]})",
        "");
    ASSERT_TRUE(whole.ok()) << whole.error().message;
    EXPECT_EQ(whole->text, "");
    EXPECT_EQ(whole->finish_reason, "tool_calls");
    ASSERT_EQ(whole->tool_calls.size(), 2u);
    ToolCallAssembler calls;
    ASSERT_TRUE(calls.add(whole->tool_calls).ok());
    Result<std::vector<ToolCall>> made = calls.finish();
    ASSERT_TRUE(made.ok()) << made.error().message;
    ASSERT_EQ(made->size(), 2u);
    EXPECT_EQ((*made)[0].id, "call_1");
    EXPECT_EQ((*made)[0].arguments, R"({"city": "Paris"})");
    EXPECT_EQ((*made)[1].name, "get_time");

    // A whole call needs its function; its arguments are text there too.
    Result<ChunkDelta> no_function =
        parse_completion(R"({"choices":[{"message":{"tool_calls":[{"id":"call_1","type":"function"}]}}]})", "");
    ASSERT_FALSE(no_function.ok());
    EXPECT_NE(no_function.error().message.find("tool call 1 in the answer's 'tool_calls': it has no 'function'"),
              std::string::npos)
        << no_function.error().message;
    Result<ChunkDelta> object_arguments = parse_completion(
        R"({"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"f","arguments":{"a":1}}}]}}]})", "");
    ASSERT_FALSE(object_arguments.ok());
    EXPECT_NE(object_arguments.error().message.find("'function.arguments' is an object"), std::string::npos)
        << object_arguments.error().message;
}

// The tools and tool_choice go out in the request, tool_choice only with tools.
TEST(RemoteToolCalls, TheRequestOffersTheTools) {
    ChatRequest request;
    request.model = "m";
    request.messages = {{"user", "weather?"}};
    request.tool_choice = "required";
    EXPECT_FALSE(nlohmann::json::parse(chat_body(request, false)).contains("tool_choice"));
    request.tools = nlohmann::ordered_json::parse(
        R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}])");
    request.tool_choice = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
    const nlohmann::json body = nlohmann::json::parse(chat_body(request, false));
    EXPECT_EQ(body["tools"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(body["tool_choice"]["function"]["name"], "get_weather");
}

}  // namespace
}  // namespace powerhouse::remote::detail
