// The pieces that decoder architectures share, written once: the embedding lookup, the
// attention block, the gated feed-forward and the output head. An architecture's build
// function (llama.cpp, qwen3.cpp, ...) strings them together in the order of its paper.
//
// Thread-safety: pure functions over a caller-owned StepProgram.
#pragma once

#include "arch/hparams.h"
#include "arch/step_program.h"
#include "gguf/gguf_model.h"
#include "powerhouse/result.h"

namespace powerhouse::arch {

// The `read` of an architecture whose only addition is NeoX RoPE (Qwen 2 and 3).
Result<void> read_neox_rope(const GgufModel& model, Hparams& hp);

// A program with the embedding lookup and the per-layer attention settings, its embedding
// multiplied by `embedding_scale` (1: not scaled).
StepProgram start_program(const Hparams& hp, float embedding_scale = 1.0f);

struct AttentionBlock {
    bool qkv_bias = false;    // attn_q/k/v.bias added after the projections (Qwen 2)
    bool qk_norm = false;     // each Q and K head RMS-normed before RoPE (attn_q_norm/attn_k_norm)
    bool post_norm = false;   // the output RMS-normed before the residual add (post_attention_norm)
    bool output_bias = false;  // attn_output.bias added after the output projection (gpt-oss)
    bool sinks = false;        // attn_sinks: a logit per head in the softmax (gpt-oss)
    // Q multiplied by this after RoPE, the scores then scaled by 1 (Gemma 3); 0: the scores
    // are scaled by 1/sqrt(head_dim).
    float query_scale = 0.0f;
    bool fused_qkv = false;  // Q, K and V from one tensor, attn_qkv (Phi-3), and with qkv_bias
                             // one bias, attn_qkv.bias (GLM-4)
    // The scores scaled by this instead of 1/sqrt(head_dim) (Granite's attention.scale); 0: not.
    float scores_scale = 0.0f;
    // The output multiplied by this before the residual add (Granite's residual_scale); 0: not.
    float residual_scale = 0.0f;
};

// Pre-norm rotary attention with grouped KV heads and its residual add:
// x += attn_output(attention(rope(q), rope(k), v)) over attn_norm(x).
void add_attention(StepProgram& p, const Hparams& hp, const AttentionBlock& block);

// The gate's activation: SwiGLU (silu) or GeGLU (gelu, tanh approximation).
enum class GateActivation { silu, gelu };

// Pre-norm gated feed-forward and its residual add:
// x += ffn_down(act(ffn_gate(n)) * ffn_up(n)) with n = ffn_norm(x); `post_norm` RMS-norms the
// output before the add (post_ffw_norm). `norm` names the pre-norm (Seed-OSS calls it
// post_attention_norm).
void add_gated_ffn(StepProgram& p, GateActivation activation, bool post_norm = false,
                   const char* norm = "blk.{}.ffn_norm.weight", float residual_scale = 0.0f);

// For the architectures llama.cpp reads with Q, K and V as one tensor or three, each with or
// without biases, and an optional output bias (SmolLM3, Seed-OSS, GLM-4, Mistral 3, Granite):
// sets hp.fused_qkv, hp.qkv_bias and hp.output_bias from layer 0, checks the fused tensors'
// shapes in every layer (check_fused_tensors; `fused_ffn`: ffn_up holds the gate too, as in
// GLM-4), and refuses feed-forward biases, which the step program has no place for.
Result<void> read_attention_layout(const GgufModel& model, Hparams& hp, bool fused_ffn = false);

// Checks the fused tensors of every layer against the hyper-parameters: attn_qkv (and its
// bias, where there is one) when hp.fused_qkv, and with `fused_ffn` ffn_up's 2 n_ff rows.
Result<void> check_fused_tensors(const GgufModel& model, const Hparams& hp, bool fused_ffn = true);

// The same with the gate and up projections in one tensor, ffn_up (2 n_ff rows: the gate's,
// then up's), as Phi-3 and GLM-4 store them; SwiGLU.
void add_fused_gated_ffn(StepProgram& p, const Hparams& hp, bool post_norm = false);

// The experts of hp.experts with the tensor names of llama.cpp's converter (ffn_*_exps),
// SwiGLU, and the given router: what Mixtral and Qwen3-MoE share. Architectures with other
// names or activations change the result.
MoeSpec routed_experts(const Hparams& hp, ExpertGating gating, bool normalize);

// Pre-norm routed feed-forward and its residual add: the router's scores are
// ffn_gate_inp(n) (plus ffn_gate_inp.bias with `router_bias`), n = ffn_norm(x), and
// x += moe(n). Every device computes all of the router's scores. `norm` names the pre-norm
// (gpt-oss calls it post_attention_norm); `residual_scale` multiplies the output before the
// add (Granite MoE; 0: not).
void add_moe_ffn(StepProgram& p, MoeSpec spec, bool router_bias = false, const char* norm = "blk.{}.ffn_norm.weight",
                 float residual_scale = 0.0f);

// The final norm and the output projection (the token embedding when the output is tied),
// the logits multiplied by `logit_scale` where it is not 1 (Granite divides them).
void add_output_head(StepProgram& p, const Hparams& hp, float logit_scale = 1.0f);

}  // namespace powerhouse::arch
