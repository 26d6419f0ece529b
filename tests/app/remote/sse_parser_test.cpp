// The server-sent events parser on the standard's framing, fed whole and cut at every byte.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "remote/sse_parser.h"

namespace powerhouse::remote {
namespace {

std::vector<SseEvent> parse_in_pieces(const std::string& text, size_t piece, bool* ok = nullptr) {
    SseParser parser;
    std::vector<SseEvent> events;
    bool all = true;
    for (size_t i = 0; i < text.size() && all; i += piece) all = parser.feed(text.substr(i, piece), events);
    if (ok != nullptr) *ok = all;
    return events;
}

TEST(SseParser, EventsAreTheSameWhereverTheBytesAreCut) {
    const std::string text =
        "\xEF\xBB\xBF: a comment first\n"
        "data: {\"a\": \"h\xC3\xA9llo\"}\n\n"
        "event: update\r\n"
        "id: 7\r\n"
        "data: line one\r\n"
        "data:line two\r\n"
        "\r\n"
        ": keep-alive\r"
        "\r"
        "data: [DONE]\r\r";
    for (size_t piece = 1; piece <= text.size(); ++piece) {
        bool ok = false;
        const std::vector<SseEvent> events = parse_in_pieces(text, piece, &ok);
        ASSERT_TRUE(ok) << piece;
        ASSERT_EQ(events.size(), 3u) << piece;
        EXPECT_EQ(events[0].data, "{\"a\": \"h\xC3\xA9llo\"}");
        EXPECT_EQ(events[0].event, "");
        EXPECT_EQ(events[1].event, "update");
        EXPECT_EQ(events[1].id, "7");
        EXPECT_EQ(events[1].data, "line one\nline two");
        EXPECT_EQ(events[2].data, "[DONE]");
        EXPECT_EQ(events[2].event, "");  // an event's name does not outlive it
    }
}

TEST(SseParser, CommentsAndBlankLinesAloneDispatchNothing) {
    const std::vector<SseEvent> events = parse_in_pieces(": ping\n\n: ping\n\n\n\nretry: 1000\n\n", 3);
    EXPECT_TRUE(events.empty());
}

TEST(SseParser, AnEventWithoutItsBlankLineIsPending) {
    SseParser parser;
    std::vector<SseEvent> events;
    ASSERT_TRUE(parser.feed("data: {\"x\": 1}\n\ndata: {\"half\"", events));
    EXPECT_EQ(events.size(), 1u);
    EXPECT_TRUE(parser.has_pending());
}

// llama.cpp's server fails a stream that has begun with an "error:" line: an event of type
// "error" with that line as its data, as "event: error" would make it, not garbage.
TEST(SseParser, AnErrorLineIsAnErrorEvent) {
    const std::string text =
        "data: {\"x\": 1}\n\n"
        "error: {\"code\": 400, \"message\": \"too long\"}\n\n"
        "event: error\ndata: {\"message\": \"named\"}\n\n"
        "data: [DONE]\n\n";
    for (size_t piece = 1; piece <= text.size(); ++piece) {
        bool ok = false;
        const std::vector<SseEvent> events = parse_in_pieces(text, piece, &ok);
        ASSERT_TRUE(ok) << piece;
        ASSERT_EQ(events.size(), 4u) << piece;
        EXPECT_EQ(events[0].event, "");
        EXPECT_EQ(events[1].event, "error");
        EXPECT_EQ(events[1].data, "{\"code\": 400, \"message\": \"too long\"}");
        EXPECT_EQ(events[2].event, "error");
        EXPECT_EQ(events[2].data, "{\"message\": \"named\"}");
        EXPECT_EQ(events[3].event, "");
        EXPECT_EQ(events[3].data, "[DONE]");
    }
}

TEST(SseParser, ALineThatIsNoFieldIsGarbage) {
    SseParser parser;
    std::vector<SseEvent> events;
    EXPECT_TRUE(parser.feed("data: {}\n\n", events));
    EXPECT_FALSE(parser.feed("<html><body>502 Bad Gateway</body></html>\n", events));
    ASSERT_TRUE(parser.garbage());
    EXPECT_EQ(*parser.garbage(), "<html><body>502 Bad Gateway</body></html>");
    EXPECT_FALSE(parser.feed("data: {}\n\n", events));  // stays failed
    EXPECT_EQ(events.size(), 1u);
}

// The end of the stream judges a last line that has no line end: SSE stays pending, and
// anything else is garbage.
TEST(SseParser, TheLastLineWithoutItsEndIsJudgedAtTheEnd) {
    SseParser half;
    std::vector<SseEvent> events;
    ASSERT_TRUE(half.feed("data: {\"x\": 1}\n\ndata: {\"half\"", events));
    EXPECT_TRUE(half.finish());
    EXPECT_TRUE(half.has_pending());
    EXPECT_EQ(events.size(), 1u);

    SseParser page;
    ASSERT_TRUE(page.feed("<html><body>Sign in to use this network</body></html>", events));
    EXPECT_FALSE(page.finish());
    ASSERT_TRUE(page.garbage());
    EXPECT_EQ(*page.garbage(), "<html><body>Sign in to use this network</body></html>");
    EXPECT_EQ(events.size(), 1u);
}

TEST(SseParser, AnEndlessLineIsGarbage) {
    SseParser parser;
    std::vector<SseEvent> events;
    const std::string chunk(1024 * 1024, 'x');
    bool ok = parser.feed("data: ", events);
    for (int i = 0; i < 5 && ok; ++i) ok = parser.feed(chunk, events);
    EXPECT_FALSE(ok);
    ASSERT_TRUE(parser.garbage());
    EXPECT_LE(parser.garbage()->size(), 256u);
}

}  // namespace
}  // namespace powerhouse::remote
