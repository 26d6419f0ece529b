// Qwen 3 (dense): Llama's layer, NeoX RoPE, and each Q and K head RMS-normed before RoPE
// (attn_q_norm, attn_k_norm); no QKV bias.
#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

StepProgram build_qwen3(const Hparams& hp) {
    StepProgram p = start_program(hp);
    add_attention(p, hp, AttentionBlock{.qk_norm = true});
    add_gated_ffn(p, GateActivation::silu);
    add_output_head(p, hp);
    return p;
}

}  // namespace

const Architecture kQwen3{"qwen3", read_neox_rope, build_qwen3};

}  // namespace powerhouse::arch
