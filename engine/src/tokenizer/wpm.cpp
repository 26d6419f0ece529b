#include "tokenizer/wpm.h"

#include <algorithm>

#include "tokenizer/spm.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace powerhouse {
namespace {

// CJK ideographs, which BERT splits into words of one character; the ranges follow
// Hugging Face's BertPreTokenizer (including its 0x2B920 start of Extension E's range).
bool is_cjk_ideograph(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

}  // namespace

uint32_t nfd_first(uint32_t cpt) {
    if (cpt < 0xC0) return cpt;
    const auto* begin = wpm_tables::kNfdRanges;
    const auto* end = begin + wpm_tables::kNfdRangeCount;
    const auto* it =
        std::upper_bound(begin, end, cpt, [](uint32_t c, const wpm_tables::NfdRange& r) { return c < r.first; });
    if (it == begin) return cpt;
    const wpm_tables::NfdRange& r = *(it - 1);
    return cpt <= r.last ? r.value : cpt;
}

std::vector<std::string> wpm_words(std::string_view text, bool lowercase, bool strip_accents) {
    std::vector<uint32_t> cpts;
    cpts.reserve(text.size());
    decode_utf8_lenient(text, cpts);
    std::vector<std::string> words;
    std::string word;
    auto finish_word = [&] {
        if (!word.empty()) words.push_back(std::move(word));
        word.clear();
    };
    for (uint32_t cpt : cpts) {
        if (strip_accents) cpt = nfd_first(cpt);
        if (is_white_space(cpt)) {
            finish_word();
            continue;
        }
        const CategoryClass cls = category_class(cpt);
        if (cpt == 0 || cpt == kReplacementCharacter || cls == CategoryClass::other) continue;
        if (strip_accents && cls == CategoryClass::mark) continue;
        const uint32_t out = lowercase ? simple_lowercase(cpt) : cpt;
        if (cls == CategoryClass::punctuation || (cpt < 0x7F && cls == CategoryClass::symbol) ||
            is_cjk_ideograph(cpt)) {
            finish_word();
            append_utf8(word, out);
            finish_word();
        } else {
            append_utf8(word, out);
        }
    }
    finish_word();
    return words;
}

std::string wpm_clean_up_spaces(std::string_view text) {
    // Three passes over the bytes, each keeping the first byte and looking at the byte
    // before (and after) each later one, as the reference does them.
    std::string a;
    a.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        const char x = text[i];
        if (i > 0 && text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
        a += x;
    }
    std::string b;
    b.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        const char x = a[i];
        if (i > 0 && x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
            b.pop_back();  // the space before
            b += x;
            a[++i] = '\0';  // the space after is skipped, and is no longer a space before the next byte
            continue;
        }
        b += x;
    }
    std::string c;
    c.reserve(b.size());
    for (size_t i = 0; i < b.size(); ++i) {
        const char x = b[i];
        if (i > 0 && b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
            const char x1 = b[i + 1];
            const char x2 = i + 2 < b.size() ? b[i + 2] : '\0';
            if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) c.pop_back();
        }
        c += x;
    }
    return c;
}

void wpm_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) {
    std::string piece;
    for (const std::string& word : wpm_words(text, vocab.wpm_lowercase, vocab.wpm_strip_accents)) {
        const std::string marked = std::string(kSpmSpace) + word;
        const size_t n = marked.size();
        const size_t first = out.size();
        // Longest match first, from the left; any entry of the vocabulary may match, as in
        // the reference (special tokens cannot: their brackets are split off as punctuation).
        for (size_t i = 0; i < n;) {
            size_t j = std::min(n, i + vocab.max_token_bytes);
            std::optional<TokenId> id;
            for (; j > i; --j) {
                id = vocab.find(std::string_view(marked).substr(i, j - i));
                if (id) break;
            }
            if (!id) {
                out.resize(first);  // the word cannot be spelled: it is unknown as a whole
                break;
            }
            out.push_back(*id);
            i = j;
        }
        if (out.size() == first && vocab.unk) out.push_back(*vocab.unk);
    }
}

}  // namespace powerhouse
