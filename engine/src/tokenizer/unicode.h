// Unicode properties the pre-tokenizers ask about: the general category class of a code
// point (\p{L}, \p{N}, \p{P}, ... in the reference regexes), White_Space (\s), and simple
// lowercase mapping (for the case-insensitive contractions "(?i:'s|'t|...)").
//
// The data is Unicode 15.1, the version llama.cpp's tables use, so that text is split
// exactly as the reference splits it; see scripts/fixtures/make_unicode_tables.py.
//
// Thread-safety: pure functions over constant tables.
#pragma once

#include <cstdint>

namespace powerhouse {

// A general category reduced to its first letter; Cn (unassigned) is kept apart from the
// other C* categories because the reference does.
enum class CategoryClass : uint8_t {
    unassigned = 0,   // Cn, and anything above U+10FFFF
    number = 1,       // N*
    letter = 2,       // L*
    separator = 3,    // Z*
    mark = 4,         // M*
    punctuation = 5,  // P*
    symbol = 6,       // S*
    other = 7,        // Cc, Cf, Cs, Co
};

CategoryClass category_class(uint32_t cpt);
bool is_white_space(uint32_t cpt);
uint32_t simple_lowercase(uint32_t cpt);

// A code point's class and White_Space bit packed in a byte, so that a splitter can keep one
// byte per code point of its input. Zero means "no code point" (outside the piece).
struct CodepointFlags {
    static constexpr uint8_t kPresent = 0x80;
    static constexpr uint8_t kWhiteSpace = 0x40;
    static constexpr uint8_t kClassMask = 0x07;

    uint8_t bits = 0;

    static CodepointFlags of(uint32_t cpt) {
        CodepointFlags f;
        f.bits = static_cast<uint8_t>(kPresent | static_cast<uint8_t>(category_class(cpt)) |
                                      (powerhouse::is_white_space(cpt) ? kWhiteSpace : 0));
        return f;
    }
    bool present() const { return bits != 0; }
    CategoryClass category() const { return static_cast<CategoryClass>(bits & kClassMask); }
    bool is_letter() const { return present() && category() == CategoryClass::letter; }
    bool is_number() const { return present() && category() == CategoryClass::number; }
    bool is_punctuation() const { return present() && category() == CategoryClass::punctuation; }
    bool is_white_space() const { return (bits & kWhiteSpace) != 0; }
};

}  // namespace powerhouse
