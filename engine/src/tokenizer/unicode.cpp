#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

#include "tokenizer/unicode_tables.h"

namespace powerhouse {
namespace {

using unicode_tables::kCategoryRunCount;
using unicode_tables::kCategoryRuns;

// ASCII is most of most text: answer it from a small table built from the same data.
struct AsciiClasses {
    std::array<CategoryClass, 128> classes{};
    AsciiClasses() {
        size_t run = 0;
        for (uint32_t c = 0; c < 128; ++c) {
            while (run + 1 < kCategoryRunCount && (kCategoryRuns[run + 1] >> 4) <= c) ++run;
            classes[c] = static_cast<CategoryClass>(kCategoryRuns[run] & 0xF);
        }
    }
};

}  // namespace

CategoryClass category_class(uint32_t cpt) {
    static const AsciiClasses ascii;
    if (cpt < 128) return ascii.classes[cpt];
    if (cpt > 0x10FFFF) return CategoryClass::unassigned;
    // The last run whose first code point is <= cpt.
    const uint32_t key = (cpt << 4) | 0xF;
    const uint32_t* end = kCategoryRuns + kCategoryRunCount;
    const uint32_t* it = std::upper_bound(kCategoryRuns, end, key);
    return static_cast<CategoryClass>(*(it - 1) & 0xF);
}

bool is_white_space(uint32_t cpt) {
    if (cpt < 128) return cpt == ' ' || (cpt >= 0x09 && cpt <= 0x0D);
    const uint32_t* end = unicode_tables::kWhiteSpace + unicode_tables::kWhiteSpaceCount;
    return std::binary_search(unicode_tables::kWhiteSpace, end, cpt);
}

uint32_t simple_lowercase(uint32_t cpt) {
    if (cpt < 128) return (cpt >= 'A' && cpt <= 'Z') ? cpt + 32 : cpt;
    const auto* begin = unicode_tables::kLowercaseRuns;
    const auto* end = begin + unicode_tables::kLowercaseRunCount;
    // The last run starting at or before cpt.
    const auto* it = std::upper_bound(begin, end, cpt,
                                      [](uint32_t c, const unicode_tables::LowercaseRun& r) { return c < r.first; });
    if (it == begin) return cpt;
    const auto& run = *(it - 1);
    if (cpt > run.last || (cpt - run.first) % run.stride != 0) return cpt;
    return static_cast<uint32_t>(static_cast<int64_t>(cpt) + run.delta);
}

}  // namespace powerhouse
