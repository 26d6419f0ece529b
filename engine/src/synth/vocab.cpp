#include "synth/vocab.h"

#include <fmt/format.h>

#include <map>
#include <unordered_set>

#include "synth/merge_learner.h"
#include "synth/random.h"
#include "tokenizer/spm.h"

namespace powerhouse::synth {
namespace {

constexpr std::string_view kGpt2Space = "\xC4\xA0";     // "Ġ" (U+0120), GPT-2's spelling of " "

// bert-base-uncased reserves ids 0..998: [PAD] at 0, [unused0..98] at 1..99, [UNK], [CLS],
// [SEP], [MASK] at 100..103, [unused99..993] at 104..998. Its characters start at 999.
constexpr uint32_t kBertHead = 999;
constexpr uint32_t kBertSpecialsAt = 100;

// Characters a WordPiece (uncased) vocabulary knows beyond printable lowercase ASCII: letters
// that survive accent stripping, Greek, Cyrillic, CJK and kana, and common punctuation and
// symbols. Anything else in a word makes the whole word [UNK], as in BERT.
constexpr std::string_view kWpmExtraChars[] = {
    "\u00a1", "\u00a7", "\u00b0", "\u00b7", "\u00bf", "\u00df", "\u00e6", "\u00f0", "\u00f8", "\u0111",
    "\u0142", "\u0153", "\u03b1", "\u03b2", "\u03b3", "\u03b4", "\u03bb", "\u03bc", "\u03c0", "\u03c3",
    "\u03c9", "\u0430", "\u0432", "\u0435", "\u0438", "\u043a", "\u043d", "\u043e", "\u0440", "\u0441",
    "\u0442", "\u044f", "\u2013", "\u2014", "\u2018", "\u2019", "\u201c", "\u201d", "\u2022", "\u2026",
    "\u20ac", "\u2192", "\u3001", "\u3002", "\u306e", "\u306f", "\u306b", "\u4e00", "\u4e2d", "\u4eba",
    "\u5927", "\u5b66", "\u6587", "\u65e5", "\u672c", "\u7684",
};

// Merges learned from the corpus before the filler takes over; the corpus runs out of
// pairs seen twice well before this.
constexpr size_t kMaxLearnedMerges = 4000;

// Characters an SPM model knows beyond printable ASCII: common Latin letters, punctuation
// and a few CJK and Cyrillic ones. Anything else falls back to byte tokens, as in real
// SPM vocabularies.
constexpr std::string_view kSpmExtraChars[] = {
    "é",  "è",  "ê",  "à",  "â",  "ç",  "ô",  "û",  "ü",  "ö",  "ä", "ß", "ñ", "í", "ó", "á", "ú",
    "ø",  "å",  "æ",  "œ",  "—",  "–",  "’",  "‘",  "“",  "”",  "…", "•", "€", "£", "°", "©", "→",
    "中", "文", "的", "一", "是", "日", "本", "の", "は", "に", "я", "и", "в", "а", "о", "е",
};

std::string utf8(uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
}

// GPT-2 keeps printable Latin-1 bytes as themselves and moves the others (controls,
// space, DEL, NBSP, soft hyphen) to U+0100 onwards, in byte order.
bool gpt2_keeps(uint8_t b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
}

// The UTF-8 characters of an ASCII-or-UTF-8 string.
std::vector<std::string_view> utf8_chars(std::string_view s) {
    std::vector<std::string_view> out;
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        out.push_back(s.substr(i, len));
        i += len;
    }
    return out;
}

struct Specials {
    std::vector<std::string> leading, tail;  // tail: trailing specials then padding
    std::vector<int32_t> leading_types, tail_types;
};

Result<Specials> layout_specials(const VocabSpec& spec) {
    const uint64_t fixed = spec.leading.size() + static_cast<uint64_t>(spec.n_regular) + spec.trailing.size();
    if (fixed > spec.n_vocab) {
        return make_error(ErrorCode::internal,
                          fmt::format("vocabulary layout needs {} ids, has {}", fixed, spec.n_vocab));
    }
    Specials s;
    for (const SpecialToken& t : spec.leading) {
        s.leading.push_back(t.text);
        s.leading_types.push_back(static_cast<int32_t>(t.type));
    }
    for (const SpecialToken& t : spec.trailing) {
        s.tail.push_back(t.text);
        s.tail_types.push_back(static_cast<int32_t>(t.type));
    }
    const auto first_pad_id = static_cast<uint32_t>(fixed);
    for (uint32_t id = first_pad_id; id < spec.n_vocab; ++id) {
        const uint32_t number = spec.pad_from_id ? id : spec.pad_first + (id - first_pad_id);
        s.tail.push_back(fmt::format(fmt::runtime(spec.pad_pattern), number));
        s.tail_types.push_back(static_cast<int32_t>(spec.pad_type));
    }
    return s;
}

std::vector<MergeTable::Word> corpus_words(const MergeTable& table, bool spm) {
    std::map<std::string, int64_t> counts;  // ordered: the words' order must not depend on hashing
    for (std::string& piece : split_pretokens(training_corpus())) counts[std::move(piece)] += 1;
    std::vector<MergeTable::Word> words;
    for (const auto& [piece, count] : counts) {
        MergeTable::Word w;
        w.count = count;
        bool known = true;
        if (spm) {
            std::string text = piece;
            if (!text.empty() && text[0] == ' ') text.replace(0, 1, kSpmSpace);
            for (std::string_view ch : utf8_chars(text)) {
                const int64_t id = table.find(ch);
                if (id < 0) {
                    known = false;  // whitespace: SPM pieces never hold it
                    break;
                }
                w.symbols.push_back(static_cast<uint32_t>(id));
            }
        } else {
            for (char c : piece)
                w.symbols.push_back(static_cast<uint32_t>(table.find(gpt2_byte_text(static_cast<uint8_t>(c)))));
        }
        if (known && w.symbols.size() > 1) words.push_back(std::move(w));
    }
    return words;
}

void append(SynthVocab& v, const std::vector<std::string>& texts, const std::vector<int32_t>& types) {
    v.tokens.insert(v.tokens.end(), texts.begin(), texts.end());
    v.token_types.insert(v.token_types.end(), types.begin(), types.end());
}

Result<SynthVocab> build_bpe(const VocabSpec& spec, const Specials& specials,
                             std::unordered_set<std::string> reserved) {
    // Byte tokens in code point order, as GPT-2's vocabulary numbers them ("!" is 0).
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) {
        if (gpt2_keeps(static_cast<uint8_t>(b))) bytes.push_back(gpt2_byte_text(static_cast<uint8_t>(b)));
    }
    for (int b = 0; b < 256; ++b) {
        if (!gpt2_keeps(static_cast<uint8_t>(b))) bytes.push_back(gpt2_byte_text(static_cast<uint8_t>(b)));
    }
    MergeTable table(std::move(bytes), std::string(kGpt2Space), std::move(reserved));
    table.learn(corpus_words(table, false), kMaxLearnedMerges);
    PH_TRY(table.fill(spec.n_regular, mix_key(0x6270655F766F6361ull, spec.n_vocab)));

