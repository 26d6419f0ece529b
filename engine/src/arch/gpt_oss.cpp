// gpt-oss (OpenAI's open-weight models, 20b and 120b): pre-norm layers with biases on the
// Q, K, V and output projections, NeoX RoPE with YaRN scaling, attention sinks (a learned
// logit per head that takes part of the softmax's mass) and a sliding window of 128 on every
// other layer (the even ones); the feed-forward is routed: a router with a bias picks the top
// 4 of 32 or 128 experts by score, softmaxes those scores, and each expert is a clamped
// SwiGLU (x * sigmoid(1.702 x) * (y + 1), x at most 7, y within +-7) with biases. The
// pre-norm of the feed-forward is stored as post_attention_norm.
#include <fmt/format.h>

#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

Result<void> read_gpt_oss(const GgufModel& model, Hparams& hp) {
    const GgufMetadata& meta = model.metadata();
    const std::string& a = hp.architecture;
    hp.rope_layout = RopeLayout::neox;
    if (!hp.is_moe()) {
        return make_error(ErrorCode::format, fmt::format("a {} model needs {}.expert_count", a, a));
    }
    Result<uint32_t> n_ff = required_u32(meta, a + ".expert_feed_forward_length");
    if (!n_ff) return n_ff.error();
    hp.experts.n_ff = *n_ff;
    const uint64_t window = meta.get_uint(a + ".attention.sliding_window").value_or(0);
    if (window == 0 || window > (1u << 24)) {
        return make_error(ErrorCode::format, fmt::format("{}.attention.sliding_window is missing or out of range", a));
    }
    Result<std::vector<bool>> sliding = sliding_layers(meta, a + ".attention.sliding_window_pattern", hp.n_layer, 2);
    if (!sliding) return sliding.error();
    // Sliding layers keep the scaling of the others (their own base only if the file says).
    const auto local_base = static_cast<float>(meta.get_float(a + ".rope.freq_base_swa").value_or(hp.rope_base));
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        if ((*sliding)[il]) hp.layers[il] = LayerAttention{static_cast<uint32_t>(window), local_base, hp.rope_freq_scale};
    }
    return {};
}

StepProgram build_gpt_oss(const Hparams& hp) {
    StepProgram p = start_program(hp);
    add_attention(p, hp, AttentionBlock{.qkv_bias = true, .output_bias = true, .sinks = true});
    MoeSpec experts = routed_experts(hp, ExpertGating::softmax_chosen, /*normalize=*/false);
    experts.activation = ExpertActivation::swiglu_oai;
    experts.gate_bias = "blk.{}.ffn_gate_exps.bias";
    experts.up_bias = "blk.{}.ffn_up_exps.bias";
    experts.down_bias = "blk.{}.ffn_down_exps.bias";
    add_moe_ffn(p, std::move(experts), /*router_bias=*/true, "blk.{}.post_attention_norm.weight");
    add_output_head(p, hp);
    return p;
}

}  // namespace

const Architecture kGptOss{"gpt-oss", read_gpt_oss, build_gpt_oss};

}  // namespace powerhouse::arch
