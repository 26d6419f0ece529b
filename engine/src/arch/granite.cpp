// Granite (general.architecture "granite": IBM Granite 3.x dense and Granite 4.0 Micro): Llama's
// layer with four multipliers from the file: the embedding times embedding_scale, the
// attention scores times attention.scale (instead of 1/sqrt(head_dim)), each layer's attention
// and feed-forward outputs times residual_scale before their residual adds, and the logits
// divided by logit_scale. rope.scaling.finetuned false turns RoPE off in every layer, as in
// llama.cpp. Q, K and V may come as one tensor, with or without biases.
// Granite MoE ("granitemoe": Granite 3.0/3.1 1B-A400M and 3B-A800M) is the same with a routed
// feed-forward in every layer: a softmax over the experts, the top k renormalised, each expert
// feed_forward_length wide. Its shared-expert variant (granitemoeshared) is refused.
#include <fmt/format.h>

#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

Result<void> read_granite(const GgufModel& model, Hparams& hp) {
    const GgufMetadata& meta = model.metadata();
    const std::string& a = hp.architecture;
    if (a == "granitemoe") {
        if (!hp.is_moe()) {
            return make_error(ErrorCode::format, fmt::format("a granitemoe model needs {}.expert_count", a));
        }
        if (meta.get_uint(a + ".expert_shared_feed_forward_length").value_or(0) != 0) {
            return make_error(ErrorCode::unsupported, "Granite MoE with a shared expert is not supported yet");
        }
    } else if (hp.is_moe()) {
        return make_error(ErrorCode::format, "a granite model with experts must say granitemoe as its architecture");
    }
    PH_TRY(read_attention_layout(model, hp));
    const std::optional<double> logit = meta.get_float(a + ".logit_scale");
    if (!logit || *logit == 0.0) {
        return make_error(ErrorCode::format, fmt::format("a granite model needs a nonzero {}.logit_scale", a));
    }
    hp.logit_scale = 1.0f / static_cast<float>(*logit);  // in f32, as llama.cpp divides
    hp.residual_scale = static_cast<float>(meta.get_float(a + ".residual_scale").value_or(0.0));
    hp.embedding_scale = static_cast<float>(meta.get_float(a + ".embedding_scale").value_or(0.0));
    if (hp.embedding_scale == 0.0f) hp.embedding_scale = 1.0f;
    hp.attention_scale = static_cast<float>(meta.get_float(a + ".attention.scale").value_or(0.0));
    if (!meta.get_bool(a + ".rope.scaling.finetuned").value_or(true)) {
        for (LayerAttention& layer : hp.layers) layer.rope = false;
    }
    return {};
}

StepProgram build_granite(const Hparams& hp) {
    StepProgram p = start_program(hp, hp.embedding_scale);
    add_attention(p, hp,
                  AttentionBlock{.qkv_bias = hp.qkv_bias,
                                 .output_bias = hp.output_bias,
                                 .fused_qkv = hp.fused_qkv,
                                 .scores_scale = hp.attention_scale,
                                 .residual_scale = hp.residual_scale});
    if (hp.is_moe()) {
        add_moe_ffn(p, routed_experts(hp, ExpertGating::softmax, /*normalize=*/true), /*router_bias=*/false,
                    "blk.{}.ffn_norm.weight", hp.residual_scale);
    } else {
        add_gated_ffn(p, GateActivation::silu, /*post_norm=*/false, "blk.{}.ffn_norm.weight", hp.residual_scale);
    }
    add_output_head(p, hp, hp.logit_scale);
    return p;
}

}  // namespace

const Architecture kGranite{"granite", read_granite, build_granite};
const Architecture kGraniteMoe{"granitemoe", read_granite, build_granite};

}  // namespace powerhouse::arch
