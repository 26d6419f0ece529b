// One generation on a loaded model: the prompt (a conversation through the model's chat
// template, or raw text), the prompt cache, prefill, and the decode loop with the sampler,
// end-of-generation tokens, stop strings and the streaming detokenizer.
//
// The prompt cache is the model's own KV cache: a new prompt keeps the positions it shares
// with what the cache already holds (the previous turns of a conversation, the previous
// answer included) and only the rest is processed.
//
// A conversation too long for the context is either refused with a message that says how
// long it is and what to do (ContextOverflow::fail), or shortened by dropping its oldest
// messages, never the system prompt nor the last message (ContextOverflow::drop_oldest).
//
// Cancellation is checked before each decode step (one token, or one batch of the prompt).
//
// Thread-safety: free functions; the Model is used by the calling thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/grammar.h"
#include "powerhouse/model.h"
#include "powerhouse/result.h"
#include "powerhouse/sampler.h"
#include "powerhouse/tokenizer.h"

namespace powerhouse {

// A call the assistant made to one of the tools it was offered (OpenAI's tool_calls).
struct ToolCall {
    std::string id;         // answers to this call name it in ChatMessage::tool_call_id
    std::string name;       // the function's name
    std::string arguments;  // JSON text of an object
};

// role and content come first so that `{role, content}` still makes a plain message.
struct ChatMessage {
    std::string role;  // "system", "user", "assistant", "tool"
    // An assistant's message that only calls tools has empty content: the template then
    // sees no content at all, as Hugging Face's convention has it.
    std::string content;
    std::vector<ToolCall> tool_calls{};  // assistant messages
    std::string tool_call_id{};          // "tool" messages: the call this answers
    std::string name{};                  // "tool" messages: the function that answered (optional)
};

enum class ContextOverflow : uint8_t {
    fail,         // refuse the request with a message
    drop_oldest,  // drop the oldest messages (not the system prompt, not the last message)
};

enum class StopReason : uint8_t {
    eos,        // the model ended its answer (an end-of-generation token)
    stop,       // a stop string was found (it is not part of the text)
    length,     // max_tokens were generated
    context,    // the context is full
    cancelled,  // the caller cancelled
};
const char* stop_reason_name(StopReason reason);  // "eos", "stop", "length", "context", "cancelled"

// Speculative decoding by prompt lookup. Where the last tokens of the conversation (prompt
// and answer so far) appeared before, the tokens that followed them there are guessed to
// follow again (a quoted passage, code being edited, a list restated), and the model checks
// the guesses in the same step as its next token, one batch row each. Every row is sampled
// in order with the request's own sampler, and the guesses after the first that the model
// would not have chosen are dropped with their keys and values, so the answer is the one the
// model gives without guessing; only the steps it takes are fewer. Memory-bound decoding
// checks a few more rows almost for free; a guess that fails costs the rows it took.
struct LookupSettings {
    uint32_t max_draft = 0;  // tokens guessed a step at most; 0: off
    uint32_t min_match = 2;  // the fewest last tokens that must have appeared before (>= 1)
    uint32_t max_match = 4;  // the most looked up; the longest run found is used
    // Text the answer is expected to resemble (OpenAI's predicted outputs: the file being
    // edited), looked up before the conversation.
    std::vector<TokenId> prediction;
};

struct GenerationSettings {
    int32_t max_tokens = 512;
    SamplingParams sampling;
    std::vector<std::string> stop;  // stop strings
    bool ignore_eos = false;        // keep going after an end-of-generation token (benchmarks, tests)
    // Constrained sampling (powerhouse/grammar.h): the answer follows this grammar and ends
    // where it must end. Unset: free text.
    std::optional<Grammar> grammar;
    // Control tokens the model writes (tool-call markers such as <|python_tag|>) appear in
    // the text instead of being hidden; end-of-generation tokens never do.
    bool render_special = false;
    // Log-probabilities of each generated token under the model (before the sampler's
    // penalties and filters), and of the top_logprobs likeliest tokens at its place (0..20).
    bool logprobs = false;
    int32_t top_logprobs = 0;
    LookupSettings lookup;  // speculative decoding; off by default
    // Speculative decoding by a draft model (LoadCommand::draft_model: a small model of the
    // same vocabulary): the tokens it guesses a step, checked as lookup's are. Unset: the
    // engine's default (LoadCommand::draft_tokens) when a draft model is loaded; 0: none.
    // Where both could guess, the draft model does.
    std::optional<uint32_t> draft_tokens;
};

// One token and its log-probability.
struct TokenChoice {
    TokenId id = 0;
    std::string bytes;  // what the token spells (may be part of a UTF-8 character)
    float logprob = 0.0f;
};

// A generated token's log-probability, and the likeliest tokens at its place (most likely first).
struct TokenLogprob {
    TokenChoice chosen;
    std::vector<TokenChoice> top;
};

struct GenerationStats {
    uint32_t prompt_tokens = 0;    // the whole prompt
    uint32_t reused_tokens = 0;    // of which found in the cache (not processed again)
    uint32_t generated_tokens = 0;
    uint32_t dropped_messages = 0;  // by ContextOverflow::drop_oldest
    double prompt_seconds = 0;      // processing the part of the prompt not reused
    double time_to_first_token = 0;  // from the start until the first token was sampled
    double generation_seconds = 0;   // from the first sampled token to the end
    StopReason stop_reason = StopReason::length;
    // Speculative decoding (GenerationSettings::lookup): tokens guessed, and of those the
    // ones the model chose too (each saved a step).
    uint32_t drafted_tokens = 0;
    uint32_t accepted_tokens = 0;

