#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace powerhouse {
namespace {

struct ByteLevelAlphabet {
    std::array<uint32_t, 256> cpt_of_byte{};
    std::array<std::string, 256> text_of_byte;
    std::array<int16_t, 512> byte_of_cpt{};  // every alphabet code point is below U+0200

    ByteLevelAlphabet() {
        byte_of_cpt.fill(-1);
        uint32_t next_extra = 256;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            cpt_of_byte[b] = printable ? b : next_extra++;
        }
        for (uint32_t b = 0; b < 256; ++b) {
            append_utf8(text_of_byte[b], cpt_of_byte[b]);
            byte_of_cpt[cpt_of_byte[b]] = static_cast<int16_t>(b);
        }
    }
};

const ByteLevelAlphabet& alphabet() {
    static const ByteLevelAlphabet table;
    return table;
}

}  // namespace

uint32_t gpt2_byte_cpt(uint8_t byte) {
    return alphabet().cpt_of_byte[byte];
}

std::string_view gpt2_byte_text(uint8_t byte) {
    return alphabet().text_of_byte[byte];
}

void append_gpt2_decoded(std::string_view token_text, std::string& out) {
    const ByteLevelAlphabet& a = alphabet();
    size_t pos = 0;
    while (pos < token_text.size()) {
        const uint32_t c = next_codepoint_lenient(token_text, pos);
        const int16_t b = c < a.byte_of_cpt.size() ? a.byte_of_cpt[c] : int16_t{-1};
        if (b >= 0) {
            out += static_cast<char>(b);
        } else {
            append_utf8(out, c);
        }
    }
}

}  // namespace powerhouse
