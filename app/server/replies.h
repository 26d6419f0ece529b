// The server's answers in OpenAI's shapes: a chat.completion or text_completion object for a
// request that does not stream, and the server-sent events of one that does (a chunk per
// piece of text, the finish reason, the usage when asked, and "data: [DONE]").
//
// A chat's answer is read by the engine in the model's own format (GenerateCommand::
// read_answer, powerhouse/tool_calls.h): its reasoning (think blocks, gpt-oss's analysis
// channel) comes back as `reasoning_content`, streamed as it comes, never as content; with
// tools, a call comes back as `tool_calls` with finish_reason "tool_calls" (at the end of a
// stream), and its markup never reaches the content.
//
// Thread-safety: a Reply belongs to one request, used by one thread at a time.
#pragma once

#include <cstdint>
#include <string>

#include "powerhouse/engine.h"
#include "requests.h"

namespace powerhouse::server {

class Reply {
public:
    // `chat`: /v1/chat/completions, else /v1/completions.
    Reply(bool chat, std::string id, std::string model, int64_t created, const GenRequest& request);

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
    std::vector<TokenLogprob> pending_logprobs_;  // of text not sent yet
    size_t text_offset_ = 0;                      // text streamed so far (legacy completions' text_offset)

    std::string event(json choice, bool with_usage_null = true) const;
    json logprobs_of(std::span<const TokenLogprob> logprobs, size_t text_offset) const;
};

}  // namespace powerhouse::server
