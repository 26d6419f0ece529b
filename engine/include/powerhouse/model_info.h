// What a model file is, read from its GGUF metadata and tensor index without loading any
// weights: architecture, shape, tokenizer, tensor types, and the memory it needs at a
// given context length. Used by `powerhouse-cli info`, the model library and the UI.
//
// Thread-safety: free functions over value types; safe from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "powerhouse/device_types.h"
#include "powerhouse/result.h"

namespace powerhouse {

struct TensorTypeUsage {
    std::string type;  // "Q4_K", "F32", ...
    uint64_t tensors = 0;
    uint64_t elements = 0;
    uint64_t bytes = 0;
};

struct ModelInfo {
    std::filesystem::path path;
    std::vector<std::filesystem::path> files;  // more than one for a split model
    uint64_t file_size = 0;                    // all parts
    uint32_t gguf_version = 0;

    std::string name;          // general.name, may be empty
    // The naming fields newer converters write beside general.name (which they make from
    // these, often unreadably): "smollm2", "135M", "Instruct"; each may be empty.
    std::string basename;      // general.basename
    std::string size_label;    // general.size_label
    std::string finetune;      // general.finetune
    std::string architecture;  // general.architecture: "llama", "qwen2", ...
    std::string file_type;     // "Q4_K_M", "Q4_1", ... (general.file_type, else the dominant type)
    uint64_t n_params = 0;     // elements of all tensors
    uint64_t weight_bytes = 0; // bytes of all tensor data
    uint64_t n_tensors = 0;

    uint32_t n_layer = 0;        // the decoder's layers
    uint32_t n_layer_nextn = 0;  // multi-token prediction blocks after them (not run)
    uint32_t n_head = 0;
    uint32_t n_head_kv = 0;
    uint32_t n_embd = 0;
    uint32_t n_ff = 0;
    uint32_t head_dim_k = 0;  // per-head key size (key_length, else n_embd / n_head)
    uint32_t head_dim_v = 0;
    uint32_t n_ctx_train = 0;
    uint32_t n_expert = 0;       // mixture of experts: experts per layer (0: a dense model)
    uint32_t n_expert_used = 0;  // experts each token uses
    uint32_t n_ff_expert = 0;    // each expert's feed-forward width
    // How an embedding model pools its rows ({arch}.pooling_type: "mean", "cls", "last";
    // "" when the file does not say, as for chat models).
    std::string pooling;
    // An encoder (general.architecture "bert"): it makes embeddings (Model::embed), not text,
    // so the engine refuses to generate with it.
    bool embedding_only = false;

    uint32_t n_vocab = 0;
    std::string tokenizer_model;  // tokenizer.ggml.model: "gpt2", "llama", ...
    std::string tokenizer_pre;    // tokenizer.ggml.pre
    bool has_chat_template = false;

    std::vector<TensorTypeUsage> tensor_types;  // most bytes first
};

struct MemoryEstimate {
    uint32_t n_ctx = 0;
    KvCacheType kv_type = KvCacheType::f16;
    uint64_t weight_bytes = 0;
    uint64_t kv_cache_bytes = 0;  // keys and values of every layer for n_ctx positions
    uint64_t total_bytes() const { return weight_bytes + kv_cache_bytes; }
};

// Reads the GGUF header and tensor index (split models included). Fails with a clear
// message for files that are not valid GGUF; an unknown architecture is not an error here.
Result<ModelInfo> inspect_model(const std::filesystem::path& path);

// Whether the engine can run a valid GGUF model: its architecture and hyper-parameters
// (RoPE variant, soft-capping, ...). The error names what is not supported and what is.
Result<void> check_runnable(const std::filesystem::path& path);

MemoryEstimate estimate_memory(const ModelInfo& info, uint32_t n_ctx, KvCacheType kv_type = KvCacheType::f16);

// llama.cpp's names for general.file_type values ("MOSTLY_Q4_K_M" -> "Q4_K_M").
std::string file_type_name(uint32_t file_type);

}  // namespace powerhouse
