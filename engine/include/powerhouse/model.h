// A model loaded for inference: the GGUF file mapped into memory, its tokenizer and chat
// template, and a backend that runs it with a KV cache for up to n_ctx positions.
//
// Supported today: the llama family (Llama 2/3, Mistral, SmolLM2, TinyLlama), Qwen 2 and
// Qwen 3, on the CPU, with weights in F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the
// K-quants. Anything else is refused at load with a message that says what is missing.
//
// Thread-safety: a Model is used by one thread at a time (the engine's); it may be moved
// between threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "powerhouse/chat_template.h"
#include "powerhouse/model_info.h"
#include "powerhouse/result.h"
#include "powerhouse/tokenizer.h"

namespace powerhouse {

struct ModelOptions {
    uint32_t n_ctx = 4096;  // positions in the KV cache; capped at the model's training length
    int n_threads = 0;      // 0: all cores
    uint32_t n_batch = 64;  // prompt tokens processed together
    // How the KV cache stores keys and values (model_info.h): F16, as llama.cpp's default,
    // or Q8_0, as llama.cpp's -ctk q8_0 -ctv q8_0: half the memory, logits within the
    // quantization noise. The CPU backend refuses F32.
    KvCacheType kv_cache_type = KvCacheType::f16;
};

class Model {
public:
    static Result<Model> load(const std::filesystem::path& path, const ModelOptions& options = {});

    Model(Model&&) noexcept;
    Model& operator=(Model&&) noexcept;
    ~Model();

    const Tokenizer& tokenizer() const;
    const ModelTemplateInfo& template_info() const;
    const std::string& architecture() const;
    uint32_t n_vocab() const;
    uint32_t n_ctx() const;

    // Runs `tokens` after the n_past() positions already in the cache and returns the
    // logits of the last one (valid until the next call). Fails, with nothing changed, when
    // the context would overflow or an id is out of range.
    Result<std::span<const float>> decode(std::span<const TokenId> tokens);
    uint32_t n_past() const;
    // Forgets cached positions n and later, to reuse a common prompt prefix.
    void truncate(uint32_t n);
    // Bytes held by the KV cache (keys and values of every layer, n_ctx positions).
    size_t kv_cache_bytes() const;

    struct Impl;

private:
    explicit Model(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace powerhouse
