// Streaming checks shared by the tool-call and reasoning tests: a ToolCallStream fed an
// answer in any pieces gives parse_answer()'s content, reasoning and calls.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "powerhouse/tool_calls.h"

namespace powerhouse::test {

// Options with an id salt and tools (calls read, no block opened by the prompt).
AnswerOptions salted(std::string salt, nlohmann::ordered_json tools = {});

// What feed() and take_reasoning() returned (finish()'s rest not included).
struct StreamedAnswer {
    std::string content;
    std::string reasoning;
};

// Feeds `text` in pieces of `sizes` (the rest after the last), taking the reasoning after
// each, and expects what streamed followed by finish() to be the whole answer's.
StreamedAnswer expect_streams_as_whole(ToolCallFormat format, std::string_view text, const AnswerOptions& options,
                                       std::span<const size_t> sizes, const std::string& label);

// The same byte by byte, split in two at every place, and in `random_rounds` random
// chunkings; returns the byte-by-byte stream.
StreamedAnswer expect_every_split_reads_the_whole(ToolCallFormat format, std::string_view text,
                                                  const AnswerOptions& options, int random_rounds);

}  // namespace powerhouse::test
