// How generate and chat print an answer whose reasoning comes apart from its text
// (app/cli/answer_printer.h), fed made-up deltas as the engine (TokenEvent::reasoning and
// ::text) and a remote server send them. The commands themselves on a model are in
// reasoning_cli_test.cpp and remote_cli_test.cpp.
#include "answer_printer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace powerhouse::cli {
namespace {

// A delta as TokenEvent carries one: reasoning, then text, either or both empty.
using Delta = std::pair<std::string, std::string>;

// What a printer fed `deltas` (reasoning before text in each, as answer_on_engine feeds them)
// and then ended writes.
std::string printed(const std::vector<Delta>& deltas, const std::function<void(AnswerPrinter&)>& after = {}) {
    std::FILE* file = std::tmpfile();
    EXPECT_NE(file, nullptr);
    if (file == nullptr) return {};
    AnswerPrinter printer(file);
    for (const auto& [reasoning, text] : deltas) {
        printer.reasoning(reasoning);
        printer.text(text);
    }
    printer.end();
    if (after) after(printer);
    std::string out(static_cast<size_t>(std::ftell(file)), '\0');
    std::rewind(file);
    EXPECT_EQ(std::fread(out.data(), 1, out.size(), file), out.size());
    std::fclose(file);
    return out;
}

TEST(AnswerPrinter, ThinkingComesInItsBlockBeforeTheAnswer) {
    // The block's last delta and the answer's first may come in one event.
    EXPECT_EQ(printed({{"The user ", ""}, {"greets me.", "Hello"}, {"", ", wörld"}}),
              "<think>\nThe user greets me.\n</think>\n\nHello, wörld\n");
    // The same as chat --remote and generate --remote print it (remote_cli_test.cpp).
    EXPECT_EQ(printed({{"The user greets me; greet them back.", ""}, {"", "Hello, wörld! Ünïcode ✓ and more."}}),
              "<think>\nThe user greets me; greet them back.\n</think>\n\nHello, wörld! Ünïcode ✓ and more.\n");
}

TEST(AnswerPrinter, AnAnswerWithoutThinkingPrintsAsItCame) {
    EXPECT_EQ(printed({{"", "Paris"}, {"", " is the capital."}}), "Paris is the capital.\n");
    EXPECT_EQ(printed({{"", "two\nlines"}}), "two\nlines\n");
}

// The token limit came while the model thought: the block is closed, no answer line follows.
TEST(AnswerPrinter, ThinkingAloneIsClosed) {
    EXPECT_EQ(printed({{"Let me", ""}, {" think", ""}}), "<think>\nLet me think\n</think>\n");
}

// Deltas with nothing in them (the engine's reader holding back what may open a marker) print
// nothing: they neither close the think block nor leave a lone newline for a script to read
// as an empty answer.
TEST(AnswerPrinter, EmptyDeltasPrintNothing) {
    EXPECT_EQ(printed({}), "");
    EXPECT_EQ(printed({{"", ""}, {"", ""}}), "");
    EXPECT_EQ(printed({{"a", ""}, {"", ""}, {"b", ""}, {"", "c"}}), "<think>\nab\n</think>\n\nc\n");
}

// A server that sends the reasoning after the text: a block of its own on the next line.
TEST(AnswerPrinter, ThinkingAfterTheAnswerStartsALineOfItsOwn) {
    EXPECT_EQ(printed({{"", "Hello"}, {"because", ""}}), "Hello\n<think>\nbecause\n</think>\n");
}

// end() ends what was printed once: a second call, or one after an error's end, adds nothing.
TEST(AnswerPrinter, EndingTwiceEndsOnce) {
    EXPECT_EQ(printed({{"x", "y"}}, [](AnswerPrinter& p) { p.end(); }), "<think>\nx\n</think>\n\ny\n");
}

}  // namespace
}  // namespace powerhouse::cli
