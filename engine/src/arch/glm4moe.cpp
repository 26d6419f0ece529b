// GLM-4.5 MoE (general.architecture "glm4moe": GLM-4.5, GLM-4.5-Air, GLM-4.6, GLM-4.7, and
// Solar Open, which llama.cpp runs the same way): Llama's pre-norm layer with Q, K and V
// biases (Q and K head norms in the files that have them), NeoX RoPE over part of each head
// (rope.dimension_count), the feed-forward's pre-norm named post_attention_norm, and:
//   - the first leading_dense_block_count layers with a dense SwiGLU feed-forward;
//   - the others routed: a sigmoid of each router score, the experts chosen by it plus a
//     per-layer bias (exp_probs_b), weighted by the sigmoid alone, normalised
//     (expert_weights_norm) and scaled (expert_weights_scale), plus expert_shared_count
//     shared experts of the experts' width that every token runs;
//   - nextn_predict_layers multi-token prediction blocks after the decoder's (block_count
//     counts them), which nothing runs: they are left out of the model.
// Grouped expert selection (expert_group_count above 1) and multi-section RoPE (the vision
// models) are refused.
#include <fmt/format.h>

#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

constexpr const char* kFfnNorm = "blk.{}.post_attention_norm.weight";

Result<void> read_glm4moe(const GgufModel& model, Hparams& hp) {
    const GgufMetadata& meta = model.metadata();
    const std::string& a = hp.architecture;
    hp.rope_layout = RopeLayout::neox;
    if (!hp.is_moe()) return make_error(ErrorCode::format, fmt::format("a glm4moe model needs {}.expert_count", a));
    if (meta.get_uint(a + ".expert_group_count").value_or(1) > 1) {
        return make_error(ErrorCode::unsupported, "glm4moe with grouped expert selection is not supported yet");
    }
    if (meta.get_array(a + ".rope.dimension_sections") != nullptr) {
        return make_error(ErrorCode::unsupported,
                          "glm4moe with multi-section RoPE (the vision models) is not "
                          "supported yet");
    }
    Result<uint32_t> nextn = prediction_blocks(meta, a, hp.n_layer);
    if (!nextn) return nextn.error();
    hp.n_layer -= *nextn;
    hp.layers.resize(hp.n_layer);
    const uint64_t lead = meta.get_uint(a + ".leading_dense_block_count").value_or(0);
    if (lead > hp.n_layer) {
        return make_error(ErrorCode::format,
                          fmt::format("{}.leading_dense_block_count is {} of {} layers", a, lead, hp.n_layer));
    }
    hp.experts.lead_dense = static_cast<uint32_t>(lead);
    // As llama.cpp: without the key, the dense width shared among the used experts.
    const std::string width_key = a + ".expert_feed_forward_length";
    if (meta.get_uint(width_key)) {
        Result<uint32_t> width = required_u32(meta, width_key);
        if (!width) return width.error();
        hp.experts.n_ff = *width;
    } else {
        hp.experts.n_ff = hp.n_ff / hp.experts.used;
    }
    hp.experts.n_ff_shared =
        hp.experts.n_ff * static_cast<uint32_t>(meta.get_uint(a + ".expert_shared_count").value_or(0));
    // llama.cpp's gating numbers: 1 softmax, 2 sigmoid; absent (0) is sigmoid for GLM-4.5.
    const uint64_t gating = meta.get_uint(a + ".expert_gating_func").value_or(0);
    if (gating > 2) {
        return make_error(ErrorCode::unsupported, fmt::format("expert gating function {} is not supported", gating));
    }
    hp.experts.sigmoid = gating != 1;
    hp.experts.normalize = meta.get_bool(a + ".expert_weights_norm").value_or(false);
    hp.experts.weights_scale = static_cast<float>(meta.get_float(a + ".expert_weights_scale").value_or(0.0));
    hp.qk_norm = model.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
    return read_attention_layout(model, hp);
}

StepProgram build_glm4moe(const Hparams& hp) {
    StepProgram p = start_program(hp);
    const AttentionBlock attention{
        .qkv_bias = hp.qkv_bias, .qk_norm = hp.qk_norm, .output_bias = hp.output_bias, .fused_qkv = hp.fused_qkv};
    // The leading dense layers first (add_* build p.layer), moved aside.
    if (hp.experts.lead_dense > 0) {
        add_attention(p, hp, attention);
        add_gated_ffn(p, GateActivation::silu, /*post_norm=*/false, kFfnNorm);
        p.lead_layer = std::move(p.layer);
        p.layer.clear();
        p.n_lead_layers = hp.experts.lead_dense;
    }
    add_attention(p, hp, attention);
    MoeSpec spec =
        routed_experts(hp, hp.experts.sigmoid ? ExpertGating::sigmoid : ExpertGating::softmax, hp.experts.normalize);
    spec.selection_bias = "blk.{}.exp_probs_b.bias";
    spec.weights_scale = hp.experts.weights_scale;
    spec.n_ff_shared = hp.experts.n_ff_shared;
    add_moe_ffn(p, std::move(spec), /*router_bias=*/false, kFfnNorm);
    add_output_head(p, hp);
    return p;
}

}  // namespace

const Architecture kGlm4Moe{"glm4moe", read_glm4moe, build_glm4moe};

}  // namespace powerhouse::arch
