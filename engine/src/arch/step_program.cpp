// The llama family: pre-norm decoder layers with RMSNorm, rotary attention with grouped KV
// heads, and a SwiGLU feed-forward. Qwen 2 adds biases to Q/K/V; Qwen 3 normalises each Q
// and K head before RoPE. Gemma 3 scales the embedding, normalises Q and K heads, scales Q
// after RoPE instead of the attention scores, norms the attention and FFN outputs again
// before each residual add, and uses GeGLU; its sliding-window layers differ only in the
// per-layer window and RoPE base (StepProgram::layers).
#include "arch/step_program.h"

#include <fmt/format.h>

#include <cmath>

namespace powerhouse::arch {

StepProgram build_step_program(const Hparams& hp) {
    StepProgram p;
    p.embedding = "token_embd.weight";
    using B = Buffer;
    using K = OpKind;
    p.layers = hp.layers;
    if (hp.embedding_scale != 1.0f) p.input.push_back({K::scale, B::x, B::x, B::x, "", hp.embedding_scale});
    auto& l = p.layer;
    l.push_back({K::rms_norm, B::norm, B::x, B::x, "blk.{}.attn_norm.weight"});
    l.push_back({K::matmul, B::q, B::norm, B::x, "blk.{}.attn_q.weight"});
    l.push_back({K::matmul, B::k, B::norm, B::x, "blk.{}.attn_k.weight"});
    l.push_back({K::matmul, B::v, B::norm, B::x, "blk.{}.attn_v.weight"});
    if (hp.qkv_bias) {
        l.push_back({K::add_bias, B::q, B::q, B::x, "blk.{}.attn_q.bias"});
        l.push_back({K::add_bias, B::k, B::k, B::x, "blk.{}.attn_k.bias"});
        l.push_back({K::add_bias, B::v, B::v, B::x, "blk.{}.attn_v.bias"});
    }
    if (hp.qk_norm) {
        l.push_back({K::head_rms_norm, B::q, B::q, B::x, "blk.{}.attn_q_norm.weight"});
        l.push_back({K::head_rms_norm, B::k, B::k, B::x, "blk.{}.attn_k_norm.weight"});
    }
    l.push_back({K::rope, B::q, B::q, B::x, ""});
    l.push_back({K::rope, B::k, B::k, B::x, ""});
    float attention_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
    if (hp.query_scale != 0.0f) {
        l.push_back({K::scale, B::q, B::q, B::x, "", hp.query_scale});
        attention_scale = 1.0f;
    }
    l.push_back({K::attention, B::attn, B::q, B::x, "", attention_scale});
    l.push_back({K::matmul, B::tmp, B::attn, B::x, "blk.{}.attn_output.weight"});
    if (hp.post_norms) l.push_back({K::rms_norm, B::tmp, B::tmp, B::x, "blk.{}.post_attention_norm.weight"});
    l.push_back({K::add, B::x, B::x, B::tmp, ""});
    l.push_back({K::rms_norm, B::norm, B::x, B::x, "blk.{}.ffn_norm.weight"});
    l.push_back({K::matmul, B::gate, B::norm, B::x, "blk.{}.ffn_gate.weight"});
    l.push_back({K::matmul, B::up, B::norm, B::x, "blk.{}.ffn_up.weight"});
    l.push_back({hp.ffn_activation == FfnActivation::gelu ? K::geglu : K::swiglu, B::gate, B::gate, B::up, ""});
    l.push_back({K::matmul, B::tmp, B::gate, B::x, "blk.{}.ffn_down.weight"});
    if (hp.post_norms) l.push_back({K::rms_norm, B::tmp, B::tmp, B::x, "blk.{}.post_ffw_norm.weight"});
    l.push_back({K::add, B::x, B::x, B::tmp, ""});

    p.head.push_back({K::rms_norm, B::norm, B::x, B::x, "output_norm.weight"});
    p.head.push_back({K::matmul, B::logits, B::norm, B::x, hp.tied_output ? "token_embd.weight" : "output.weight"});
    return p;
}

std::string weight_name(const Op& op, uint32_t layer) {
    const size_t at = op.weight.find("{}");
    if (at == std::string::npos) return op.weight;
    return op.weight.substr(0, at) + std::to_string(layer) + op.weight.substr(at + 2);
}

}  // namespace powerhouse::arch
