// Gemma 3 (text): the embedding scaled by sqrt(n_embd); Q and K heads RMS-normed before
// NeoX RoPE; Q scaled after RoPE instead of the scores; the attention and FFN outputs
// RMS-normed again before each residual add; GeGLU. Five of every six layers attend over a
// sliding window with their own RoPE base. The converter has already added 1 to every norm
// weight, so the norms are plain RMS norms here.
#include <fmt/format.h>

#include <cmath>

#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

Result<void> read_gemma3(const GgufModel& model, Hparams& hp) {
    const GgufMetadata& meta = model.metadata();
    const std::string& a = hp.architecture;
    hp.rope_layout = RopeLayout::neox;
    hp.embedding_scale = std::sqrt(static_cast<float>(hp.n_embd));
    // Q is scaled by 1/sqrt(query_pre_attn_scalar): the head size, except in the 27B model
    // (62 layers), whose scalar is n_embd / n_head. llama.cpp tells them apart the same way.
    const uint32_t pre_attn = hp.n_layer == 62 ? hp.n_embd / hp.n_head : hp.head_dim;
    hp.query_scale = 1.0f / std::sqrt(static_cast<float>(pre_attn));
    if (meta.get_float(a + ".final_logit_softcapping").value_or(0.0) != 0.0) {
        return make_error(ErrorCode::unsupported, "final logit soft-capping is not supported yet");
    }
    const uint64_t window = meta.get_uint(a + ".attention.sliding_window").value_or(0);
    if (window == 0) return {};  // every layer global
    if (window > (1u << 24)) {
        return make_error(ErrorCode::format, fmt::format("sliding window {} is out of range", window));
    }
    Result<std::vector<bool>> sliding = sliding_layers(meta, a + ".attention.sliding_window_pattern", hp.n_layer, 6);
    if (!sliding) return sliding.error();
    // Sliding layers have their own RoPE base and are never RoPE-scaled.
    const auto local_base = static_cast<float>(meta.get_float(a + ".rope.freq_base_swa").value_or(10000.0));
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        if ((*sliding)[il]) hp.layers[il] = LayerAttention{static_cast<uint32_t>(window), local_base, 1.0f};
    }
    return {};
}

StepProgram build_gemma3(const Hparams& hp) {
    StepProgram p = start_program(hp, hp.embedding_scale);
    add_attention(p, hp, AttentionBlock{.qk_norm = true, .post_norm = true, .query_scale = hp.query_scale});
    add_gated_ffn(p, GateActivation::gelu, /*post_norm=*/true);
    add_output_head(p, hp);
    return p;
}

}  // namespace

const Architecture kGemma3{"gemma3", read_gemma3, build_gemma3};

}  // namespace powerhouse::arch