    double prompt_tokens_per_second() const;
    // Tokens after the first over generation_seconds (the first one's cost is in ttft).
    double tokens_per_second() const;
};

struct GenerationResult {
    std::vector<TokenId> ids;  // generated ids (an end-of-generation token included)
    std::string text;          // what was shown, without the stop string
    GenerationStats stats;
    std::vector<TokenLogprob> logprobs;  // one per generated id, when settings.logprobs
};

struct GenerationCallbacks {
    // Each piece of text as soon as it is complete (never half a UTF-8 character).
    std::function<void(std::string_view text)> on_text;
    // Polled before every decode step; true stops with StopReason::cancelled.
    std::function<bool()> cancelled;
};

// A raw prompt: the text tokenized as it is, with the BOS token when the model asks for one.
// Special tokens written in it (`<|im_start|>`, `<|eot_id|>`) become their ids, as
// llama.cpp's tools and llama-server's completions do (whoever writes a raw prompt writes
// the template by hand); with parse_special false they stay text.
std::vector<TokenId> raw_prompt(const Model& model, std::string_view text, bool parse_special = true);

// The variables a chat template sees for a conversation, as Hugging Face transformers
// builds them: {"messages": [...], "tools": [...] (only when there are tools),
// "add_generation_prompt": true}. An assistant's tool calls become
// {"id", "type": "function", "function": {"name", "arguments"}} with the arguments PARSED
// into JSON (text that is not JSON stays a string), and a tool's answer carries
// tool_call_id and name; empty optional fields are left out, because templates test
// whether a key is there (`'tool_calls' in message`, `tool_call.id is defined`).
// `tools`: OpenAI tool objects ({"type": "function", "function": {name, description,
// parameters}}); null or an empty array means none. Everything here is data to the
// template: nothing in a message or a schema can become a control token.
nlohmann::ordered_json chat_context(std::span<const ChatMessage> messages,
                                    const nlohmann::ordered_json& tools = nlohmann::ordered_json());

// A conversation through the model's chat template (its own, or the built-in one of its
// family), ending with the assistant's turn opened. Special tokens count only in the
// template's text, never inside a message. With tools, a template that renders them gets
// them as `tools`; one that never mentions tools (SmolLM2's) would drop them silently, so
// they are described in the system message instead, with the answer format of
// ToolCallFormat::generic (powerhouse/tool_calls.h: add_tool_instructions).
// `variables`: more of the template's variables, beside the conversation (Hugging Face's
// chat_template_kwargs): {"enable_thinking": false} turns Qwen3's, Qwen3.5's and
// DeepSeek-R1's thinking off, {"reasoning_effort": "high"} sets gpt-oss's. An object or
// null; check_template_variables() says which are allowed.
Result<std::vector<TokenId>> chat_prompt(const Model& model, std::span<const ChatMessage> messages,
                                         const nlohmann::ordered_json& tools = nlohmann::ordered_json(),
                                         const nlohmann::ordered_json& variables = nlohmann::ordered_json());

// Template variables must be an object (or null) and may not set what the conversation
// sets (messages, tools, add_generation_prompt) or the model's own tokens (bos_token,
// eos_token); the error names the variable.
Result<void> check_template_variables(const nlohmann::ordered_json& variables);

// The conversation's prompt, made to leave `reserve` positions free for the answer as the
// policy says. On success, `dropped` tells how many messages were removed from the front
// (after a system message; the tool answers of a dropped call go with it). Errors name
// the sizes and what to do.
Result<std::vector<TokenId>> fit_chat_prompt(const Model& model, std::span<const ChatMessage> messages,
                                             ContextOverflow policy, uint32_t reserve, uint32_t& dropped,
                                             const nlohmann::ordered_json& tools = nlohmann::ordered_json(),
                                             const nlohmann::ordered_json& variables = nlohmann::ordered_json());

// Generates after `prompt`, reusing the cached prefix. The cache then holds the prompt and
// the answer (but its last token), ready for the next turn.
Result<GenerationResult> generate(Model& model, std::span<const TokenId> prompt, const GenerationSettings& settings,
                                  const GenerationCallbacks& callbacks = {});

}  // namespace powerhouse
