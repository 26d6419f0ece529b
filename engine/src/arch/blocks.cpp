#include "arch/blocks.h"

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <utility>

namespace powerhouse::arch {

using B = Buffer;
using K = OpKind;

namespace {

// `op` reading its weight's rows from `first` on.
Op row_view(Op op, uint32_t first) {
    op.weight_row = first;
    return op;
}

// Q, K and V's products (from the norm) or biases (in place), from attn_q/k/v.SUFFIX or from
// runs of one attn_qkv.SUFFIX, whose rows hold Q's heads, then K's, then V's.
void add_qkv_ops(std::vector<Op>& l, const Hparams& hp, OpKind kind, bool fused, const char* suffix) {
    const uint32_t q_rows = hp.n_head * hp.head_dim, kv_rows = hp.n_head_kv * hp.head_dim;
    const struct {
        Buffer dst;
        char name;
        uint32_t first_row;
    } parts[] = {{B::q, 'q', 0}, {B::k, 'k', q_rows}, {B::v, 'v', q_rows + kv_rows}};
    for (const auto& part : parts) {
        const std::string weight =
            fused ? fmt::format("blk.{{}}.attn_qkv.{}", suffix) : fmt::format("blk.{{}}.attn_{}.{}", part.name, suffix);
        Op op{kind, part.dst, kind == K::matmul ? B::norm : part.dst, B::x, weight};
        if (fused) op.weight_row = part.first_row;
        l.push_back(std::move(op));
    }
}

}  // namespace

Result<void> read_neox_rope(const GgufModel&, Hparams& hp) {
    hp.rope_layout = RopeLayout::neox;
    return {};
}

StepProgram start_program(const Hparams& hp, float embedding_scale) {
    StepProgram p;
    p.embedding = "token_embd.weight";
    p.layers = hp.layers;
    if (embedding_scale != 1.0f) p.input.push_back({K::scale, B::x, B::x, B::x, "", embedding_scale});
    return p;
}

void add_attention(StepProgram& p, const Hparams& hp, const AttentionBlock& block) {
    auto& l = p.layer;
    l.push_back({K::rms_norm, B::norm, B::x, B::x, "blk.{}.attn_norm.weight"});
    add_qkv_ops(l, hp, K::matmul, block.fused_qkv, "weight");
    if (block.qkv_bias) add_qkv_ops(l, hp, K::add_bias, block.fused_qkv, "bias");
    if (block.qk_norm) {
        l.push_back({K::head_rms_norm, B::q, B::q, B::x, "blk.{}.attn_q_norm.weight"});
        l.push_back({K::head_rms_norm, B::k, B::k, B::x, "blk.{}.attn_k_norm.weight"});
    }
    l.push_back({K::rope, B::q, B::q, B::x, "", hp.attn_temperature});
    l.push_back({K::rope, B::k, B::k, B::x, ""});
    float scores_scale =
        block.scores_scale != 0.0f ? block.scores_scale : 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
    if (block.query_scale != 0.0f) {
        l.push_back({K::scale, B::q, B::q, B::x, "", block.query_scale});
        scores_scale = 1.0f;
    }
    l.push_back({K::attention, B::attn, B::q, B::x, block.sinks ? "blk.{}.attn_sinks.weight" : "", scores_scale});
    l.push_back({K::matmul, B::tmp, B::attn, B::x, "blk.{}.attn_output.weight"});
    if (block.output_bias) l.push_back({K::add_bias, B::tmp, B::tmp, B::x, "blk.{}.attn_output.bias"});
    if (block.post_norm) l.push_back({K::rms_norm, B::tmp, B::tmp, B::x, "blk.{}.post_attention_norm.weight"});
    if (block.residual_scale != 0.0f) l.push_back({K::scale, B::tmp, B::tmp, B::x, "", block.residual_scale});
    l.push_back({K::add, B::x, B::x, B::tmp, ""});
}

void add_gated_ffn(StepProgram& p, GateActivation activation, bool post_norm, const char* norm, float residual_scale) {
    auto& l = p.layer;
    l.push_back({K::rms_norm, B::norm, B::x, B::x, norm});
    l.push_back({K::matmul, B::gate, B::norm, B::x, "blk.{}.ffn_gate.weight"});
    l.push_back({K::matmul, B::up, B::norm, B::x, "blk.{}.ffn_up.weight"});
    l.push_back({activation == GateActivation::gelu ? K::geglu : K::swiglu, B::gate, B::gate, B::up, ""});
    l.push_back({K::matmul, B::tmp, B::gate, B::x, "blk.{}.ffn_down.weight"});
    if (post_norm) l.push_back({K::rms_norm, B::tmp, B::tmp, B::x, "blk.{}.post_ffw_norm.weight"});
    if (residual_scale != 0.0f) l.push_back({K::scale, B::tmp, B::tmp, B::x, "", residual_scale});
    l.push_back({K::add, B::x, B::x, B::tmp, ""});
}

namespace {

Result<void> check_rows(const GgufModel& model, const std::string& name, int64_t rows, int64_t columns,
                        const char* what) {
    const GgufTensorInfo* t = model.find_tensor(name);
    if (t == nullptr) return make_error(ErrorCode::format, fmt::format("the model has no tensor '{}'", name));
    if (t->ne[0] != columns || t->n_rows() != rows) {
        return make_error(ErrorCode::format, fmt::format("tensor '{}' is {}x{}, expected {}x{} ({})", name, t->n_rows(),
                                                         t->ne[0], rows, columns, what));
    }
    return {};
}

}  // namespace

Result<void> read_attention_layout(const GgufModel& model, Hparams& hp, bool fused_ffn) {
    if (model.find_tensor("blk.0.ffn_up.bias") != nullptr || model.find_tensor("blk.0.ffn_down.bias") != nullptr) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("{} with feed-forward biases is not supported yet", hp.architecture));
    }
    hp.fused_qkv = model.find_tensor("blk.0.attn_qkv.weight") != nullptr;
    hp.qkv_bias = model.find_tensor(hp.fused_qkv ? "blk.0.attn_qkv.bias" : "blk.0.attn_q.bias") != nullptr;
    hp.output_bias = model.find_tensor("blk.0.attn_output.bias") != nullptr;
    return check_fused_tensors(model, hp, fused_ffn);
}