    SynthVocab v;
    v.tokens.reserve(spec.n_vocab);
    v.token_types.reserve(spec.n_vocab);
    append(v, specials.leading, specials.leading_types);
    append(v, table.symbols(), std::vector<int32_t>(table.symbols().size(), static_cast<int32_t>(TokenType::normal)));
    append(v, specials.tail, specials.tail_types);
    v.merges.reserve(table.merges().size());
    for (const auto& [left, right] : table.merges()) {
        v.merges.push_back(table.symbols()[left] + " " + table.symbols()[right]);
    }
    return v;
}

Result<SynthVocab> build_spm(const VocabSpec& spec, const Specials& specials,
                             std::unordered_set<std::string> reserved) {
    std::vector<std::string> byte_tokens;
    for (int b = 0; b < 256; ++b) byte_tokens.push_back(fmt::format("<0x{:02X}>", b));
    for (const std::string& t : byte_tokens) reserved.insert(t);

    std::vector<std::string> chars = {std::string(kSpmSpace)};
    for (char c = 33; c < 127; ++c) chars.emplace_back(1, c);
    for (std::string_view c : kSpmExtraChars) chars.emplace_back(c);
    const size_t n_chars = chars.size();
    if (spec.n_regular < 256 + n_chars) return make_error(ErrorCode::internal, "SPM vocabulary too small");

    MergeTable table(std::move(chars), std::string(kSpmSpace), std::move(reserved));
    table.learn(corpus_words(table, true), kMaxLearnedMerges);
    PH_TRY(table.fill(spec.n_regular - 256, mix_key(0x73706D5F766F6361ull, spec.n_vocab)));

    SynthVocab v;
    v.tokens.reserve(spec.n_vocab);
    v.token_types.reserve(spec.n_vocab);
    v.scores.reserve(spec.n_vocab);
    append(v, specials.leading, specials.leading_types);
    append(v, byte_tokens, std::vector<int32_t>(256, static_cast<int32_t>(TokenType::byte)));
    v.scores.assign(v.tokens.size(), 0.0f);
    // Pieces by merge order, then the single characters, as in Llama's vocabulary; the
    // score orders the merges (the SPM tokenizer merges the highest-scoring pair first).
    const std::vector<std::string>& symbols = table.symbols();
    float score = 0.0f;
    for (size_t i = n_chars; i < symbols.size(); ++i) {
        v.tokens.push_back(symbols[i]);
        v.token_types.push_back(static_cast<int32_t>(TokenType::normal));
        v.scores.push_back(score);
        score -= 1.0f;
    }
    for (size_t i = 0; i < n_chars; ++i) {
        v.tokens.push_back(symbols[i]);
        v.token_types.push_back(static_cast<int32_t>(TokenType::normal));
        v.scores.push_back(score);
        score -= 1.0f;
    }
    append(v, specials.tail, specials.tail_types);
    v.scores.resize(v.tokens.size(), 0.0f);
    return v;
}

