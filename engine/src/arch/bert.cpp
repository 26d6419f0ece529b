// BERT encoders (bge-small/base-en-v1.5, all-MiniLM-L6-v2), as llama.cpp's converter writes
// them: the token's embedding plus token type 0's and its position's, LayerNorm
// (token_embd_norm); then per layer, post-norm: Q, K and V with biases, attention over every
// token of the sequence (not causal), the output projection and its bias, the residual add,
// LayerNorm (attn_output_norm); up with its bias, GELU, down with its bias, the residual add,
// LayerNorm (layer_output_norm). No final norm and no output projection: the last layer's rows
// are what {arch}.pooling_type pools into an embedding (Model::embed). It makes no text.
#include <fmt/format.h>

#include <cmath>

#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

using B = Buffer;
using K = OpKind;

Result<void> read_bert(const GgufModel& model, Hparams& hp) {
    const GgufMetadata& meta = model.metadata();
    const std::string& a = hp.architecture;
    const std::optional<double> eps = meta.get_float(a + ".attention.layer_norm_epsilon");
    if (!eps || !(*eps > 0.0) || *eps > 1.0) {
        return make_error(
            ErrorCode::format,
            fmt::format("the model has no usable {}.attention.layer_norm_epsilon (LayerNorm's epsilon)", a));
    }
    hp.norm_eps = static_cast<float>(*eps);
    // Converted BERT files say false; llama.cpp makes it causal only when the file says so.
    hp.causal = meta.get_bool(a + ".attention.causal").value_or(false);
    hp.embedding_only = true;
    if (hp.n_head_kv != hp.n_head) {
        return make_error(ErrorCode::format, fmt::format("bert with {} KV heads for {} query heads is not a BERT model",
                                                         hp.n_head_kv, hp.n_head));
    }
    for (const char* name : {"position_embd.weight", "token_embd_norm.weight", "token_embd_norm.bias"}) {
        if (model.find_tensor(name) == nullptr) {
            return make_error(ErrorCode::format, fmt::format("the model has no tensor '{}'", name));
        }
    }
    if (model.find_tensor("blk.0.attn_qkv.weight") != nullptr) {
        return make_error(ErrorCode::unsupported, "bert with Q, K and V in one tensor (attn_qkv) is not supported yet");
    }
    return {};
}

// LayerNorm with its weight and bias, in place on x.
void add_layer_norm(std::vector<Op>& ops, const std::string& name) {
    ops.push_back({K::layer_norm, B::x, B::x, B::x, name + ".weight"});
    ops.push_back({K::add_bias, B::x, B::x, B::x, name + ".bias"});
}

StepProgram build_bert(const Hparams& hp) {
    StepProgram p;
    p.embedding = "token_embd.weight";
    p.layers = hp.layers;
    p.causal = hp.causal;
    // llama.cpp: (token + token type 0) + position, then the embeddings' LayerNorm.
    Op type_row{K::add_row, B::x, B::x, B::x, "token_types.weight"};
    type_row.weight_row = 0;
    p.input.push_back(type_row);
    p.input.push_back({K::add_row, B::x, B::x, B::x, "position_embd.weight"});
    add_layer_norm(p.input, "token_embd_norm");

    auto& l = p.layer;
    for (const char part : {'q', 'k', 'v'}) {
        const Buffer dst = part == 'q' ? B::q : part == 'k' ? B::k : B::v;
        l.push_back({K::matmul, dst, B::x, B::x, fmt::format("blk.{{}}.attn_{}.weight", part)});
        l.push_back({K::add_bias, dst, dst, B::x, fmt::format("blk.{{}}.attn_{}.bias", part)});
    }
    l.push_back({K::attention, B::attn, B::q, B::x, "", 1.0f / std::sqrt(static_cast<float>(hp.head_dim))});
    l.push_back({K::matmul, B::tmp, B::attn, B::x, "blk.{}.attn_output.weight"});
    l.push_back({K::add_bias, B::tmp, B::tmp, B::x, "blk.{}.attn_output.bias"});
    l.push_back({K::add, B::x, B::x, B::tmp, ""});
    add_layer_norm(l, "blk.{}.attn_output_norm");
    l.push_back({K::matmul, B::up, B::x, B::x, "blk.{}.ffn_up.weight"});
    l.push_back({K::add_bias, B::up, B::up, B::x, "blk.{}.ffn_up.bias"});
    l.push_back({K::gelu, B::up, B::up, B::x, ""});
    l.push_back({K::matmul, B::tmp, B::up, B::x, "blk.{}.ffn_down.weight"});
    l.push_back({K::add_bias, B::tmp, B::tmp, B::x, "blk.{}.ffn_down.bias"});
    l.push_back({K::add, B::x, B::x, B::tmp, ""});
    add_layer_norm(l, "blk.{}.layer_output_norm");
    return p;  // no head: the last layer's x is the output
}

}  // namespace

const Architecture kBert{"bert", read_bert, build_bert, /*embedding_only=*/true};

}  // namespace powerhouse::arch
