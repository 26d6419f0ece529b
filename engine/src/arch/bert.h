// What the BERT family of encoders shares (bert.cpp, nomic_bert.cpp): the reading of
// LayerNorm's epsilon and causality, and one post-norm encoder layer written with the
// differences between the family's members as options.
//
// Thread-safety: pure functions.
#pragma once

#include "arch/hparams.h"
#include "arch/step_program.h"
#include "gguf/gguf_model.h"
#include "powerhouse/result.h"

namespace powerhouse::arch {

// How one member of the family differs from BERT's own layout.
struct EncoderLayout {
    // true (bert): a learned row of position_embd added to each token's input, no RoPE.
    // false (nomic-bert): no position table; RoPE (hp.rope_layout) on Q and K instead.
    bool position_table = true;
    // Q, K and V from one tensor, attn_qkv (Q's rows, then K's, then V's), else attn_q/k/v.
    bool fused_qkv = false;
    // A bias after every projection (attn_q/k/v, attn_output, ffn_up, ffn_down); none when false.
    bool biases = true;
    // The feed-forward: true, SwiGLU, silu(ffn_gate(x)) * ffn_up(x) (nomic-bert); false,
    // gelu(ffn_up(x)) (bert).
    bool swiglu = false;
};

// What every member reads: {arch}.attention.layer_norm_epsilon (required, as llama.cpp
// requires it), attention.causal (false unless the file says true), embedding_only, as many
// KV heads as query heads, and the input's tensors token_types and token_embd_norm.
Result<void> read_encoder(const GgufModel& model, Hparams& hp);

// The step program, as llama.cpp's bert graph runs the family: the token's row plus token type
// 0's (plus its position's, with position_table), LayerNorm (token_embd_norm); then per layer
// Q, K and V (RoPE on Q and K without position_table), attention over the whole sequence (not
// causal unless hp.causal), the output projection, the residual add, LayerNorm
// (attn_output_norm); the feed-forward, the residual add, LayerNorm (layer_output_norm). No
// head: the last layer's rows are the output.
StepProgram build_encoder(const Hparams& hp, const EncoderLayout& layout);

}  // namespace powerhouse::arch
