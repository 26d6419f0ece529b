// Tokenizers of GGUF models: text to token ids and back.
//
// Three families, chosen by the file's tokenizer.ggml.model:
//  - "llama": SentencePiece (Llama 2, Mistral, Phi-3, Gemma): merges by score, byte-fallback
//    tokens (<0xE2>), spaces spelled U+2581 and a space put before the text.
//  - "gpt2": byte-level BPE (Llama 3, Qwen 2/2.5/3, SmolLM, GPT-2, DeepSeek, Falcon,
//    StarCoder): a pre-tokenizer named by tokenizer.ggml.pre splits the text into words,
//    then merges by rank. An unknown pre-tokenizer is refused, never guessed.
//  - "bert": WordPiece (BERT encoders: bge, all-MiniLM, nomic-embed-text): lowercased,
//    accents stripped, split at spaces and punctuation, each word the longest vocabulary
//    pieces from the left or [UNK] whole; add_special makes [CLS] ... [SEP].
// Token ids equal llama.cpp's for the same file and text (tests check a multilingual corpus).
//
// Special tokens (control tokens such as <|im_start|>) are recognised in text only where the
// caller says so: chat templates produce text with specials, users type text without, and
// a user typing "<|im_start|>" gets the plain-text tokens for those characters. Tokens the
// vocabulary calls "user-defined" (e.g. DeepSeek's "ü", Qwen's "<tool_call>") are always
// recognised, as the models' own tokenizers do; they are ordinary text, not control.
//
// Thread-safety: a Tokenizer is immutable after load and cheap to copy (copies share the
// data); use one from any number of threads. A StreamingDetokenizer is per stream, one thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/result.h"

namespace powerhouse {

using TokenId = int32_t;

// A piece of text to tokenize and whether special tokens in it are recognised.
struct TextSegment {
    std::string_view text;
    bool parse_special = false;
};

struct TokenizerImpl;  // internal

class Tokenizer {
public:
    // Reads the tokenizer of a GGUF file (a vocabulary-only file works too).
    static Result<Tokenizer> load(const std::filesystem::path& gguf_file);
    // Wraps internal data; use load() (or the engine's tokenizer_from_metadata()).
    explicit Tokenizer(std::shared_ptr<const TokenizerImpl> impl);

    // Token ids of `text`. add_special: add the tokens the model asks for around a prompt
    // (BOS if tokenizer.ggml.add_bos_token, EOS if add_eos_token; WordPiece: always BOS =
    // [CLS] and the separator [SEP]), as llama.cpp's add_special does. Never fails: invalid
    // UTF-8 is tokenized as U+FFFD (BPE), as byte-fallback tokens (SentencePiece) or dropped
    // (WordPiece), exactly as the reference does.
    std::vector<TokenId> tokenize(std::string_view text, bool add_special, bool parse_special) const;
    // The segments are tokenized as one text (adjacent plain text is merged before
    // splitting), but special tokens are recognised only inside segments that allow it.
    std::vector<TokenId> tokenize(std::span<const TextSegment> segments, bool add_special) const;

    // Text to show for ids, as valid UTF-8 (broken sequences become U+FFFD). Control tokens
    // are rendered when render_special, else skipped. SentencePiece: the space the tokenizer
    // put before the text is dropped (from the first token, after a leading BOS). WordPiece:
    // every word starts with a space (the first too) and, as llama.cpp does, the spaces before
    // "?!.," and around apostrophes are cleaned up (StreamingDetokenizer leaves them).
    std::string detokenize(std::span<const TokenId> ids, bool render_special = false) const;

    // The raw bytes one token stands for (may be part of a UTF-8 character: "<0xE2>" is one
    // byte). Control tokens give their text when render_special, else nothing.
    std::string token_piece(TokenId id, bool render_special) const;
    // The token's text as stored in the vocabulary ("Ġthe", "▁the", "<0x0A>", "<|im_end|>");
    // empty for ids out of range.
    std::string_view token_text(TokenId id) const;

    int32_t n_vocab() const;
    bool is_valid(TokenId id) const { return id >= 0 && id < n_vocab(); }
    std::optional<TokenId> bos() const;
    std::optional<TokenId> eos() const;
    std::optional<TokenId> eot() const;
    std::optional<TokenId> eom() const;
    // End of generation: eos, eot, eom and the turn/text terminators the vocabulary has
    // (<|im_end|>, <end_of_turn>, <|eot_id|>, <|endoftext|>, ...), as llama.cpp infers them.
    bool is_eog(TokenId id) const;
    // Control (or unknown) token: produced only from special-token parsing, hidden by default.
    bool is_control(TokenId id) const;
    bool adds_bos() const;  // tokenizer.ggml.add_bos_token (or the model family's default)
    bool adds_eos() const;
    bool is_sentencepiece() const;
    std::string_view model_name() const;          // tokenizer.ggml.model: "llama", "gpt2" or "bert"
    std::string_view pre_tokenizer_name() const;  // tokenizer.ggml.pre ("" when absent)

    const TokenizerImpl& impl() const { return *impl_; }

private:
    std::shared_ptr<const TokenizerImpl> impl_;
};

struct DetokenizeOptions {
    bool render_special = false;
    // SentencePiece with add_space_prefix: drop the space the tokenizer put before the text.
    // Set false when the ids continue earlier text (the tokens a model generates after a prompt).
    bool strip_leading_space = true;
};

// Turns token ids arriving one at a time into text as soon as it is complete: never emits
// part of a UTF-8 character (a character split across byte tokens waits for its last byte);
// bytes that cannot become a character are emitted as U+FFFD as soon as that is certain.
// The concatenation of feed() results and flush() equals detokenize() of all the ids
// (WordPiece: before detokenize()'s clean-up of spaces).
class StreamingDetokenizer {
public:
    explicit StreamingDetokenizer(Tokenizer tokenizer, DetokenizeOptions options = {});

    // The text that `id` completes (often empty or one token's text). Out-of-range ids add nothing.
    std::string feed(TokenId id);
    // Ends the stream: an incomplete character becomes U+FFFD. The detokenizer is then ready
    // for a new stream (the leading-space rule applies again).
    std::string flush();
    // True when bytes are held back waiting for the rest of a character.
    bool has_pending() const;

private:
    Tokenizer tokenizer_;
    DetokenizeOptions options_;
    std::string pending_;  // held bytes of an incomplete character (at most 3)
    size_t n_fed_ = 0;
    bool strip_pending_ = true;
};

}  // namespace powerhouse
