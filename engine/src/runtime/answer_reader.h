// Reading a chat answer as the engine streams it (GenerateCommand::read_answer): in the
// format of the model's chat template (powerhouse/tool_calls.h), starting inside a
// reasoning block when the prompt opened one, with tool calls read only when tools were
// offered. The engine emits what it returns as TokenEvents, and the whole as the DoneEvent's.
//
// Thread-safety: one request's reader, used by the engine thread only.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "powerhouse/engine.h"
#include "powerhouse/tool_calls.h"

namespace powerhouse {

class AnswerReader {
public:
    AnswerReader(const Model& model, const GenerateCommand& command, std::span<const TokenId> prompt);

    struct Delta {
        std::string text;
        std::string reasoning;
    };
    // The content and reasoning that `text` (the answer's next piece) makes certain.
    Delta feed(std::string_view text);
    // After the last feed: the rest of the content and reasoning, and the calls.
    ParsedAnswer finish();

    // Everything returned so far.
    const std::string& content() const { return content_; }
    const std::string& reasoning() const { return reasoning_; }

private:
    ToolCallStream stream_;
    std::string content_;
    std::string reasoning_;
};

}  // namespace powerhouse
