// StopStringMatcher (powerhouse/stop_strings.h): one Knuth-Morris-Pratt automaton per stop
// string, advanced byte by byte over the stream.
#include "powerhouse/stop_strings.h"

#include <algorithm>

namespace powerhouse {
namespace {

// failure[i]: length of the longest proper prefix of text[0..i] that is also its suffix.
std::vector<uint32_t> failure_table(std::string_view text) {
    std::vector<uint32_t> failure(text.size(), 0);
    uint32_t k = 0;
    for (size_t i = 1; i < text.size(); ++i) {
        while (k > 0 && text[i] != text[k]) k = failure[k - 1];
        if (text[i] == text[k]) ++k;
        failure[i] = k;
    }
    return failure;
}

bool is_continuation(char byte) {
    return (static_cast<uint8_t>(byte) & 0xC0) == 0x80;
}

// Bytes of the sequence a lead byte starts (1 for ASCII and for stray continuation bytes).
size_t sequence_length(char byte) {
    const auto b = static_cast<uint8_t>(byte);
    return b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
}

// Moves `end` back so that text[0, end) does not stop inside a multi-byte character whose
// lead byte is among the 3 bytes before `end` (a longer run of continuation bytes is broken
// text: it is not held).
size_t character_boundary_at_or_before(std::string_view text, size_t end) {
    for (size_t back = 1; back <= 3 && back <= end; ++back) {
        const char byte = text[end - back];
        if (is_continuation(byte)) continue;
        return sequence_length(byte) > back ? end - back : end;
    }
    return end;
}

}  // namespace

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings) {
    for (size_t i = 0; i < stop_strings.size(); ++i) {
        if (stop_strings[i].empty()) continue;
        Pattern pattern;
        pattern.failure = failure_table(stop_strings[i]);
        pattern.text = std::move(stop_strings[i]);
        pattern.index = i;
        patterns_.push_back(std::move(pattern));
    }
}

StopStringOutput StopStringMatcher::feed(std::string_view piece) {
    StopStringOutput out;
    if (stopped()) {
        out.stopped = true;
        return out;
    }
    const size_t old_size = pending_.size();
    pending_.append(piece);

    for (size_t i = 0; i < piece.size(); ++i) {
        const char byte = piece[i];
        const Pattern* found = nullptr;
        for (Pattern& p : patterns_) {
            size_t k = p.matched;
            while (k > 0 && p.text[k] != byte) k = p.failure[k - 1];
            if (p.text[k] == byte) ++k;
            p.matched = k;
            // Several ending at this byte: the longest starts first and hides the most.
            if (k == p.text.size() && (found == nullptr || k > found->text.size())) found = &p;
        }
        if (found != nullptr) {
            // The whole match is in pending_: the held text is always at least as long as
            // the longest partial match, and the rest of the match came in this piece.
            const size_t match_end = old_size + i + 1;
            out.text_to_emit = pending_.substr(0, match_end - found->text.size());
            out.stopped = true;
            matched_index_ = found->index;
            clear_stream();
            return out;
        }
    }

    // Hold back the longest tail that is the start of a stop string, and any character not
    // yet complete.
    size_t held = 0;
    for (const Pattern& p : patterns_) held = std::max(held, p.matched);
    const size_t emit = character_boundary_at_or_before(pending_, pending_.size() - held);
    out.text_to_emit = pending_.substr(0, emit);
    pending_.erase(0, emit);
    return out;
}

std::string StopStringMatcher::flush() {
    std::string rest = stopped() ? std::string() : std::move(pending_);
    clear_stream();
    return rest;
}

void StopStringMatcher::reset() {
    clear_stream();
    matched_index_.reset();
}

void StopStringMatcher::clear_stream() {
    pending_.clear();
    for (Pattern& p : patterns_) p.matched = 0;
}

}  // namespace powerhouse
