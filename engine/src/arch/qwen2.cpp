// Qwen 2 and 2.5: Llama's layer with biases on the Q, K and V projections and RoPE in the
// NeoX layout (x[i] paired with x[i + d/2]).
#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

StepProgram build_qwen2(const Hparams& hp) {
    StepProgram p = start_program(hp);
    add_attention(p, hp, AttentionBlock{.qkv_bias = true});
    add_gated_ffn(p, GateActivation::silu);
    add_output_head(p, hp);
    return p;
}

}  // namespace

const Architecture kQwen2{"qwen2", read_neox_rope, build_qwen2};

}  // namespace powerhouse::arch
