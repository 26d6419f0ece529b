#include "arch/hparams.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace powerhouse::arch {

const std::vector<std::string>& supported_architectures() {
    static const std::vector<std::string> names = {"llama", "qwen2", "qwen3", "gemma3"};
    return names;
}

namespace {

Result<uint32_t> required_u32(const GgufMetadata& meta, const std::string& key) {
    const std::optional<uint64_t> v = meta.get_uint(key);
    if (!v) return make_error(ErrorCode::format, fmt::format("the model has no {} (or it is not a number)", key));
    if (*v == 0 || *v > (1u << 24)) {
        return make_error(ErrorCode::format, fmt::format("{} = {} is out of range", key, *v));
    }
    return static_cast<uint32_t>(*v);
}

// Which layers of a Gemma 3 model use the sliding window: `attention.sliding_window_pattern`
// is either one flag per layer or a period n, where every n-th layer (the last of each
// group of n) is global and the others slide (n = 0: all slide); without it, the period is
// 6, as in the published models and in llama.cpp.
Result<std::vector<bool>> sliding_layers(const GgufMetadata& meta, const std::string& key, uint32_t n_layer) {
    std::vector<bool> sliding(n_layer, false);
    if (const GgufArray* flags = meta.get_array(key)) {
        if (flags->count != n_layer) {
            return make_error(ErrorCode::format, fmt::format("{} has {} entries for {} layers", key, flags->count,
                                                             n_layer));
        }
        for (uint32_t il = 0; il < n_layer; ++il) {
            switch (flags->element_type) {
                case GgufValueType::boolean:
                case GgufValueType::u8:
                case GgufValueType::i8:
                    sliding[il] = flags->at<uint8_t>(il) != 0;
                    break;
                case GgufValueType::u32:
                case GgufValueType::i32:
                    sliding[il] = flags->at<uint32_t>(il) != 0;
                    break;
                default:
                    return make_error(ErrorCode::format, fmt::format("{} is not an array of flags", key));
            }
        }
        return sliding;
    }
    const uint64_t period = meta.get_uint(key).value_or(6);
    for (uint32_t il = 0; il < n_layer; ++il) sliding[il] = period == 0 || il % period < period - 1;
    return sliding;
}

// Gemma 3 (text): the converter has already added 1 to every norm weight, so its norms are
// plain RMS norms here.
Result<void> read_gemma3(const GgufMetadata& meta, Hparams& hp) {
    const std::string& a = hp.architecture;
    hp.rope_layout = RopeLayout::neox;
    hp.qk_norm = true;
    hp.post_norms = true;
    hp.ffn_activation = FfnActivation::gelu;
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
    Result<std::vector<bool>> sliding = sliding_layers(meta, a + ".attention.sliding_window_pattern", hp.n_layer);
    if (!sliding) return sliding.error();
    // Sliding layers have their own RoPE base and are never RoPE-scaled.
    const auto local_base = static_cast<float>(meta.get_float(a + ".rope.freq_base_swa").value_or(10000.0));
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        if ((*sliding)[il]) hp.layers[il] = LayerAttention{static_cast<uint32_t>(window), local_base, 1.0f};
    }
    return {};
}

}  // namespace

Result<Hparams> read_hparams(const GgufModel& model) {
    const GgufMetadata& meta = model.metadata();
    Hparams hp;
    const std::optional<std::string_view> arch = meta.get_string("general.architecture");
    if (!arch) return make_error(ErrorCode::format, "the model has no general.architecture");
    hp.architecture = std::string(*arch);
    const auto& supported = supported_architectures();
    if (std::find(supported.begin(), supported.end(), hp.architecture) == supported.end()) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("architecture '{}' is not supported yet (supported: {})", hp.architecture,
                                      fmt::join(supported, ", ")));
    }
    const std::string& a = hp.architecture;
    const auto u32 = [&](const char* key) { return required_u32(meta, a + "." + key); };

    Result<uint32_t> v = u32("block_count");
    if (!v) return v.error();
    hp.n_layer = *v;
    if (!(v = u32("embedding_length"))) return v.error();
    hp.n_embd = *v;
    if (!(v = u32("attention.head_count"))) return v.error();
    hp.n_head = *v;
    hp.n_head_kv = static_cast<uint32_t>(meta.get_uint(a + ".attention.head_count_kv").value_or(hp.n_head));
    if (!(v = u32("feed_forward_length"))) return v.error();
    hp.n_ff = *v;
    hp.n_ctx_train = static_cast<uint32_t>(meta.get_uint(a + ".context_length").value_or(4096));
    hp.head_dim = static_cast<uint32_t>(meta.get_uint(a + ".attention.key_length").value_or(hp.n_embd / hp.n_head));
    const auto value_length = meta.get_uint(a + ".attention.value_length").value_or(hp.head_dim);
    if (value_length != hp.head_dim) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("key length {} differs from value length {}", hp.head_dim, value_length));
    }
    if (hp.n_head_kv == 0 || hp.n_head % hp.n_head_kv != 0) {
        return make_error(ErrorCode::format, fmt::format("{} attention heads cannot share {} KV heads", hp.n_head,
                                                         hp.n_head_kv));
    }
    if (hp.head_dim == 0 || hp.head_dim % 2 != 0 || hp.head_dim > 1024) {
        return make_error(ErrorCode::format, fmt::format("head size {} is not supported", hp.head_dim));
    }
    hp.rms_eps = static_cast<float>(meta.get_float(a + ".attention.layer_norm_rms_epsilon").value_or(1e-5));
    hp.rope_base = static_cast<float>(meta.get_float(a + ".rope.freq_base").value_or(10000.0));
    hp.rope_dims = static_cast<uint32_t>(meta.get_uint(a + ".rope.dimension_count").value_or(hp.head_dim));
    if (hp.rope_dims > hp.head_dim || hp.rope_dims % 2 != 0) {
        return make_error(ErrorCode::format, fmt::format("rope.dimension_count {} does not fit a head of {}",
                                                         hp.rope_dims, hp.head_dim));
    }
    // As llama.cpp: a scaling factor without a scaling type is linear scaling.
    const std::optional<std::string_view> scaling = meta.get_string(a + ".rope.scaling.type");
    if (!scaling || *scaling == "linear") {
        const double factor = meta.get_float(a + ".rope.scaling.factor").value_or(0.0);
        if (factor > 0) hp.rope_freq_scale = static_cast<float>(1.0 / factor);
    } else if (*scaling != "none") {
        return make_error(ErrorCode::unsupported, fmt::format("RoPE scaling '{}' is not supported yet", *scaling));
    }

    const GgufTensorInfo* embd = model.find_tensor("token_embd.weight");
    if (embd == nullptr) return make_error(ErrorCode::format, "the model has no token_embd.weight");
    hp.n_vocab = static_cast<uint32_t>(embd->ne[1]);
    hp.tied_output = model.find_tensor("output.weight") == nullptr;
    hp.has_rope_freqs = model.find_tensor("rope_freqs.weight") != nullptr;

    if (a == "qwen2") {
        hp.rope_layout = RopeLayout::neox;
        hp.qkv_bias = true;
    } else if (a == "qwen3") {
        hp.rope_layout = RopeLayout::neox;
        hp.qk_norm = true;
    }
    hp.layers.assign(hp.n_layer, LayerAttention{0, hp.rope_base, hp.rope_freq_scale});
    if (a == "gemma3") {
        Result<void> gemma = read_gemma3(meta, hp);
        if (!gemma) return gemma.error();
    }
    return hp;
}

}  // namespace powerhouse::arch
