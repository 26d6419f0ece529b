// BERT encoders (bge-small/base-en-v1.5, all-MiniLM-L6-v2), as llama.cpp's converter writes
// them: the token's embedding plus token type 0's and its position's, LayerNorm
// (token_embd_norm); then per layer, post-norm: Q, K and V with biases, attention over every
// token of the sequence (not causal), the output projection and its bias, the residual add,
// LayerNorm (attn_output_norm); up with its bias, GELU, down with its bias, the residual add,
// LayerNorm (layer_output_norm). No final norm and no output projection: the last layer's rows
// are what {arch}.pooling_type pools into an embedding (Model::embed). It makes no text.
//
// Also the family's shared pieces (bert.h), which nomic_bert.cpp writes its layers with.
#include "arch/bert.h"

#include <fmt/format.h>

#include <cmath>

#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

// As blocks.cpp names them, in the same scope: one unity file holds both, and aliases in an
// anonymous namespace would shadow those (clang's -Wshadow).
using B = Buffer;
using K = OpKind;

namespace {

Result<void> read_bert(const GgufModel& model, Hparams& hp) {
    PH_TRY(read_encoder(model, hp));
    if (model.find_tensor("position_embd.weight") == nullptr) {
        return make_error(ErrorCode::format, "the model has no tensor 'position_embd.weight'");
    }
    if (model.find_tensor("blk.0.attn_qkv.weight") != nullptr) {
        return make_error(ErrorCode::unsupported, "bert with Q, K and V in one tensor (attn_qkv) is not supported yet");
    }
    return {};
}

StepProgram build_bert(const Hparams& hp) {
    return build_encoder(hp, EncoderLayout{});
}

// LayerNorm with its weight and bias, in place on x.
void add_layer_norm(std::vector<Op>& ops, const std::string& name) {
    ops.push_back({K::layer_norm, B::x, B::x, B::x, name + ".weight"});
    ops.push_back({K::add_bias, B::x, B::x, B::x, name + ".bias"});
}

// A matmul of x into `dst` and, with `bias`, its bias.
void add_projection(std::vector<Op>& l, Buffer dst, Buffer a, const std::string& name, bool bias) {
    l.push_back({K::matmul, dst, a, B::x, name + ".weight"});
    if (bias) l.push_back({K::add_bias, dst, dst, B::x, name + ".bias"});
}

}  // namespace

Result<void> read_encoder(const GgufModel& model, Hparams& hp) {
    const GgufMetadata& meta = model.metadata();
    const std::string& a = hp.architecture;
    const std::optional<double> eps = meta.get_float(a + ".attention.layer_norm_epsilon");
    if (!eps || !(*eps > 0.0) || *eps > 1.0) {
        return make_error(
            ErrorCode::format,
            fmt::format("the model has no usable {}.attention.layer_norm_epsilon (LayerNorm's epsilon)", a));
    }
    hp.norm_eps = static_cast<float>(*eps);
    // Converted encoders say false; llama.cpp makes it causal only when the file says so.
    hp.causal = meta.get_bool(a + ".attention.causal").value_or(false);
    hp.embedding_only = true;
    if (hp.n_head_kv != hp.n_head) {
        return make_error(ErrorCode::format, fmt::format("{} with {} KV heads for {} query heads is not a BERT model",
                                                         a, hp.n_head_kv, hp.n_head));
    }
    for (const char* name : {"token_types.weight", "token_embd_norm.weight", "token_embd_norm.bias"}) {
        if (model.find_tensor(name) == nullptr) {
            return make_error(ErrorCode::format, fmt::format("the model has no tensor '{}'", name));
        }
    }
    return {};
}

StepProgram build_encoder(const Hparams& hp, const EncoderLayout& layout) {
    StepProgram p;
    p.embedding = "token_embd.weight";
    p.layers = hp.layers;
    p.causal = hp.causal;
    // llama.cpp: (token + token type 0) + position, then the embeddings' LayerNorm.
    Op type_row{K::add_row, B::x, B::x, B::x, "token_types.weight"};
    type_row.weight_row = 0;
    p.input.push_back(type_row);
    if (layout.position_table) p.input.push_back({K::add_row, B::x, B::x, B::x, "position_embd.weight"});
    add_layer_norm(p.input, "token_embd_norm");

    auto& l = p.layer;
    const uint32_t q_rows = hp.n_head * hp.head_dim;
    for (const char part : {'q', 'k', 'v'}) {
        const Buffer dst = part == 'q' ? B::q : part == 'k' ? B::k : B::v;
        if (layout.fused_qkv) {
            Op op{K::matmul, dst, B::x, B::x, "blk.{}.attn_qkv.weight"};
            op.weight_row = part == 'q' ? 0 : part == 'k' ? q_rows : 2 * q_rows;
            l.push_back(op);
            if (layout.biases) {
                Op bias{K::add_bias, dst, dst, B::x, "blk.{}.attn_qkv.bias"};
                bias.weight_row = op.weight_row;
                l.push_back(bias);
            }
        } else {
            add_projection(l, dst, B::x, fmt::format("blk.{{}}.attn_{}", part), layout.biases);
        }
    }
    if (!layout.position_table) {
        l.push_back({K::rope, B::q, B::q, B::x, ""});
        l.push_back({K::rope, B::k, B::k, B::x, ""});
    }
    l.push_back({K::attention, B::attn, B::q, B::x, "", 1.0f / std::sqrt(static_cast<float>(hp.head_dim))});
    add_projection(l, B::tmp, B::attn, "blk.{}.attn_output", layout.biases);
    l.push_back({K::add, B::x, B::x, B::tmp, ""});
    add_layer_norm(l, "blk.{}.attn_output_norm");
    add_projection(l, B::up, B::x, "blk.{}.ffn_up", layout.biases);
    Buffer activated = B::up;
    if (layout.swiglu) {
        add_projection(l, B::gate, B::x, "blk.{}.ffn_gate", layout.biases);
        l.push_back({K::swiglu, B::gate, B::gate, B::up, ""});  // silu(gate) * up
        activated = B::gate;
    } else {
        l.push_back({K::gelu, B::up, B::up, B::x, ""});
    }
    add_projection(l, B::tmp, activated, "blk.{}.ffn_down", layout.biases);
    l.push_back({K::add, B::x, B::x, B::tmp, ""});
    add_layer_norm(l, "blk.{}.layer_output_norm");
    return p;  // no head: the last layer's x is the output
}

const Architecture kBert{"bert", read_bert, build_bert, /*embedding_only=*/true};

}  // namespace powerhouse::arch
