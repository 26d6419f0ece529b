// Stop strings: ends a streamed answer at the first stop string, which the user never sees.
//
// Text arrives in pieces (what the streaming detokenizer emits for each token). feed()
// returns the text that is safe to show now; text that could still be the start of a stop
// string is held back until the next pieces tell either way. The stop is the first place in
// the text where a stop string ends (when several end there, the longest one); the text from
// its start on is dropped. What is emitted in all does not depend on how the text was cut
// into pieces.
//
// UTF-8: emitted text never ends inside a multi-byte character. A character cut across
// pieces is held until its last byte arrives; with valid UTF-8 stop strings and text, a match
// starts on a character boundary. Matching compares bytes (no normalization, case-sensitive).
//
// Cost: each byte is examined once per stop string (Knuth-Morris-Pratt), and at most the
// longest stop string's length in bytes is held back.
//
// Thread-safety: a plain value; one per stream, used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace powerhouse {

struct StopStringOutput {
    std::string text_to_emit;  // show this now (may be empty)
    bool stopped = false;      // a stop string was found: stop generating; later feeds emit nothing
};

class StopStringMatcher {
public:
    // Empty stop strings are ignored (they would stop before the first character).
    explicit StopStringMatcher(std::vector<std::string> stop_strings);

    StopStringOutput feed(std::string_view piece);

    // Ends the stream: the text still held back (nothing once stopped). The matcher then
    // starts a new stream; stopped() and matched_index() keep their answer until reset().
    std::string flush();

    // A new stream: forgets held text and the stop.
    void reset();

    bool stopped() const { return matched_index_.has_value(); }
    // Which stop string was found: its index in the list given to the constructor.
    std::optional<size_t> matched_index() const { return matched_index_; }
    // True when text is held back.
    bool has_pending() const { return !pending_.empty(); }

private:
    struct Pattern {
        std::string text;
        std::vector<uint32_t> failure;  // [text.size()] KMP: longest proper border of text[0..i]
        size_t index = 0;               // in the constructor's list
        size_t matched = 0;             // bytes of `text` that end the text fed so far
    };

    void clear_stream();

    std::vector<Pattern> patterns_;
    std::string pending_;  // held back: fed, not yet emitted
    std::optional<size_t> matched_index_;
};

}  // namespace powerhouse
