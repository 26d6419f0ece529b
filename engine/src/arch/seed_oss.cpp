// Seed-OSS (ByteDance Seed-OSS-36B): Llama's layer with Q, K and V biases (and an output bias
// where the file has one), NeoX RoPE, and the feed-forward's pre-norm stored as
// post_attention_norm.
#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

Result<void> read_seed_oss(const GgufModel& model, Hparams& hp) {
    if (hp.is_moe()) return make_error(ErrorCode::unsupported, "seed_oss with experts is not supported");
    hp.rope_layout = RopeLayout::neox;
    return read_attention_layout(model, hp);
}

StepProgram build_seed_oss(const Hparams& hp) {
    StepProgram p = start_program(hp);
    add_attention(p, hp,
                  AttentionBlock{.qkv_bias = hp.qkv_bias, .output_bias = hp.output_bias, .fused_qkv = hp.fused_qkv});
    add_gated_ffn(p, GateActivation::silu, /*post_norm=*/false, "blk.{}.post_attention_norm.weight");
    add_output_head(p, hp);
    return p;
}

}  // namespace

const Architecture kSeedOss{"seed_oss", read_seed_oss, build_seed_oss};

}  // namespace powerhouse::arch
