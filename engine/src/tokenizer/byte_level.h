// GPT-2's byte-level alphabet: byte-level BPE vocabularies spell every byte as a printable
// code point (bytes that are printable Latin-1 as themselves, the others as U+0100 + n,
// so " " is "Ġ" and "\n" is "Ċ"). Tokenization maps raw bytes into this alphabet before
// merging; detokenization maps token texts back to bytes.
//
// Thread-safety: pure functions over constant tables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace powerhouse {

// The code point that spells `byte`.
uint32_t gpt2_byte_cpt(uint8_t byte);
// Its UTF-8 text (one or two bytes).
std::string_view gpt2_byte_text(uint8_t byte);
// Appends the raw bytes a byte-level token text stands for. A code point outside the
// alphabet (seen only in malformed vocabularies) is kept as its own UTF-8.
void append_gpt2_decoded(std::string_view token_text, std::string& out);

}  // namespace powerhouse