bool is_ascii_alnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// The corpus's words as WordPiece sees them: lowercase letter and digit runs (other
// characters split words), spelled as a word-start character ("▁" + c) then continuations.
std::vector<MergeTable::Word> wpm_corpus_words(const MergeTable& table) {
    std::map<std::string, int64_t> counts;  // ordered: the words' order must not depend on hashing
    std::string word;
    for (char c : training_corpus()) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (is_ascii_alnum(c)) {
            word += c;
        } else if (!word.empty()) {
            counts[word] += 1;
            word.clear();
        }
    }
    if (!word.empty()) counts[word] += 1;
    std::vector<MergeTable::Word> words;
    for (const auto& [text, count] : counts) {
        if (text.size() < 2) continue;
        MergeTable::Word w;
        w.count = count;
        w.symbols.push_back(static_cast<uint32_t>(table.find(std::string(kSpmSpace) + text[0])));
        for (size_t i = 1; i < text.size(); ++i) {
            w.symbols.push_back(static_cast<uint32_t>(table.find(std::string(1, text[i]))));
        }
        words.push_back(std::move(w));
    }
    return words;
}

// WordPiece as llama.cpp's converter writes it: special tokens ([PAD], [CLS], ...) as they
// are, word-start pieces with "▁" (U+2581) in front, "##" continuations without the "##".
Result<SynthVocab> build_wpm(const VocabSpec& spec, std::unordered_set<std::string> reserved) {
    if (spec.leading.empty() || spec.leading.size() > kBertHead - kBertSpecialsAt + 1) {
        return make_error(ErrorCode::internal, "WordPiece vocabulary needs [PAD] and its other specials in `leading`");
    }
    const uint64_t fixed = kBertHead + static_cast<uint64_t>(spec.n_regular) + spec.trailing.size();
    if (fixed > spec.n_vocab) {
        return make_error(ErrorCode::internal,
                          fmt::format("vocabulary layout needs {} ids, has {}", fixed, spec.n_vocab));
    }
    SynthVocab v;
    v.tokens.reserve(spec.n_vocab);
    v.token_types.reserve(spec.n_vocab);
    auto add = [&v](std::string text, TokenType type) {
        v.tokens.push_back(std::move(text));
        v.token_types.push_back(static_cast<int32_t>(type));
    };
    // The reserved head: leading[0] at 0, leading[1..] from id 100, "[unusedN]" elsewhere.
    // The [unusedN] entries are ordinary vocabulary entries (not added tokens), so the
    // converter types them normal and gives them the word-start mark.
    uint32_t unused = 0;
    for (uint32_t id = 0; id < kBertHead; ++id) {
        const bool special = id == 0 || (id >= kBertSpecialsAt && id - kBertSpecialsAt + 1 < spec.leading.size());
        if (special) {
            const SpecialToken& t = spec.leading[id == 0 ? 0 : id - kBertSpecialsAt + 1];
            add(t.text, t.type);
        } else {
            std::string text = fmt::format("{}[unused{}]", kSpmSpace, unused++);
            reserved.insert(text);
            add(std::move(text), TokenType::normal);
        }
    }

    // Single characters: word-start forms (punctuation, digits, letters, the extras), then
    // the merged pieces, then the continuation forms of letters and digits, as BERT orders
    // its vocabulary (its "##x" single characters come last).
    std::vector<std::string> chars;
    std::vector<std::string> continuations;
    for (char c = 33; c < 127; ++c) {
        if (c >= 'A' && c <= 'Z') continue;  // uncased
        chars.push_back(std::string(kSpmSpace) + c);
        if (is_ascii_alnum(c)) continuations.emplace_back(1, c);
    }
    for (std::string_view c : kWpmExtraChars) {
        chars.push_back(std::string(kSpmSpace) + std::string(c));
        // Letters continue words; punctuation is split off by the pre-tokenizer.
        if (static_cast<unsigned char>(c[0]) != 0xE2 && static_cast<unsigned char>(c[0]) != 0xE3 &&
            static_cast<unsigned char>(c[0]) != 0xC2) {
            continuations.emplace_back(c);
        }
    }
    const size_t n_starts = chars.size();
    const size_t n_chars = n_starts + continuations.size();
    if (spec.n_regular < n_chars) return make_error(ErrorCode::internal, "WordPiece vocabulary too small");
    chars.insert(chars.end(), continuations.begin(), continuations.end());

    MergeTable table(std::move(chars), std::string(kSpmSpace), std::move(reserved));
    table.learn(wpm_corpus_words(table), kMaxLearnedMerges);
    PH_TRY(table.fill(spec.n_regular, mix_key(0x77706D5F766F6361ull, spec.n_regular)));
    const std::vector<std::string>& symbols = table.symbols();
    for (size_t i = 0; i < n_starts; ++i) add(symbols[i], TokenType::normal);
    for (size_t i = n_chars; i < symbols.size(); ++i) add(symbols[i], TokenType::normal);
    for (size_t i = n_starts; i < n_chars; ++i) add(symbols[i], TokenType::normal);

    for (const SpecialToken& t : spec.trailing) add(t.text, t.type);
    for (auto id = static_cast<uint32_t>(v.tokens.size()); id < spec.n_vocab; ++id) {
        const uint32_t number = spec.pad_from_id ? id : spec.pad_first + (id - static_cast<uint32_t>(fixed));
        add(fmt::format(fmt::runtime(spec.pad_pattern), number), spec.pad_type);
    }
    return v;
}

}  // namespace

