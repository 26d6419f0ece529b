#include "tokenizer/pre_tokenizer.h"

#include <array>

#include "tokenizer/pre_tokenizer_stages.h"

namespace powerhouse {
namespace {

struct NamedPreTokenizer {
    std::string_view name;
    PreTokenizerSpec spec;
};

// Names as llama.cpp's converter writes them, grouped by the rules they share there. Only
// names whose rules are implemented (and tested) here are listed; anything else is refused
// rather than tokenized with rules that merely look similar.
constexpr std::array kPreTokenizers = {
    NamedPreTokenizer{"llama-bpe", {PreTokenizerKind::llama3, true, true}},
    NamedPreTokenizer{"llama3", {PreTokenizerKind::llama3, true, true}},
    NamedPreTokenizer{"llama-v3", {PreTokenizerKind::llama3, true, true}},
    NamedPreTokenizer{"falcon3", {PreTokenizerKind::llama3, true, true}},
    NamedPreTokenizer{"pixtral", {PreTokenizerKind::llama3, true, true}},
    NamedPreTokenizer{"dbrx", {PreTokenizerKind::llama3, false, false}},
    NamedPreTokenizer{"smaug-bpe", {PreTokenizerKind::llama3, false, false}},
    // GLM-4: the regex of dbrx and smaug-bpe (llama.cpp's CHATGLM4 type).
    NamedPreTokenizer{"glm4", {PreTokenizerKind::llama3, false, false}},
    NamedPreTokenizer{"chatglm-bpe", {PreTokenizerKind::llama3, false, false}},
    NamedPreTokenizer{"qwen2", {PreTokenizerKind::qwen2, false, false}},
    NamedPreTokenizer{"deepseek-r1-qwen", {PreTokenizerKind::qwen2, false, false}},
    NamedPreTokenizer{"stablelm2", {PreTokenizerKind::qwen2, false, false}},
    NamedPreTokenizer{"smollm", {PreTokenizerKind::starcoder, false, false}},
    NamedPreTokenizer{"starcoder", {PreTokenizerKind::starcoder, false, false}},
    NamedPreTokenizer{"refact", {PreTokenizerKind::starcoder, false, false}},
    NamedPreTokenizer{"command-r", {PreTokenizerKind::starcoder, false, false}},
    NamedPreTokenizer{"gpt-2", {PreTokenizerKind::gpt2, false, false}},
    NamedPreTokenizer{"phi-2", {PreTokenizerKind::gpt2, false, false}},
    NamedPreTokenizer{"mpt", {PreTokenizerKind::gpt2, false, false}},
    NamedPreTokenizer{"olmo", {PreTokenizerKind::gpt2, false, false}},
    NamedPreTokenizer{"falcon", {PreTokenizerKind::falcon, false, false}},
    NamedPreTokenizer{"deepseek-llm", {PreTokenizerKind::deepseek_llm, false, false}},
    NamedPreTokenizer{"default", {PreTokenizerKind::default_bpe, false, false}},
    // llama.cpp gives these four one type, and "minimax-m2" another type with the same regex
    // and flags; only "gpt-4o" (gpt-oss, GPT-4o-style vocabularies) is checked against it.
    NamedPreTokenizer{"gpt-4o", {PreTokenizerKind::gpt4o, false, false}},
    NamedPreTokenizer{"llama4", {PreTokenizerKind::gpt4o, false, false}},
    NamedPreTokenizer{"kanana2", {PreTokenizerKind::gpt4o, false, false}},
    NamedPreTokenizer{"talkie", {PreTokenizerKind::gpt4o, false, false}},
    NamedPreTokenizer{"minimax-m2", {PreTokenizerKind::gpt4o, false, false}},
    NamedPreTokenizer{"seed-coder", {PreTokenizerKind::seed_coder, false, false}},
    NamedPreTokenizer{"tekken", {PreTokenizerKind::tekken, true, true}},
};

// Out-of-piece positions read as "nothing": code point kNone, flags 0, exactly as the
// reference's bounded lookahead does.
constexpr uint32_t kNone = 0xFFFFFFFF;

struct Piece {
    const SplitText& text;
    size_t begin;
    size_t end;
    uint32_t cpt(size_t i) const { return i >= begin && i < end ? text.cpts[i] : kNone; }
    CodepointFlags flags(size_t i) const { return i >= begin && i < end ? text.flags[i] : CodepointFlags{}; }
    bool is_punct_like(CodepointFlags f) const {  // [^\s\p{L}\p{N}], and inside the piece
        return f.present() && !f.is_white_space() && !f.is_letter() && !f.is_number();
    }
};

// Emits pieces that end at successive positions.
class Emitter {
public:
    Emitter(size_t begin, PieceSink sink) : last_(begin), sink_(sink) {}
    size_t emit(size_t end) {
        const size_t len = end - last_;
        if (len > 0) sink_(last_, end);
        last_ = end;
        return len;
    }

private:
    size_t last_;
    PieceSink sink_;
};

bool is_cr_or_lf(uint32_t c) {
    return c == '\r' || c == '\n';
}

bool is_ascii_upper(uint32_t c) {
    return c >= 'A' && c <= 'Z';
}
bool is_ascii_lower(uint32_t c) {
    return c >= 'a' && c <= 'z';
}

// "\s*[\r\n]+|\s+(?!\S)|\s+" at pos: where the match ends (pos when pos is not white space).
size_t white_space_match_end(const Piece& p, size_t pos) {
    size_t n_space = 0;
    size_t end_of_last_newline = 0;
    while (p.flags(pos + n_space).is_white_space()) {
        if (is_cr_or_lf(p.cpt(pos + n_space))) end_of_last_newline = pos + n_space + 1;
        ++n_space;
    }
    if (end_of_last_newline > 0) return end_of_last_newline;                     // \s*[\r\n]+
    if (n_space > 1 && p.cpt(pos + n_space) != kNone) return pos + n_space - 1;  // \s+(?!\S)
    return pos + n_space;                                                        // \s+
}

// "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]" at pos: its length, or 0.
size_t ascii_contraction_length(const Piece& p, size_t pos) {
    if (p.cpt(pos) != '\'') return 0;
    const auto lower = [&](size_t i) {
        const uint32_t c = p.cpt(i);
        return is_ascii_upper(c) ? c + ('a' - 'A') : c;
    };
    const uint32_t next = lower(pos + 1);
    if (next == 's' || next == 't' || next == 'm' || next == 'd') return 2;
    const uint32_t next2 = lower(pos + 2);
    if ((next == 'r' && next2 == 'e') || (next == 'v' && next2 == 'e') || (next == 'l' && next2 == 'l')) return 3;
    return 0;
}

}  // namespace

std::optional<PreTokenizerSpec> pre_tokenizer_for_name(std::string_view name) {
    for (const auto& entry : kPreTokenizers) {
        if (entry.name == name) return entry.spec;
    }
    return std::nullopt;
}

std::string supported_pre_tokenizer_names() {
    std::string names;
    for (const auto& entry : kPreTokenizers) {
        if (!names.empty()) names += ", ";
        names += entry.name;
    }
    return names;
}

void split_gpt2(const SplitText& text, size_t begin, size_t end, PieceSink sink) {
    const Piece p{text, begin, end};
    Emitter out(begin, sink);
    size_t pos = begin;
    while (pos < end) {
        const uint32_t cpt = p.cpt(pos);
        const CodepointFlags flags = p.flags(pos);

        // 's|'t|'re|'ve|'m|'ll|'d (case-sensitive)
        if (cpt == '\'' && pos + 1 < end) {
            const uint32_t next = p.cpt(pos + 1);
            if (next == 's' || next == 't' || next == 'm' || next == 'd') {
                pos += out.emit(pos + 2);
                continue;
            }
            if (pos + 2 < end) {
                const uint32_t next2 = p.cpt(pos + 2);
                if ((next == 'r' && next2 == 'e') || (next == 'v' && next2 == 'e') || (next == 'l' && next2 == 'l')) {
                    pos += out.emit(pos + 3);
                    continue;
                }
            }
        }

        // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": the class is decided by the code point
        // after an optional leading space.
        const CodepointFlags f2 = cpt == ' ' ? p.flags(pos + 1) : flags;
        const bool letters = f2.is_letter();
        const bool numbers = f2.is_number();
        if (letters || numbers || p.is_punct_like(f2)) {
            const auto same_class = [&](CodepointFlags f) {
                return letters ? f.is_letter() : numbers ? f.is_number() : p.is_punct_like(f);
            };
            if (cpt == ' ') ++pos;
            while (same_class(p.flags(pos))) ++pos;
            out.emit(pos);
            continue;
        }

        size_t n_space = 0;
        while (p.flags(pos + n_space).is_white_space()) ++n_space;
        if (n_space > 1 && p.cpt(pos + n_space) != kNone) {
            // \s+(?!\S): leave the last space to prefix the next word
            pos += n_space - 1;
            out.emit(pos);
            continue;
        }
        if (n_space > 0) {
            pos += n_space;
            out.emit(pos);
            continue;
        }
        out.emit(++pos);  // unreachable for real code points; keeps the loop total
    }
}

void split_llama3(const SplitText& text, size_t begin, size_t end, size_t max_digits, PieceSink sink,
                  bool newlines_after_punctuation) {
    const Piece p{text, begin, end};
    Emitter out(begin, sink);
    size_t pos = begin;
    while (pos < end) {
        const uint32_t cpt = p.cpt(pos);
        const CodepointFlags flags = p.flags(pos);

        // (?i:'s|'t|'re|'ve|'m|'ll|'d)
        if (cpt == '\'' && pos + 1 < end) {
            const uint32_t next = simple_lowercase(p.cpt(pos + 1));
            if (next == 's' || next == 't' || next == 'm' || next == 'd') {
                pos += out.emit(pos + 2);
                continue;
            }
            if (pos + 2 < end) {
                const uint32_t next2 = simple_lowercase(p.cpt(pos + 2));
                if ((next == 'r' && next2 == 'e') || (next == 'v' && next2 == 'e') || (next == 'l' && next2 == 'l')) {
                    pos += out.emit(pos + 3);
                    continue;
                }
            }
        }

        // [^\r\n\p{L}\p{N}]?\p{L}+
        if (!is_cr_or_lf(cpt) && !flags.is_number()) {
            if (flags.is_letter() || p.flags(pos + 1).is_letter()) {
                ++pos;
                while (p.flags(pos).is_letter()) ++pos;
                out.emit(pos);
                continue;
            }
        }

        // \p{N}{1,max_digits}
        if (flags.is_number()) {
            size_t start = pos;
            while (p.flags(pos).is_number()) {
                if (++pos - start >= max_digits) {
                    out.emit(pos);
                    start = pos;
                }
            }
            out.emit(pos);
            continue;
        }

        // " ?[^\s\p{L}\p{N}]+[\r\n]*". The reference tests the first code point's presence
        // (not the one after the space), so a lone trailing space lands here too.
        CodepointFlags f2 = cpt == ' ' ? p.flags(pos + 1) : flags;
        if (!(f2.is_white_space() || f2.is_letter() || f2.is_number()) && flags.present()) {
            if (cpt == ' ') ++pos;
            while (p.is_punct_like(f2)) f2 = p.flags(++pos);
            while (newlines_after_punctuation && is_cr_or_lf(p.cpt(pos))) ++pos;
            out.emit(pos);
            continue;
        }

        const size_t space_end = white_space_match_end(p, pos);
        pos = space_end > pos ? space_end : pos + 1;  // pos + 1: unreachable for real code points
        out.emit(pos);
    }
}

// The o200k pre-tokenizer of GPT-4o and gpt-oss. Its tokenizer.json regex is
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//   |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//   |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// The reference (llama.cpp) does not run that one: it runs a rewrite in which the upper-case
// class is "(?=[\p{L}])([^a-z])", the lower-case class "(?=[\p{L}])([^A-Z])" and the
// contractions '[sS]|'[tT]|..., with std::regex (ECMAScript: backtracking, the first
// alternative that matches wins) over its collapsed text, where a non-ASCII letter is one
// "letter" byte. So, and so here:
//  - case is ASCII-only: A-Z are upper, a-z lower, and a non-ASCII letter is both;
//  - \p{M} is not part of a word: a combining mark is [^\s\p{L}\p{N}], like punctuation;
//  - the contractions are matched in ASCII.
// E.g. "HelloWORLD" -> "Hello" "WORLD", "DON'T" -> "DON'T", but "ÉCOLE" -> "É" "COLE" (the
// first alternative's [upper]* gives back "É" to its [lower]+, and wins).
// Mistral's tekken regex is the same without the two (?i:'s|...)? and with \p{N} for
// \p{N}{1,3}, and llama.cpp runs it rewritten the same way: "DON'T" -> "DON" "'" "T".
void split_gpt4o(const SplitText& text, size_t begin, size_t end, PieceSink sink, bool tekken) {
    const Piece p{text, begin, end};
    Emitter out(begin, sink);
    const auto upper = [&](size_t i) { return p.flags(i).is_letter() && !is_ascii_lower(p.cpt(i)); };
    const auto lower = [&](size_t i) { return p.flags(i).is_letter() && !is_ascii_upper(p.cpt(i)); };
    size_t pos = begin;
    while (pos < end) {
        const uint32_t cpt = p.cpt(pos);
        const CodepointFlags flags = p.flags(pos);

        // [^\r\n\p{L}\p{N}]?, then [upper]*[lower]+ or else [upper]+[lower]*, then a contraction
        const bool prefix = !is_cr_or_lf(cpt) && !flags.is_letter() && !flags.is_number();
        const size_t word = prefix ? pos + 1 : pos;
        if (p.flags(word).is_letter()) {
            size_t upper_end = word;
            while (upper(upper_end)) ++upper_end;
            size_t word_end = upper_end;  // the second alternative: ASCII capitals only
            if (lower(upper_end)) {       // an ASCII small letter follows the capitals
                while (lower(word_end)) ++word_end;
            } else {  // [upper]* backs off to the last non-ASCII letter, which [lower]+ takes
                for (size_t i = upper_end; i > word; --i) {
                    if (lower(i - 1)) {
                        word_end = i;
                        break;
                    }
                }
            }
            pos = word_end + (tekken ? 0 : ascii_contraction_length(p, word_end));
            out.emit(pos);
            continue;
        }

        // \p{N}{1,3} (tekken: \p{N})
        if (flags.is_number()) {
            const size_t max_digits = tekken ? 1 : 3;
            size_t n = 1;
            while (n < max_digits && p.flags(pos + n).is_number()) ++n;
            pos += n;
            out.emit(pos);
            continue;
        }

        // " ?[^\s\p{L}\p{N}]+[\r\n/]*"
        const size_t punct = cpt == ' ' && p.is_punct_like(p.flags(pos + 1)) ? pos + 1 : pos;
        if (p.is_punct_like(p.flags(punct))) {
            pos = punct + 1;
            while (p.is_punct_like(p.flags(pos))) ++pos;
            while (is_cr_or_lf(p.cpt(pos)) || p.cpt(pos) == '/') ++pos;
            out.emit(pos);
            continue;
        }

        const size_t space_end = white_space_match_end(p, pos);
        pos = space_end > pos ? space_end : pos + 1;  // pos + 1: unreachable for real code points
        out.emit(pos);
    }
}

namespace {

using Stage = void (*)(const SplitText&, size_t, size_t, PieceSink);

void stage_gpt2(const SplitText& t, size_t b, size_t e, PieceSink s) {
    split_gpt2(t, b, e, s);
}
void stage_llama3(const SplitText& t, size_t b, size_t e, PieceSink s) {
    split_llama3(t, b, e, 3, s);
}
void stage_qwen2(const SplitText& t, size_t b, size_t e, PieceSink s) {
    split_llama3(t, b, e, 1, s);
}
void stage_seed_coder(const SplitText& t, size_t b, size_t e, PieceSink s) {
    split_llama3(t, b, e, 1, s, /*newlines_after_punctuation=*/false);
}
void stage_gpt4o(const SplitText& t, size_t b, size_t e, PieceSink s) {
    split_gpt4o(t, b, e, s);
}
void stage_tekken(const SplitText& t, size_t b, size_t e, PieceSink s) {
    split_gpt4o(t, b, e, s, /*tekken=*/true);
}

// Runs stages[0] over [begin, end), feeding each piece to the remaining stages.
void run_stages(std::span<const Stage> stages, const SplitText& text, size_t begin, size_t end, PieceSink sink) {
    if (stages.empty()) {
        sink(begin, end);
        return;
    }
    auto next = [&](size_t b, size_t e) { run_stages(stages.subspan(1), text, b, e, sink); };
    stages.front()(text, begin, end, PieceSink(next));
}

}  // namespace

void pre_tokenize(PreTokenizerKind kind, const SplitText& text, PieceSink sink) {
    const size_t n = text.cpts.size();
    if (n == 0) return;
    static constexpr Stage kGpt2[] = {stage_gpt2};
    static constexpr Stage kLlama3[] = {stage_llama3};
    static constexpr Stage kQwen2[] = {stage_qwen2};
    static constexpr Stage kStarcoder[] = {split_each_number, stage_gpt2};
    static constexpr Stage kFalcon[] = {split_punctuation_runs_falcon, stage_gpt2, split_ascii_digit_triples};
    static constexpr Stage kDeepseekLlm[] = {split_each_cr_lf,           split_deepseek_letters,
                                             split_deepseek_punctuation, split_trailing_white_space,
                                             split_deepseek_cjk,         split_number_runs};
    static constexpr Stage kDefault[] = {split_punctuation_runs_default, stage_gpt2, split_number_runs,
                                         split_ascii_digit_triples};
    static constexpr Stage kGpt4o[] = {stage_gpt4o};
    static constexpr Stage kSeedCoder[] = {stage_seed_coder};
    static constexpr Stage kTekken[] = {stage_tekken};
    std::span<const Stage> stages;
    switch (kind) {
        case PreTokenizerKind::gpt2:
            stages = kGpt2;
            break;
        case PreTokenizerKind::llama3:
            stages = kLlama3;
            break;
        case PreTokenizerKind::qwen2:
            stages = kQwen2;
            break;
        case PreTokenizerKind::starcoder:
            stages = kStarcoder;
            break;
        case PreTokenizerKind::falcon:
            stages = kFalcon;
            break;
        case PreTokenizerKind::deepseek_llm:
            stages = kDeepseekLlm;
            break;
        case PreTokenizerKind::default_bpe:
            stages = kDefault;
            break;
        case PreTokenizerKind::gpt4o:
            stages = kGpt4o;
            break;
        case PreTokenizerKind::seed_coder:
            stages = kSeedCoder;
            break;
        case PreTokenizerKind::tekken:
            stages = kTekken;
            break;
    }
    run_stages(stages, text, 0, n, sink);
}

}  // namespace powerhouse
