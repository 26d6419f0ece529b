// Synthetic vocabularies: working tokenizers with exactly a real model's vocabulary size,
// special tokens at their real ids, and the structure of the real tokenizer type.
//  - Byte-level BPE (tokenizer.ggml.model "gpt2"): the 256 byte tokens in GPT-2's
//    byte-to-unicode spelling, then merged tokens, each made by the merge rule "a b" that
//    precedes it in tokenizer.ggml.merges.
//  - SPM ("llama"): the 256 byte-fallback tokens <0x00>..<0xFF>, merged pieces with "▁"
//    (U+2581) word-start marks scored by merge order (higher = merged earlier), then the
//    single characters.
//  - WordPiece ("bert"), as bert-base-uncased (bge, all-MiniLM, nomic-embed-text) after
//    llama.cpp's conversion: ids 0..998 reserved ([PAD] = leading[0] at 0, leading[1..] =
//    [UNK], [CLS], [SEP], [MASK] from id 100, "▁[unusedN]" elsewhere), then `n_regular`
//    tokens: word-start single characters "▁x", pieces learned from the corpus ("▁the",
//    "ing"), filler words, and last the continuation characters ("x", BERT's "##x").
//    Word starts carry "▁" (U+2581); continuations are written without BERT's "##".
// Building a 262k-token vocabulary takes a few tens of milliseconds.
//
// Thread-safety: pure functions over value types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/result.h"
#include "synth/presets.h"

namespace powerhouse::synth {

struct SynthVocab {
    std::vector<std::string> tokens;   // [n_vocab]
    std::vector<int32_t> token_types;  // [n_vocab] TokenType values
    std::vector<float> scores;         // [n_vocab] SPM only
    std::vector<std::string> merges;   // BPE only: "left right", in rank order
};

Result<SynthVocab> build_vocab(const VocabSpec& spec);

// The id of a token text; nullopt when absent.
std::optional<uint32_t> find_token(const SynthVocab& vocab, std::string_view text);

// GPT-2's printable spelling of a byte in byte-level BPE tokens (" " is "Ġ", "\n" is "Ċ").
std::string gpt2_byte_text(uint8_t byte);

}  // namespace powerhouse::synth
