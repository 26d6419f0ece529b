// The tool calls of a remote answer (internal to powerhouse_remote): OpenAI's tool_calls read
// from a streamed chunk's delta or a whole message, and put together as the pieces arrive.
//
// A streamed call comes in pieces over many chunks: choices[0].delta.tool_calls[] =
// {index, id?, type?, function: {name?, arguments?}}. The index says which call a piece
// belongs to (calls may interleave); the id and the name come in whichever piece carries them
// (OpenAI and vLLM send them once, in the call's first piece; llama-cpp-python repeats them in
// every piece), and the arguments are JSON text cut anywhere, concatenated per index in the
// order they came. A piece whose id differs from that of the call at its index opens a new
// call: Ollama and some proxies number every call 0 and tell them apart by their ids. A
// non-streamed answer has message.tool_calls[] = {id, type, function:
// {name, arguments}}, whole, its index its place in the array.
//
// What is wrong is an error (format) that says which call and which field, and what the
// protocol wants there: a piece without an index, an id, name or arguments that is not a
// string, a name that changes, and (at the end) a call that never got a name.
//
// Thread-safety: pure functions; a ToolCallAssembler is used by one thread.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "powerhouse/generation.h"
#include "powerhouse/result.h"

namespace powerhouse::remote::detail {

// One piece of one call, as one chunk carried it.
struct ToolCallDelta {
    uint32_t index = 0;
    std::optional<std::string> id;    // when this piece carries it
    std::optional<std::string> name;  // the same
    std::string arguments;            // this piece's part of the arguments' JSON text
};

// A delta's "tool_calls" (`streamed`: each piece needs its index) or a message's (each call is
// whole; its place in the array is its index). Null reads as no calls. The error's message
// names the call and the field, without quoting the chunk (the caller does).
Result<std::vector<ToolCallDelta>> read_tool_call_deltas(const nlohmann::json& tool_calls, bool streamed);

// Puts the pieces of a stream's calls together. `secret` (the API key) is blanked wherever an
// error quotes what the server sent.
class ToolCallAssembler {
public:
    explicit ToolCallAssembler(std::string secret = {}) : secret_(std::move(secret)) {}

    // One chunk's pieces, in the order they came. An error when a piece contradicts what came
    // before it (another name for the same call); the calls are then unusable.
    Result<void> add(const std::vector<ToolCallDelta>& pieces);

    bool empty() const { return count_ == 0; }
    size_t size() const { return count_; }

    // The calls in the order of their indexes (those that shared an index in the order they
    // began): the id as the server sent it (empty when it
    // sent none), the name, and the arguments' text as concatenated ("{}" when no piece
    // carried any: a function without parameters). An error when a call never got a name.
    Result<std::vector<ToolCall>> finish() const;

private:
    std::string secret_;
    std::map<uint32_t, std::vector<ToolCall>> calls_;  // by index: the calls that began there
    size_t count_ = 0;
};

}  // namespace powerhouse::remote::detail
