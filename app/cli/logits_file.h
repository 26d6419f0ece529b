// The logits file of `powerhouse-cli perplexity --save-logits`, read back by --kl-base: the
// token distributions of one model at every scored position of a perplexity run, so that
// another model (another quantization of the same weights) can be compared with it later
// without both being loaded at once.
//
// Layout (little-endian, as every machine Powerhouse builds for):
//   offset 0   char[8]  magic "PHLOGITS"
//          8   u32      version (1)
//         12   u32      value type: 0 = f32, 1 = f16
//         16   u32      n_vocab: values per row (the width of the model's logits)
//         20   u32      n_ctx: tokens per chunk
//         24   u32      n_chunks
//         28   u32      n_scored: rows per chunk (positions n_ctx/2 .. n_ctx-2, each predicting
//                       the token after it)
//         32   u64      vocab_hash: FNV-1a 64 of the tokenizer's token texts (vocab_hash()),
//                       so that a file of another vocabulary is refused
//         40   u64      data_offset: where the rows start (a multiple of 64)
//         48   i32[n_chunks * n_ctx]  the tokens of every chunk as evaluated (BOS already in
//                       place of a chunk's first token where the model asks for one)
//   data_offset         n_chunks * n_scored rows of n_vocab values, chunk-major
//
// A row holds log-probabilities, log softmax(logits): the logits less their log-sum-exp.
// Why not the raw logits: softmax ignores a shift, and after it the values of the likely
// tokens, which carry nearly all of a KL divergence, sit near 0, where f16 is finest
// (|log p| < 1: steps of 1/1024 or less; the 1/64 steps around |log p| = 16..32 belong to
// tokens of probability below 1e-7). f16 is the default: half the size of f32, about what
// llama.cpp's 16-bit log-probabilities take. Its rounding adds a KL divergence of about 1e-5
// (SmolLM2 against its own saved f16 log-probabilities: mean 7e-6, largest 3e-4), against
// 1e-3 to 1e-1 between quantizations of a model. f32 keeps the values exactly (a self-check
// against a saved file then gives KL 0) at twice the size.
//
// Writing streams one row at a time (into PATH.part, renamed when complete); reading maps
// the file and converts one row at a time, so that neither holds the file in memory.
//
// Thread-safety: a writer or reader is used by one thread at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "powerhouse/result.h"
#include "powerhouse/tokenizer.h"

namespace powerhouse::cli {

enum class LogitsType : uint32_t { f32 = 0, f16 = 1 };

struct LogitsFileInfo {
    LogitsType type = LogitsType::f16;
    uint32_t n_vocab = 0;
    uint32_t n_ctx = 0;
    uint32_t n_chunks = 0;
    uint32_t n_scored = 0;
    uint64_t vocab_hash = 0;
};

// FNV-1a 64 over every token's text followed by a 0 byte, in id order.
uint64_t vocab_hash(const Tokenizer& tokenizer);

class LogitsWriter {
public:
    // Creates PATH.part and writes the header and `tokens` (n_chunks * n_ctx ids).
    static Result<LogitsWriter> create(const std::filesystem::path& path, const LogitsFileInfo& info,
                                       std::span<const TokenId> tokens);
    LogitsWriter(LogitsWriter&&) noexcept;
    LogitsWriter& operator=(LogitsWriter&&) noexcept;
    ~LogitsWriter();  // an unfinished file is removed

    // The next row: n_vocab log-probabilities.
    Result<void> append(std::span<const float> log_probs);
    // Checks that every row was written, flushes and renames PATH.part to PATH.
    Result<void> finish();

private:
    struct State;
    explicit LogitsWriter(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

class LogitsReader {
public:
    static Result<LogitsReader> open(const std::filesystem::path& path);
    LogitsReader(LogitsReader&&) noexcept;
    LogitsReader& operator=(LogitsReader&&) noexcept;
    ~LogitsReader();

    const LogitsFileInfo& info() const;
    // The n_ctx tokens of chunk `chunk`, as evaluated.
    std::span<const TokenId> chunk_tokens(uint32_t chunk) const;
    // Row `row` (0 .. n_scored-1) of chunk `chunk`, converted to float into `out`.
    void read_row(uint32_t chunk, uint32_t row, std::vector<float>& out) const;
    // Tells the system that the pages of chunk `chunk` are no longer needed.
    void release_chunk(uint32_t chunk) const;

private:
    struct State;
    explicit LogitsReader(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

// Whether the file starts with the logits file's magic (else, for --kl-base, a GGUF model).
bool is_logits_file(const std::filesystem::path& path);

}  // namespace powerhouse::cli
