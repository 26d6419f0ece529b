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
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/model.h"
#include "powerhouse/result.h"
#include "powerhouse/sampler.h"
#include "powerhouse/tokenizer.h"

namespace powerhouse {

struct ChatMessage {
    std::string role;  // "system", "user", "assistant"
    std::string content;
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

struct GenerationSettings {
    int32_t max_tokens = 512;
    SamplingParams sampling;
    std::vector<std::string> stop;  // stop strings
    bool ignore_eos = false;        // keep going after an end-of-generation token (benchmarks, tests)
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

    double prompt_tokens_per_second() const;
    // Tokens after the first over generation_seconds (the first one's cost is in ttft).
    double tokens_per_second() const;
};

struct GenerationResult {
    std::vector<TokenId> ids;  // generated ids (an end-of-generation token included)
    std::string text;          // what was shown, without the stop string
    GenerationStats stats;
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

// A conversation through the model's chat template (its own, or the built-in one of its
// family), ending with the assistant's turn opened. Special tokens count only in the
// template's text, never inside a message.
Result<std::vector<TokenId>> chat_prompt(const Model& model, std::span<const ChatMessage> messages);

// The conversation's prompt, made to leave `reserve` positions free for the answer as the
// policy says. On success, `dropped` tells how many messages were removed from the front
// (after a system message). Errors name the sizes and what to do.
Result<std::vector<TokenId>> fit_chat_prompt(const Model& model, std::span<const ChatMessage> messages,
                                             ContextOverflow policy, uint32_t reserve, uint32_t& dropped);

// Generates after `prompt`, reusing the cached prefix. The cache then holds the prompt and
// the answer (but its last token), ready for the next turn.
Result<GenerationResult> generate(Model& model, std::span<const TokenId> prompt, const GenerationSettings& settings,
                                  const GenerationCallbacks& callbacks = {});

}  // namespace powerhouse
