// The real models that synthetic files copy: hyper-parameters, the metadata keys their
// GGUF conversions carry, their tokenizer's layout and their chat template.
//
// Thread-safety: constant data only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/synth.h"

namespace powerhouse::synth {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

// bpe: byte-level BPE ("gpt2"); spm: SentencePiece BPE ("llama"); wpm: WordPiece ("bert"),
// laid out as bert-base-uncased (see synth/vocab.h).
enum class VocabKind { bpe, spm, wpm };

struct SpecialToken {
    std::string text;
    TokenType type = TokenType::control;
};

// Token ids, in order: `leading` specials, the regular tokens (BPE: 256 byte tokens then
// merged tokens; SPM: 256 <0xXX> byte tokens, merged pieces, then single characters),
// `trailing` specials, then padding up to n_vocab named by `pad_pattern`.
struct VocabSpec {
    VocabKind kind = VocabKind::bpe;
    std::string_view model;  // tokenizer.ggml.model
    std::string_view pre;    // tokenizer.ggml.pre
    uint32_t n_vocab = 0;
    uint32_t n_regular = 0;
    std::vector<SpecialToken> leading;
    std::vector<SpecialToken> trailing;
    // "{}" is replaced by the token id (pad_from_id) or by a counter from pad_first.
    std::string_view pad_pattern;
    bool pad_from_id = false;
    uint32_t pad_first = 0;
    TokenType pad_type = TokenType::unused;
    // Texts of the tokens whose ids the metadata names; empty when the model has none.
    std::string_view bos, eos, eot, eom, unk, pad;
    bool add_bos = false;
    bool add_space_prefix = true;  // SPM only; written when false
};

enum class ChatTemplateId {
    llama3,
    llama2,
    mistral,
    zephyr,
    smollm2,
    qwen25,
    qwen3,
    gemma3,
    gpt_oss_placeholder,
    phi3,
    smollm3,
    seed_oss,
    glm4,
    glm45,
    ministral3,
    granite3,
    none  // encoders (bert): no chat template is written
};

// Granite's four multipliers ({arch}.embedding_scale, residual_scale, attention.scale,
// logit_scale), as the converter copies them from config.json.
struct GraniteScales {
    float embedding = 0, residual = 0, attention = 0, logit = 0;
};

// GLM-4.5's mixture of experts beyond the routed experts (glm4moe).
struct Glm4MoeSpec {
    uint32_t lead_dense = 0;      // first_k_dense_replace: leading layers with a dense feed-forward
    uint32_t shared_experts = 0;  // n_shared_experts, each n_ff_expert wide (ffn_*_shexp)
    uint32_t nextn_layers = 0;    // num_nextn_predict_layers: blocks after the decoder's
    float weights_scale = 0;      // routed_scaling_factor
    bool weights_norm = false;    // norm_topk_prob
};

struct PresetSpec {
    SynthPreset info;
    VocabSpec vocab;
    ChatTemplateId chat_template = ChatTemplateId::llama3;
    bool llama3_rope_freqs = false;   // rope_freqs.weight: Llama 3.1's rope scaling factors
    bool qkv_bias = false;            // qwen2: attn_q/k/v.bias
    bool qk_norm = false;             // qwen3, gemma3: attn_q_norm / attn_k_norm
    bool sandwich_norms = false;      // gemma3: post_attention_norm, post_ffw_norm
    bool write_head_lengths = false;  // {arch}.attention.key_length / value_length
    bool write_rope_dims = false;     // {arch}.rope.dimension_count
    // {arch}.attention.sliding_window (gemma3; phi3's converter writes it, nothing applies it)
    uint32_t sliding_window = 0;
    float rope_scaling_linear = 0;    // {arch}.rope.scaling.type "linear" with this factor
    // {arch}.rope.scaling.type "yarn" with this factor over rope_scaling_original_context
    // (gpt-oss); 0: none. phi3 writes the original context without a scaling type.
    float rope_scaling_yarn = 0;
    uint32_t rope_scaling_original_context = 0;
    // gpt-oss's blocks: attn_q/k/v/output weights with biases, attn_sinks (one learned
    // logit per head), post_attention_norm as the feed-forward's input norm (no ffn_norm),
    // a router with a bias, and per-expert biases of the three expert projections.
    bool gpt_oss_blocks = false;
    bool is_70b = false;              // llama.cpp's quantizer gives attn_v more bits at 70B
    // {arch}.expert_feed_forward_length (qwen3moe; Mixtral's experts are n_ff wide and its
    // conversion does not write the key).
    bool write_expert_ff = false;
    // {arch}.rope.dimension_count when RoPE covers only part of each head (GLM: half); 0:
    // head_dim (when write_rope_dims).
    uint32_t rope_dims = 0;
    // phi3 LongRoPE (Phi-3.5-mini): rope_factors_short / rope_factors_long.weight, head_dim / 2
    // frequency divisors each, the short ones below rope.scaling.original_context_length;
    // rope.scaling.attn_factor scales cos and sin. Empty: none.
    std::vector<float> longrope_short, longrope_long;
    float rope_attn_factor = 0;
    bool fused_qkv = false;      // phi3: attn_qkv, the rows of Q, K and V in one matrix
    bool fused_gate_up = false;  // phi3, glm4: ffn_up holds the gate's rows, then up's (2 x n_ff)
    // seed_oss, glm4moe: the feed-forward's input norm is named post_attention_norm.
    bool ffn_norm_is_post_attention = false;
    // mistral3 (Ministral 3): YaRN's log multiplier (mscale_all_dim) and Llama 4's attention
    // temperature (llama_4_scaling_beta); 0: not written.
    float yarn_log_multiplier = 0;
    float attn_temperature_scale = 0;
    bool granite = false;  // granite, granitemoe: write `granite_scales`
    GraniteScales granite_scales;
    Glm4MoeSpec glm4moe;
    // BERT encoders (bge, all-MiniLM): token_types, position_embd and token_embd_norm, post-norm
    // layers with LayerNorm (attn_output_norm, layer_output_norm) and biases everywhere, no
    // output head; {arch}.attention.layer_norm_epsilon (rms_norm_eps holds it),
    // attention.causal false, pooling_type (1 mean, 2 CLS) and the two token types.
    bool bert = false;
    uint32_t pooling_type = 0;
    // nomic-bert (nomic-embed-text): a BERT encoder (bert is set too) without position_embd and
    // biases, Q, K and V in attn_qkv, a SwiGLU feed-forward (ffn_up, ffn_gate, ffn_down), and
    // {arch}.rope.freq_base for the RoPE on Q and K.
    bool nomic_bert = false;
};

const std::vector<PresetSpec>& preset_specs();
const PresetSpec* find_preset(std::string_view name);
// The preset `--arch` alone picks; nullptr for an unknown architecture.
const PresetSpec* default_preset(std::string_view architecture);

}  // namespace powerhouse::synth
