// The server's answers in OpenAI's shapes: a chat.completion or text_completion object for a
// request that does not stream, and the server-sent events of one that does (a chunk per
// piece of text, the finish reason, the usage when asked, and "data: [DONE]").
//
// With tools, the model's text goes through its family's tool-call parser
// (powerhouse/tool_calls.h): a call comes back as `tool_calls` with finish_reason
// "tool_calls", and while streaming, text that may be the start of a call is held back so
// that a client never sees a call's markup as content. Formats whose answers carry reasoning
// (gpt-oss's analysis channel, Seed-OSS's and GLM's think blocks) go through it for every
// chat, tools or not: the reasoning comes back as `reasoning_content` (at the end of a
// stream), never as content.
//
// Thread-safety: a Reply belongs to one request, used by one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "powerhouse/engine.h"
#include "powerhouse/tool_calls.h"
#include "requests.h"

namespace powerhouse::server {

class Reply {
public:
    // `chat`: /v1/chat/completions, else /v1/completions.
    Reply(bool chat, std::string id, std::string model, int64_t created, const GenRequest& request,
          ToolCallFormat tool_format);

    // The whole answer (not streaming).
    json complete(const DoneEvent& done) const;

    // Streaming: the first event (a chat's role), one per piece of text (may be empty when
    // text is held back), and the last ones ending in [DONE].
    std::string stream_start();
    std::string stream_text(const TokenEvent& token);
    std::string stream_end(const DoneEvent& done);

    static json usage(const DoneEvent& done);

private:
    bool chat_;
    std::string id_, model_;
    int64_t created_;
    bool include_usage_;
    bool logprobs_;
    bool tools_;
    // The answer goes through the format's parser: with tools, and for formats whose answers
    // carry reasoning (format_has_reasoning: gpt-oss's channels, think blocks), without.
    bool parsed_;
    ToolCallFormat tool_format_;
    json tool_list_;  // the request's tools
    std::optional<ToolCallStream> tool_stream_;
    std::vector<TokenLogprob> pending_logprobs_;  // of text not sent yet
    size_t text_offset_ = 0;                      // text streamed so far (legacy completions' text_offset)

    std::string event(json choice, bool with_usage_null = true) const;
    json logprobs_of(std::span<const TokenLogprob> logprobs, size_t text_offset) const;
};

}  // namespace powerhouse::server
