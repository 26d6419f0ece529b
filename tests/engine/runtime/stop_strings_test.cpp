// StopStringMatcher: stop strings found across pieces, held-back prefixes released, the same
// result for any cutting of the text, and UTF-8 characters never split.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "powerhouse/stop_strings.h"
#include "tokenizer/utf8.h"

namespace powerhouse {
namespace {

struct Streamed {
    std::vector<std::string> chunks;  // what each feed() emitted
    std::string text;                 // everything emitted, flush() included
    bool stopped = false;
    std::optional<size_t> matched;
};

Streamed stream(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
    StopStringMatcher matcher(stops);
    Streamed out;
    for (const std::string& piece : pieces) {
        StopStringOutput fed = matcher.feed(piece);
        out.chunks.push_back(fed.text_to_emit);
        out.text += fed.text_to_emit;
        if (out.stopped) {
            EXPECT_TRUE(fed.stopped && fed.text_to_emit.empty()) << "feed after the stop";
        }
        out.stopped = out.stopped || fed.stopped;
    }
    const std::string rest = matcher.flush();
    if (out.stopped) {
        EXPECT_EQ(rest, "");
    }
    out.text += rest;
    EXPECT_EQ(matcher.stopped(), out.stopped);
    out.matched = matcher.matched_index();
    return out;
}

// The answer straight from the definition: the stop string occurrence that ends first (the
// longest of those ending there), and the text before it.
struct Expected {
    std::string text;
    bool stopped = false;
};

Expected reference(const std::vector<std::string>& stops, const std::string& text) {
    size_t best_end = std::string::npos;
    size_t best_start = 0;
    for (const std::string& stop : stops) {
        if (stop.empty()) continue;
        const size_t at = text.find(stop);
        if (at == std::string::npos) continue;
        const size_t end = at + stop.size();
        if (end < best_end || (end == best_end && at < best_start)) {
            best_end = end;
            best_start = at;
        }
    }
    if (best_end == std::string::npos) return {text, false};
    return {text.substr(0, best_start), true};
}

TEST(StopStrings, WithoutStopStringsEverythingPassesAtOnce) {
    const Streamed s = stream({}, {"Hello", ", ", "world"});
    EXPECT_EQ(s.chunks, (std::vector<std::string>{"Hello", ", ", "world"}));
    EXPECT_FALSE(s.stopped);
    EXPECT_FALSE(s.matched.has_value());
    // Empty stop strings are ignored.
    EXPECT_EQ(stream({""}, {"abc"}).chunks, (std::vector<std::string>{"abc"}));
}

TEST(StopStrings, FoundInsideOnePiece) {
    const Streamed s = stream({"STOP"}, {"Hello STOP world"});
    EXPECT_EQ(s.chunks, (std::vector<std::string>{"Hello "}));
    EXPECT_TRUE(s.stopped);
    EXPECT_EQ(s.matched, 0u);
    EXPECT_EQ(stream({"STOP"}, {"STOP"}).chunks, (std::vector<std::string>{""}));
}

TEST(StopStrings, FoundAcrossPieces) {
    const Streamed s = stream({"</s>", "User:"}, {"Hi", " there", "\nUs", "e", "r", ": more", "ignored"});
    EXPECT_EQ(s.chunks, (std::vector<std::string>{"Hi", " there", "\n", "", "", "", ""}));
    EXPECT_EQ(s.text, "Hi there\n");
    EXPECT_TRUE(s.stopped);
    EXPECT_EQ(s.matched, 1u);
}

TEST(StopStrings, HeldPrefixIsReleasedWhenItIsNotAStopString) {
    StopStringMatcher matcher({"</s>"});
    StopStringOutput out = matcher.feed("a<");
    EXPECT_EQ(out.text_to_emit, "a");
    EXPECT_TRUE(matcher.has_pending());
    out = matcher.feed("/");
    EXPECT_EQ(out.text_to_emit, "");
    out = matcher.feed("x>");
    EXPECT_EQ(out.text_to_emit, "</x>");
    EXPECT_FALSE(out.stopped);
    EXPECT_FALSE(matcher.has_pending());
    // The end of the stream releases a held prefix too.
    EXPECT_EQ(matcher.feed("b</").text_to_emit, "b");
    EXPECT_EQ(matcher.flush(), "</");
    EXPECT_FALSE(matcher.stopped());
}

TEST(StopStrings, OnlyTheUndecidedTailIsHeld) {
    // At each step exactly the longest tail that could begin "abac" is held.
    StopStringMatcher matcher({"abac"});
    EXPECT_EQ(matcher.feed("xab").text_to_emit, "x");
    EXPECT_EQ(matcher.feed("ab").text_to_emit, "ab");  // "abab": the tail "ab" is held
    EXPECT_EQ(matcher.feed("a").text_to_emit, "");     // "aba" held
    const StopStringOutput out = matcher.feed("c!");
    EXPECT_TRUE(out.stopped);
    EXPECT_EQ(out.text_to_emit, "");
    EXPECT_EQ(matcher.matched_index(), 0u);
}

TEST(StopStrings, OverlappingSelfSimilarStopStrings) {
    // "aab" inside "aaab" starts at 1: the automaton falls back instead of restarting.
    EXPECT_EQ(stream({"aab"}, {"a", "a", "a", "b", "c"}).text, "a");
    EXPECT_EQ(stream({"abcabd"}, {"xabcab", "cabd"}).text, "xabc");
}

TEST(StopStrings, TheStopStringEndingFirstWinsThenTheLongest) {
    // "b" ends before "abc" does.
    Streamed s = stream({"abc", "b"}, {"xabc"});
    EXPECT_EQ(s.text, "xa");
    EXPECT_EQ(s.matched, 1u);
    // The same when the text comes one byte at a time.
    EXPECT_EQ(stream({"abc", "b"}, {"x", "a", "b", "c"}).text, "xa");
    // "bc" and "abc" end together: the longer hides more.
    s = stream({"bc", "abc"}, {"xa", "bc"});
    EXPECT_EQ(s.text, "x");
    EXPECT_EQ(s.matched, 1u);
}

TEST(StopStrings, AfterTheStopNothingMoreUntilReset) {
    StopStringMatcher matcher({"END"});
    EXPECT_TRUE(matcher.feed("doneEND tail").stopped);
    const StopStringOutput later = matcher.feed("more text");
    EXPECT_TRUE(later.stopped);
    EXPECT_EQ(later.text_to_emit, "");
    EXPECT_EQ(matcher.flush(), "");
    EXPECT_TRUE(matcher.stopped());
    matcher.reset();
    EXPECT_FALSE(matcher.stopped());
    EXPECT_FALSE(matcher.matched_index().has_value());
    EXPECT_EQ(matcher.feed("again").text_to_emit, "again");
}

TEST(StopStrings, MultiByteCharactersAreNeverSplit) {
    // The held "é" is a possible start of "é!"; it comes out whole with what follows.
    Streamed s = stream({"é!"}, {"caf", "é", " au lait"});
    EXPECT_EQ(s.chunks, (std::vector<std::string>{"caf", "", "é au lait"}));
    // "è" (C3 A8) shares its first byte with "é" (C3 A9): the byte is held, then the whole
    // character goes out.
    s = stream({"é"}, {"\xC3", "\xA8", "x"});
    EXPECT_EQ(s.chunks, (std::vector<std::string>{"", "è", "x"}));
    EXPECT_FALSE(s.stopped);
    // Without any stop string, a character cut across pieces is held until complete.
    s = stream({}, {"5 \xE2\x82", "\xAC", " \xF0\x9F", "\x98", "\x80!"});
    EXPECT_EQ(s.chunks, (std::vector<std::string>{"5 ", "€", " ", "", "😀!"}));
    // A stop string in the middle of multi-byte text.
    s = stream({"終わり"}, {"日本語", "の文終", "わり。"});
    EXPECT_EQ(s.text, "日本語の文");
}

TEST(StopStrings, AnyCuttingGivesTheSameTextAndValidUtf8Chunks) {
    const std::vector<std::string> alphabet = {"a", "b", "c", "é", "€", "😀", "\n"};
    std::mt19937_64 rng(17);
    const auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
    const auto random_text = [&](size_t length) {
        std::string text;
        for (size_t i = 0; i < length; ++i) text += alphabet[pick(alphabet.size())];
        return text;
    };
    for (int trial = 0; trial < 2000; ++trial) {
        std::vector<std::string> stops;
        const size_t n_stops = pick(4);
        for (size_t i = 0; i < n_stops; ++i) stops.push_back(random_text(1 + pick(4)));
        const std::string text = random_text(pick(40));
        const Expected expected = reference(stops, text);

        // Cut at random byte positions, often inside a multi-byte character.
        std::vector<std::string> pieces;
        size_t at = 0;
        while (at < text.size()) {
            const size_t length = std::min(text.size() - at, 1 + pick(6));
            pieces.push_back(text.substr(at, length));
            at += length;
        }
        const Streamed s = stream(stops, pieces);
        ASSERT_EQ(s.text, expected.text) << "trial " << trial;
        EXPECT_EQ(s.stopped, expected.stopped) << "trial " << trial;
        for (const std::string& chunk : s.chunks) EXPECT_TRUE(is_valid_utf8(chunk)) << "trial " << trial;
        // Whole, in one piece.
        EXPECT_EQ(stream(stops, {text}).text, expected.text) << "trial " << trial;
    }
}

}  // namespace
}  // namespace powerhouse
