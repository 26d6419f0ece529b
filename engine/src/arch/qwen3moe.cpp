// Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen 3's attention (NeoX RoPE, Q/K head
// norms) with a routed feed-forward in every layer: a softmax over the experts (128), the
// top 8 renormalised to sum to one. Each expert's width is expert_feed_forward_length.
#include <fmt/format.h>

#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

Result<void> read_qwen3moe(const GgufModel& model, Hparams& hp) {
    const GgufMetadata& meta = model.metadata();
    hp.rope_layout = RopeLayout::neox;
    if (!hp.is_moe()) {
        return make_error(ErrorCode::format, fmt::format("a {} model needs {}.expert_count", hp.architecture,
                                                         hp.architecture));
    }
    // As llama.cpp: without the key, the dense width shared among the used experts.
    const std::string key = hp.architecture + ".expert_feed_forward_length";
    if (meta.get_uint(key)) {
        Result<uint32_t> n_ff = required_u32(meta, key);
        if (!n_ff) return n_ff.error();
        hp.experts.n_ff = *n_ff;
    } else {
        hp.experts.n_ff = hp.n_ff / hp.experts.used;
    }
    return {};
}

StepProgram build_qwen3moe(const Hparams& hp) {
    StepProgram p = start_program(hp);
    add_attention(p, hp, AttentionBlock{.qk_norm = true});
    add_moe_ffn(p, routed_experts(hp, ExpertGating::softmax, /*normalize=*/true));
    add_output_head(p, hp);
    return p;
}

}  // namespace

const Architecture kQwen3Moe{"qwen3moe", read_qwen3moe, build_qwen3moe};

}  // namespace powerhouse::arch
