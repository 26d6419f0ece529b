// Synthetic models: complete GGUF files with random weights and the real shapes,
// hyper-parameters, tokenizer and chat template of well-known models (`powerhouse-cli
// synth`). They feed speed benchmarks, which do not depend on weight values, and tests
// that run one file on two backends and compare the results. So the weights are sized
// like a real initialisation (matrices ~N(0, 0.02^2), norm weights ~1, all finite) and
// activations stay bounded through every layer; the vocabulary is a working tokenizer of
// exactly the real size.
//
// Files are deterministic: the same options (seed included) give the same bytes, whatever
// the thread count. The vocabulary and template do not depend on the seed.
//
// Thread-safety: free functions over value types. synthesize_model runs worker threads of
// its own and calls the progress callback on the calling thread only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/plan.h"
#include "powerhouse/result.h"

namespace powerhouse {

// The shape of a real model that `--like NAME` reproduces.
struct SynthPreset {
    std::string name;          // "llama3-8b": the --like value
    std::string architecture;  // general.architecture: "llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "gpt-oss"
    std::string model_name;    // "Llama 3.1 8B Instruct"
    bool is_default = false;   // picked when only the architecture is given
    uint32_t n_layer = 0;
    uint32_t n_embd = 0;
    uint32_t n_ff = 0;
    uint32_t n_head = 0;
    uint32_t n_head_kv = 0;
    uint32_t head_dim = 0;
    uint32_t n_vocab = 0;
    uint32_t n_ctx_train = 0;
    float rope_freq_base = 0.0f;
    float rms_norm_eps = 0.0f;
    bool tied_embeddings = false;  // no output.weight: the output reuses token_embd
    // Mixture of experts (0 experts: a dense model). Every layer's feed-forward is then
    // n_expert experts of n_ff_expert columns (ffn_{gate,up,down}_exps), of which each
    // token uses n_expert_used, chosen by the router ffn_gate_inp; n_ff is still written
    // as feed_forward_length, as the real conversions do.
    uint32_t n_expert = 0;
    uint32_t n_expert_used = 0;
    uint32_t n_ff_expert = 0;
    std::string tokenizer_model;  // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SPM)
    std::string tokenizer_pre;    // tokenizer.ggml.pre: "llama-bpe", "qwen2", "smollm", "default", "gpt-4o"
};

// A file type (`--type`): llama.cpp's mixture of tensor types for that LLAMA_FTYPE.
struct SynthType {
    std::string name;         // "q4_k_m"
    uint32_t file_type = 0;   // general.file_type (llama.cpp's LLAMA_FTYPE numbering)
    std::string description;  // which tensors get which type
};

std::vector<SynthPreset> synth_presets();
std::vector<SynthType> synth_types();

struct SynthOptions {
    std::string architecture;      // empty: the preset's; else must match it
    std::string preset;            // empty: the architecture's default (llama3-8b without either)
    std::string type = "q4_k_m";   // a SynthType name
    std::filesystem::path output;  // written as <output>.part, then renamed
    bool overwrite = false;        // replace an existing file at `output`
    uint32_t n_layer = 0;          // 0: the preset's block count (fewer makes small test models)
    uint32_t n_ctx = 0;            // 0: the preset's training context
    uint64_t seed = 0;
    unsigned threads = 0;  // 0: std::thread::hardware_concurrency()
    // Quantized tensors of more than this many weights are assembled from a pool of this
    // many weights' worth of blocks, each quantized from fresh random data, picked at
    // random for every position. The reference K-quantizer costs ~1 us per weight, an hour
    // for an 8B model; the pool keeps that to a minute while every row stays distinct and
    // every block is a real quantizer output. 0: quantize every row (slow, exact).
    uint32_t pool_weights = 1u << 18;
};

struct SynthTensor {
    std::string name;           // "blk.0.attn_q.weight"
    std::string type;           // "Q4_K", "F32", ...
    std::vector<int64_t> dims;  // GGUF order: dims[0] is the row length
    uint64_t bytes = 0;
};

// Everything about a file except its weights, known before writing it.
struct SynthPlan {
    SynthPreset preset;  // with the --layers / --ctx overrides applied
    SynthType type;
    std::vector<SynthTensor> tensors;  // in file order
    uint64_t n_params = 0;
    uint64_t file_bytes = 0;
};

struct SynthResult {
    SynthPlan plan;
    std::filesystem::path path;
    double seconds = 0.0;
};

struct SynthProgress {
    uint64_t bytes_done = 0;
    uint64_t bytes_total = 0;
    size_t tensor_index = 0;  // the tensor being written
    size_t n_tensors = 0;
    std::string_view tensor_name;  // valid during the call only; empty once all is written
};
// Called on the calling thread, often (many times a second); return false to cancel.
using SynthProgressFn = std::function<bool(const SynthProgress&)>;

// Validates the options and lays the file out, without writing anything.
Result<SynthPlan> plan_synth_model(const SynthOptions& options);

// The shape the planner plans for the file that `plan` lays out: what a real model of that
// preset and type needs, known without the file (the welcome view plans its suggestions so).
Result<ModelShape> synth_model_shape(const SynthPlan& plan);
// The same shape from the options alone: the tensors are laid out, the tokenizer is not.
// Building a real vocabulary (150k to 260k token strings and their merges) costs tens of MB
// and most of the time of plan_synth_model(), and no part of a shape depends on it.
Result<ModelShape> synth_model_shape(const SynthOptions& options);

// Writes the file. Errors: invalid_argument (unknown preset or type, an architecture that
// is not the preset's, an existing file without `overwrite`), io, cancelled.
Result<SynthResult> synthesize_model(const SynthOptions& options, const SynthProgressFn& progress = {});

}  // namespace powerhouse
