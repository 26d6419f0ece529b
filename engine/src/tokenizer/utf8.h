// UTF-8 for the tokenizers, in the two flavours they need:
//  - decode_utf8_lenient: what tokenization sees. It follows llama.cpp's decoder so that
//    token ids match the reference on any input: each byte that does not start a complete
//    sequence becomes U+FFFD (and decoding resumes at the next byte); overlong forms and
//    surrogates are decoded to their value, not rejected. Values above U+10FFFF (which
//    crash the reference) are treated as invalid too.
//  - Utf8Sanitizer: what detokenization emits. Strictly well-formed UTF-8 out, each maximal
//    ill-formed subpart replaced by one U+FFFD (the Unicode recommendation; Python's
//    errors="replace" does the same); bytes that may still become a character are held back.
//
// Thread-safety: free functions are pure; a Utf8Sanitizer is a plain value (one per thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace powerhouse {

inline constexpr uint32_t kReplacementCharacter = 0xFFFD;

// Decodes the code point at text[pos] as described above and advances pos past it.
uint32_t next_codepoint_lenient(std::string_view text, size_t& pos);
// Appends the code points of `text` to `out`.
void decode_utf8_lenient(std::string_view text, std::vector<uint32_t>& out);

// Appends the UTF-8 encoding of `cpt` (any value up to 0x10FFFF, surrogates included, the way
// the reference re-encodes what it decoded). Larger values append U+FFFD.
void append_utf8(std::string& out, uint32_t cpt);

// Bytes in the sequence started by `lead`, judged by its high bits only (1 for a stray
// continuation byte, 4 for 0xF8..0xFF): the reference's rule for splitting text into
// characters before SentencePiece merges.
inline size_t utf8_length_from_lead(uint8_t lead) {
    static constexpr uint8_t kLength[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLength[lead >> 4];
}

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or values > U+10FFFF).
bool is_valid_utf8(std::string_view text);

// Turns a byte stream delivered in arbitrary pieces into well-formed UTF-8 text.
class Utf8Sanitizer {
public:
    // Appends to `out` every character that `bytes` completes; holds back an incomplete tail.
    void push(std::string_view bytes, std::string& out);
    // Ends the stream: a held incomplete sequence becomes one U+FFFD.
    void finish(std::string& out);
    bool has_pending() const { return pending_len_ > 0; }
    // The held bytes; push()ing them into a fresh sanitizer restores this state.
    std::string_view pending_bytes() const { return {reinterpret_cast<const char*>(pending_), pending_len_}; }

private:
    uint8_t pending_[4] = {};
    size_t pending_len_ = 0;  // bytes of a valid but incomplete sequence
    size_t needed_ = 0;       // total length of that sequence
};

// Convenience: the whole of `bytes` sanitized.
std::string sanitize_utf8(std::string_view bytes);

}  // namespace powerhouse
