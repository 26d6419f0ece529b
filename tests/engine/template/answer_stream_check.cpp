#include "answer_stream_check.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace powerhouse::test {

AnswerOptions salted(std::string salt, nlohmann::ordered_json tools) {
    AnswerOptions options;
    options.id_salt = std::move(salt);
    options.tools = std::move(tools);
    return options;
}

StreamedAnswer expect_streams_as_whole(ToolCallFormat format, std::string_view text, const AnswerOptions& options,
                                       std::span<const size_t> sizes, const std::string& label) {
    const ParsedAnswer whole = parse_answer(format, text, options);
    ToolCallStream stream(format, options);
    StreamedAnswer streamed;
    size_t pos = 0;
    for (size_t i = 0; i <= sizes.size(); ++i) {
        const size_t n = i < sizes.size() ? sizes[i] : std::string_view::npos;
        streamed.content += stream.feed(text.substr(std::min(pos, text.size()), n));
        streamed.reasoning += stream.take_reasoning();
        pos = n == std::string_view::npos ? text.size() : pos + n;
    }
    const ParsedAnswer finished = stream.finish();
    EXPECT_EQ(streamed.content + finished.content, whole.content) << label;
    EXPECT_EQ(streamed.reasoning + finished.reasoning, whole.reasoning) << label;
    EXPECT_EQ(finished.tool_calls.size(), whole.tool_calls.size()) << label;
    for (size_t i = 0; i < std::min(whole.tool_calls.size(), finished.tool_calls.size()); ++i) {
        EXPECT_EQ(finished.tool_calls[i].id, whole.tool_calls[i].id) << label;
        EXPECT_EQ(finished.tool_calls[i].name, whole.tool_calls[i].name) << label;
        EXPECT_EQ(finished.tool_calls[i].arguments, whole.tool_calls[i].arguments) << label;
    }
    return streamed;
}

StreamedAnswer expect_every_split_reads_the_whole(ToolCallFormat format, std::string_view text,
                                                  const AnswerOptions& options, int random_rounds) {
    const std::string name = std::string(tool_call_format_name(format)) + ": " + std::string(text);
    const std::vector<size_t> bytes(text.size(), 1);
    const StreamedAnswer by_byte = expect_streams_as_whole(format, text, options, bytes, "byte by byte " + name);
    for (size_t split = 0; split <= text.size(); ++split) {
        const size_t first[] = {split};
        expect_streams_as_whole(format, text, options, first, "split at " + std::to_string(split) + " " + name);
    }
    std::mt19937 random(7);
    for (int round = 0; round < random_rounds; ++round) {
        std::vector<size_t> sizes;
        for (size_t pos = 0; pos < text.size();) {
            sizes.push_back(std::uniform_int_distribution<size_t>(0, 9)(random));
            pos += sizes.back();
        }
        expect_streams_as_whole(format, text, options, sizes, "random chunks " + name);
    }
    return by_byte;
}

}  // namespace powerhouse::test
