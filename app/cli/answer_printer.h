// How generate and chat print an answer whose reasoning comes apart from its text, the same
// for a remote server (reasoning_content) and for the engine (GenerateCommand::read_answer):
// the thinking between "<think>" and "</think>" lines before the text (after it too, where it
// comes last), on stdout with the answer, as a reasoning model's own think block reads when
// nothing separates it. Kept in one place so that local and remote answers look alike.
// The tool calls an answer made (DoneEvent::tool_calls, remote::ChatResult::tool_calls) come
// after it, each between "<tool_call>" and "</tool_call>" lines as one line of JSON,
// {"name", "arguments", "id"}, as Hermes-style models write their calls: the arguments as the
// JSON they are (as text when they are not JSON), the id left out when there is none.
//
// Thread-safety: an AnswerPrinter is used by one thread; say_cut_while_reasoning by any.
#pragma once

#include <cstdio>
#include <string_view>
#include <vector>

#include "powerhouse/generation.h"

namespace powerhouse::cli {

class AnswerPrinter {
public:
    // `out` (stdout unless a test reads it) is flushed after every piece, so that the answer
    // streams.
    explicit AnswerPrinter(std::FILE* out = stdout) : out_(out) {}

    // An empty piece prints nothing and changes nothing: a delta may carry only the other
    // part, or neither while the engine's reader waits to see what a marker opens.
    void reasoning(std::string_view piece);
    void text(std::string_view piece);
    // Ends what was printed: the think block, or the text's line. Nothing printed (a tool
    // call, an answer without text, a failure before anything came), nothing to end.
    void end();
    // Ends what was printed (end()), then prints each call in its block. None: nothing.
    void tool_calls(const std::vector<ToolCall>& calls);

private:
    void write(std::string_view bytes);

    std::FILE* out_;
    bool thinking_ = false;   // inside "<think>"
    bool text_open_ = false;  // text printed on a line not ended yet
};

// Said on stderr when the token limit came while the model was still thinking: there is no
// answer, only the thinking shown above it (in a chat, the turn is taken back).
void say_cut_while_reasoning(bool in_chat);

// Said on stderr after a chat's answer that reached its token limit (-n), local or remote
// alike: cut while the model was still reasoning (say_cut_while_reasoning), else cut mid-text.
void say_token_limit_in_chat(bool while_reasoning);

}  // namespace powerhouse::cli
