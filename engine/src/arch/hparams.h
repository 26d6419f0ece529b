// The hyper-parameters of a decoder-only transformer, read from GGUF metadata
// (`{arch}.block_count`, `{arch}.attention.head_count`, ...). read_hparams reads what every
// decoder has, then lets the model's architecture (architecture.h, one file each) read what
// it adds: its RoPE layout, sliding-window layers, scales. What an architecture always has
// (Qwen 2's QKV bias, Qwen 3's Q/K norm) is not a field here but part of its step program.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_model.h"
#include "powerhouse/result.h"

namespace powerhouse::arch {

// How RoPE pairs the dimensions of a head: `normal` rotates (x[2i], x[2i+1]) (llama's
// GGUF layout, whose Q/K weights the converter permuted), `neox` rotates (x[i], x[i+d/2]).
enum class RopeLayout { normal, neox };

// What differs between the layers of one model: Gemma 3 alternates sliding-window layers
// (their own RoPE base, no RoPE scaling) with global ones.
struct LayerAttention {
    uint32_t window = 0;           // a query sees the last `window` positions, itself included; 0: all
    float rope_base = 10000.0f;
    float rope_freq_scale = 1.0f;  // positions multiplied by this (linear scaling)
    bool rope = true;              // false: the layer's Q and K are not rotated (SmolLM3's NoPE layers)
};

inline constexpr uint32_t kMaxExperts = 512;  // as llama.cpp

// A mixture-of-experts model's routed feed-forward: `count` experts of `n_ff` columns each
// per layer, of which each token uses `used`.
struct Experts {
    uint32_t count = 0;  // 0: a dense model
    uint32_t used = 0;
    uint32_t n_ff = 0;
    uint32_t n_ff_shared = 0;  // the shared expert's width (GLM-4.5); 0: none
    // GLM-4.5's routing, as its file says: leading layers with a dense feed-forward instead,
    // sigmoid (else softmax) gating, the chosen weights normalised and then scaled.
    uint32_t lead_dense = 0;
    bool sigmoid = false;
    bool normalize = false;
    float weights_scale = 0.0f;
};

// YaRN RoPE scaling (rope.scaling.type "yarn"): each pair's angle mixes the interpolated
// (scaled) and the original one by a ramp over the pairs between corr_low and corr_high, and
// cos and sin are multiplied by attn_factor * (1 + 0.1 ln(1 / freq_scale)), as ggml does.
struct Yarn {
    float ext_factor = 0.0f;  // 0: no YaRN (linear scaling only)
    float attn_factor = 1.0f;
    float beta_fast = 32.0f, beta_slow = 1.0f;
    uint32_t orig_ctx = 0;  // rope.scaling.original_context_length
};

struct Hparams {
    std::string architecture;  // general.architecture
    uint32_t n_layer = 0;
    uint32_t n_embd = 0;
    uint32_t n_head = 0;
    uint32_t n_head_kv = 0;
    uint32_t head_dim = 0;  // per-head size of Q, K and V
    uint32_t n_ff = 0;
    uint32_t n_vocab = 0;
    uint32_t n_ctx_train = 0;
    float rms_eps = 1e-5f;
    // Encoders (BERT): LayerNorm's epsilon (attention.layer_norm_epsilon); attention that is
    // not causal (attention.causal false); no language-model head, so the model makes
    // embeddings and no text.
    float norm_eps = 1e-12f;
    bool causal = true;
    bool embedding_only = false;

    RopeLayout rope_layout = RopeLayout::normal;
    uint32_t rope_dims = 0;  // dimensions of a head that RoPE rotates (the first rope_dims)
    float rope_base = 10000.0f;
    float rope_freq_scale = 1.0f;  // linear scaling: positions multiplied by this
    Yarn yarn;

    bool tied_output = false;   // no output.weight: the token embedding is the output matrix
    bool has_rope_freqs = false;                   // rope_freqs divides each frequency (Llama 3.1 scaling, LongRoPE)
    std::string rope_freqs = "rope_freqs.weight";  // the tensor of those factors
    // LongRoPE (Phi-3): the factors for contexts longer than rope_freqs_long_above tokens
    // (empty: one set for every context). use_context_length picks the set.
    std::string rope_freqs_long;
    uint32_t rope_freqs_long_above = 0;
    // Phi-3: Q, K and V in one tensor (blk.N.attn_qkv.weight, rows in that order).
    bool fused_qkv = false;
    // Biases the file may or may not have (SmolLM3, Seed-OSS): attn_q/k/v.bias, attn_output.bias.
    bool qkv_bias = false;
    bool output_bias = false;
    bool qk_norm = false;  // attn_q_norm/attn_k_norm, where the file has them (GLM-4.5)

    // Gemma 3: the embedding is multiplied by embedding_scale (sqrt(n_embd)); Q is multiplied
    // by query_scale after RoPE and the attention itself then scales by 1 (0: no separate Q
    // scale, attention scales by 1/sqrt(head_dim)).
    float embedding_scale = 1.0f;
    float query_scale = 0.0f;

    // Llama 4's attention temperature (Mistral 3: attention.temperature_scale): the queries of
    // position p are multiplied by 1 + attn_temperature * ln(floor(p / attn_temperature_length)
    // + 1) after RoPE, 1 within the first attn_temperature_length positions. 0: none.
    float attn_temperature = 0.0f;
    uint32_t attn_temperature_length = 0;

    // Granite's multipliers: each layer's attention and feed-forward outputs times
    // residual_scale before the residual add (0: none), the scores times attention_scale
    // instead of 1/sqrt(head_dim) (0: not), the logits times logit_scale (1 / the file's
    // logit_scale).
    float residual_scale = 0.0f;
    float attention_scale = 0.0f;
    float logit_scale = 1.0f;

    // One entry per layer (n_layer entries): window, RoPE base and scale of that layer.
    std::vector<LayerAttention> layers;

    Experts experts;
    bool is_moe() const { return experts.count > 0; }
};

// Reads and validates the hyper-parameters. Fails for architectures the engine cannot run
// (named in the message with those it can) and for missing or inconsistent values.
Result<Hparams> read_hparams(const GgufModel& model);

// Settles what depends on the context length the model runs with: LongRoPE's long factors
// above their context, the short ones up to it (as llama.cpp chooses them).
void use_context_length(Hparams& hp, uint32_t n_ctx);

// The multi-token prediction blocks (GLM-4.5's nextn_predict_layers) among block_count's
// `blocks`: they follow the decoder's layers, and nothing runs them. An error when they
// would leave the decoder no layer.
Result<uint32_t> prediction_blocks(const GgufMetadata& meta, const std::string& arch, uint32_t blocks);

// The metadata value `key`, a count in 1..2^24; an error naming the key otherwise.
Result<uint32_t> required_u32(const GgufMetadata& meta, const std::string& key);

// Which layers use the sliding window: `key` (attention.sliding_window_pattern) is either one
// flag per layer or a period n, where every n-th layer (the last of each group of n) is
// global and the others slide (n = 0: all slide); without it, `default_period` (Gemma 3: 6,
// gpt-oss: 2, as in llama.cpp).
Result<std::vector<bool>> sliding_layers(const GgufMetadata& meta, const std::string& key, uint32_t n_layer,
                                         uint32_t default_period);

}  // namespace powerhouse::arch
