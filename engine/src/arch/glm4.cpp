// GLM-4 (general.architecture "glm4": GLM-4-9B-0414, GLM-4-32B-0414, GLM-Z1): Llama's layer with
// Q, K and V biases, RoPE over part of each head (rope.dimension_count, half of it in the real
// models) in the normal pair layout, the gate and up projections in one tensor (ffn_up), and
// sandwich norms: the attention's and the feed-forward's outputs are RMS-normed
// (post_attention_norm, post_ffw_norm) before each residual add. Q, K and V may come as one
// tensor (attn_qkv) with one bias.
#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

Result<void> read_glm4(const GgufModel& model, Hparams& hp) {
    if (hp.is_moe()) {
        return make_error(ErrorCode::format,
                          "a glm4 model with experts: GLM-4.5's files say glm4moe as their "
                          "architecture");
    }
    return read_attention_layout(model, hp, /*fused_ffn=*/true);
}

StepProgram build_glm4(const Hparams& hp) {
    StepProgram p = start_program(hp);
    add_attention(p, hp, AttentionBlock{.qkv_bias = hp.qkv_bias, .post_norm = true, .fused_qkv = hp.fused_qkv});
    add_fused_gated_ffn(p, hp, /*post_norm=*/true);
    add_output_head(p, hp);
    return p;
}

}  // namespace

const Architecture kGlm4{"glm4", read_glm4, build_glm4};

}  // namespace powerhouse::arch