Result<void> check_fused_tensors(const GgufModel& model, const Hparams& hp, bool fused_ffn) {
    const int64_t qkv_rows = int64_t{hp.n_head + 2 * hp.n_head_kv} * hp.head_dim;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        if (hp.fused_qkv) {
            PH_TRY(check_rows(model, fmt::format("blk.{}.attn_qkv.weight", l), qkv_rows, hp.n_embd,
                              "the Q, K and V heads together"));
            const std::string bias = fmt::format("blk.{}.attn_qkv.bias", l);
            if (model.find_tensor(bias) != nullptr)
                PH_TRY(check_rows(model, bias, 1, qkv_rows, "the Q, K and V biases"));
        }
        if (fused_ffn) {
            PH_TRY(check_rows(model, fmt::format("blk.{}.ffn_up.weight", l), int64_t{2} * hp.n_ff, hp.n_embd,
                              "the gate and up projections together"));
        }
    }
    return {};
}

void add_fused_gated_ffn(StepProgram& p, const Hparams& hp, bool post_norm) {
    auto& l = p.layer;
    l.push_back({K::rms_norm, B::norm, B::x, B::x, "blk.{}.ffn_norm.weight"});
    l.push_back(row_view({K::matmul, B::gate, B::norm, B::x, "blk.{}.ffn_up.weight"}, 0));
    l.push_back(row_view({K::matmul, B::up, B::norm, B::x, "blk.{}.ffn_up.weight"}, hp.n_ff));
    l.push_back({K::swiglu, B::gate, B::gate, B::up, ""});
    l.push_back({K::matmul, B::tmp, B::gate, B::x, "blk.{}.ffn_down.weight"});
    if (post_norm) l.push_back({K::rms_norm, B::tmp, B::tmp, B::x, "blk.{}.post_ffw_norm.weight"});
    l.push_back({K::add, B::x, B::x, B::tmp, ""});
}

MoeSpec routed_experts(const Hparams& hp, ExpertGating gating, bool normalize) {
    MoeSpec spec;
    spec.n_expert = hp.experts.count;
    spec.n_used = hp.experts.used;
    spec.n_ff = hp.experts.n_ff;
    spec.gating = gating;
    spec.normalize = normalize;
    return spec;
}

void add_moe_ffn(StepProgram& p, MoeSpec spec, bool router_bias, const char* norm, float residual_scale) {
    auto& l = p.layer;
    l.push_back({K::rms_norm, B::norm, B::x, B::x, norm});
    l.push_back({K::matmul, B::router, B::norm, B::x, "blk.{}.ffn_gate_inp.weight"});
    if (router_bias) l.push_back({K::add_bias, B::router, B::router, B::x, "blk.{}.ffn_gate_inp.bias"});
    Op moe{K::moe, B::tmp, B::norm, B::router, ""};
    moe.moe = std::make_shared<const MoeSpec>(std::move(spec));
    l.push_back(std::move(moe));
    if (residual_scale != 0.0f) l.push_back({K::scale, B::tmp, B::tmp, B::x, "", residual_scale});
    l.push_back({K::add, B::x, B::x, B::tmp, ""});
}

void add_output_head(StepProgram& p, const Hparams& hp, float logit_scale) {
    p.head.push_back({K::rms_norm, B::norm, B::x, B::x, "output_norm.weight"});
    p.head.push_back({K::matmul, B::logits, B::norm, B::x, hp.tied_output ? "token_embd.weight" : "output.weight"});
    if (logit_scale != 1.0f) p.head.push_back({K::scale, B::logits, B::logits, B::x, "", logit_scale});
}

}  // namespace powerhouse::arch