std::string gpt2_byte_text(uint8_t byte) {
    if (gpt2_keeps(byte)) return utf8(byte);
    uint32_t moved = 0;  // bytes below this one that also move
    for (int b = 0; b < byte; ++b) moved += gpt2_keeps(static_cast<uint8_t>(b)) ? 0 : 1;
    return utf8(256 + moved);
}

Result<SynthVocab> build_vocab(const VocabSpec& spec) {
    if (spec.kind == VocabKind::wpm) {
        std::unordered_set<std::string> reserved;
        for (const auto* list : {&spec.leading, &spec.trailing}) {
            for (const SpecialToken& t : *list) {
                if (!reserved.insert(t.text).second) {
                    return make_error(ErrorCode::internal, fmt::format("special token '{}' appears twice", t.text));
                }
            }
        }
        Result<SynthVocab> vocab = build_wpm(spec, std::move(reserved));
        if (vocab && vocab->tokens.size() != spec.n_vocab) {
            return make_error(ErrorCode::internal, fmt::format("vocabulary has {} tokens instead of {}",
                                                               vocab->tokens.size(), spec.n_vocab));
        }
        return vocab;
    }
    Result<Specials> specials = layout_specials(spec);
    if (!specials) return std::move(specials).error();
    std::unordered_set<std::string> reserved;
    for (const auto* list : {&specials->leading, &specials->tail}) {
        for (const std::string& t : *list) {
            if (!reserved.insert(t).second) {
                return make_error(ErrorCode::internal, fmt::format("special token '{}' appears twice", t));
            }
        }
    }
    Result<SynthVocab> vocab = spec.kind == VocabKind::bpe ? build_bpe(spec, *specials, std::move(reserved))
                                                           : build_spm(spec, *specials, std::move(reserved));
    if (vocab && vocab->tokens.size() != spec.n_vocab) {
        return make_error(ErrorCode::internal,
                          fmt::format("vocabulary has {} tokens instead of {}", vocab->tokens.size(), spec.n_vocab));
    }
    return vocab;
}

std::optional<uint32_t> find_token(const SynthVocab& vocab, std::string_view text) {
    for (size_t i = 0; i < vocab.tokens.size(); ++i) {
        if (vocab.tokens[i] == text) return static_cast<uint32_t>(i);
    }
    return std::nullopt;
}

}  // namespace powerhouse::synth
