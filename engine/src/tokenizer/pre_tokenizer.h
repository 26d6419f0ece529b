// Pre-tokenizers of byte-level BPE vocabularies: split text into the "words" that BPE merges
// never cross, as the regexes of the models' tokenizer.json do (Llama 3, Qwen 2, GPT-2,
// StarCoder/SmolLM, Falcon, DeepSeek LLM, GPT-4o/gpt-oss). The regexes need Unicode classes std::regex
// does not have, so each is written out by hand, matching the reference (llama.cpp) on
// every input, including its handling of piece boundaries.
//
// A pre-tokenizer is a list of stages. Each stage divides every piece the previous stage
// produced into consecutive sub-pieces (the regex's matches and the text between them).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tokenizer/unicode.h"

namespace powerhouse {

enum class PreTokenizerKind {
    gpt2,          // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
    llama3,        // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|...
    qwen2,         // as llama3 with \p{N} one digit at a time
    starcoder,     // \p{N} isolated, then gpt2 (StarCoder, SmolLM)
    falcon,        // ASCII/Unicode punctuation runs, gpt2, then runs of three ASCII digits
    deepseek_llm,  // DeepSeek LLM's six-regex sequence
    default_bpe,   // llama.cpp's "default": punctuation runs, gpt2, \p{N}+, three ASCII digits
    gpt4o,         // o200k (GPT-4o, gpt-oss): cased words with contractions, \p{N}{1,3}, ...
    seed_coder,    // as qwen2 without the [\r\n]* after punctuation (Seed-Coder, Seed-OSS)
    tekken,        // as gpt4o without the contractions, \p{N} one digit at a time (Mistral Nemo,
                   // Mistral Small 3, Devstral, Magistral, Ministral)
};

// How a `tokenizer.ggml.pre` name is tokenized.
struct PreTokenizerSpec {
    PreTokenizerKind kind = PreTokenizerKind::gpt2;
    bool ignore_merges = false;    // a word that is itself a token is emitted whole (Llama 3)
    bool add_bos_default = false;  // before tokenizer.ggml.add_bos_token overrides it
};

// nullopt for names whose rules Powerhouse does not implement.
std::optional<PreTokenizerSpec> pre_tokenizer_for_name(std::string_view name);
// "llama-bpe, qwen2, ..." for error messages.
std::string supported_pre_tokenizer_names();

// The input of a splitter: code points and their flags, both [n].
struct SplitText {
    std::span<const uint32_t> cpts;
    std::span<const CodepointFlags> flags;
};

// A cheap callable reference for the per-piece callback (no allocation per call).
class PieceSink {
public:
    template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, PieceSink>)
        PieceSink(F& f)  // NOLINT(google-explicit-constructor): used as a parameter adaptor
        : object_(&f), call_([](void* o, size_t b, size_t e) { (*static_cast<F*>(o))(b, e); }) {}
    void operator()(size_t begin, size_t end) const { call_(object_, begin, end); }

private:
    void* object_;
    void (*call_)(void*, size_t, size_t);
};

// Calls `sink(begin, end)` for each word of text[0, n), in order, never with begin == end.
void pre_tokenize(PreTokenizerKind kind, const SplitText& text, PieceSink sink);

// The stages, exposed for tests. Each splits [begin, end) and reports consecutive pieces
// covering it; code points outside [begin, end) are invisible to it.
void split_gpt2(const SplitText& text, size_t begin, size_t end, PieceSink sink);
void split_llama3(const SplitText& text, size_t begin, size_t end, size_t max_digits, PieceSink sink,
                  bool newlines_after_punctuation = true);
// The o200k regex as the reference runs it (see pre_tokenizer.cpp): case is ASCII-only.
// `tekken`: Mistral's variant of it, without the contractions and with one digit at a time.
void split_gpt4o(const SplitText& text, size_t begin, size_t end, PieceSink sink, bool tekken = false);

}  // namespace powerhouse
