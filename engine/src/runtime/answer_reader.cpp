#include "runtime/answer_reader.h"

#include <algorithm>

#include "powerhouse/tokenizer.h"

namespace powerhouse {

namespace {

AnswerOptions options_for(const Model& model, ToolCallFormat format, const GenerateCommand& command,
                          std::span<const TokenId> prompt) {
    AnswerOptions options;
    options.id_salt = std::to_string(command.request_id);
    options.calls = has_tools(command.tools);
    if (options.calls) options.tools = command.tools;
    // The tags are a token or a few; the last tokens, written out, show whether the
    // template left a block open (DeepSeek-R1's distills end it with "<think>\n").
    constexpr size_t kTail = 8;
    const std::span<const TokenId> tail = prompt.subspan(prompt.size() - std::min(prompt.size(), kTail));
    options.in_reasoning = prompt_opens_reasoning(format, model.tokenizer().detokenize(tail, true));
    return options;
}

}  // namespace

AnswerReader::AnswerReader(const Model& model, const GenerateCommand& command, std::span<const TokenId> prompt)
    : stream_([&] {
          const ToolCallFormat format = model.summary().tool_format;
          return ToolCallStream(format, options_for(model, format, command, prompt));
      }()) {}

AnswerReader::Delta AnswerReader::feed(std::string_view text) {
    Delta delta{stream_.feed(text), stream_.take_reasoning()};
    content_ += delta.text;
    reasoning_ += delta.reasoning;
    return delta;
}

ParsedAnswer AnswerReader::finish() {
    ParsedAnswer rest = stream_.finish();
    content_ += rest.content;
    reasoning_ += rest.reasoning;
    return rest;
}

}  // namespace powerhouse
