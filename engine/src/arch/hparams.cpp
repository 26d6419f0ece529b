#include "arch/hparams.h"

#include "arch/architecture.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace powerhouse::arch {

Result<uint32_t> prediction_blocks(const GgufMetadata& meta, const std::string& arch, uint32_t blocks) {
    const uint64_t nextn = meta.get_uint(arch + ".nextn_predict_layers").value_or(0);
    if (nextn >= blocks && nextn > 0) {
        return make_error(
            ErrorCode::format,
            fmt::format("{}.nextn_predict_layers is {} of {} blocks: no decoder layer is left", arch, nextn, blocks));
    }
    return static_cast<uint32_t>(nextn);
}

Result<uint32_t> required_u32(const GgufMetadata& meta, const std::string& key) {
    const std::optional<uint64_t> v = meta.get_uint(key);
    if (!v) return make_error(ErrorCode::format, fmt::format("the model has no {} (or it is not a number)", key));
    if (*v == 0 || *v > (1u << 24)) {
        return make_error(ErrorCode::format, fmt::format("{} = {} is out of range", key, *v));
    }
    return static_cast<uint32_t>(*v);
}

Result<std::vector<bool>> sliding_layers(const GgufMetadata& meta, const std::string& key, uint32_t n_layer,
                                         uint32_t default_period) {
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
    const uint64_t period = meta.get_uint(key).value_or(default_period);
    for (uint32_t il = 0; il < n_layer; ++il) sliding[il] = period == 0 || il % period < period - 1;
    return sliding;
}

Result<Hparams> read_hparams(const GgufModel& model) {
    const GgufMetadata& meta = model.metadata();
    Hparams hp;
    const std::optional<std::string_view> arch = meta.get_string("general.architecture");
    if (!arch) return make_error(ErrorCode::format, "the model has no general.architecture");
    hp.architecture = std::string(*arch);
    const Architecture* architecture = find_architecture(hp.architecture);
    if (architecture == nullptr) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("architecture '{}' is not supported yet (supported: {})", hp.architecture,
                                      fmt::join(architecture_names(), ", ")));
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
    if (!scaling || *scaling == "linear" || *scaling == "yarn") {
        const double factor = meta.get_float(a + ".rope.scaling.factor").value_or(0.0);
        if (factor > 0) hp.rope_freq_scale = static_cast<float>(1.0 / factor);
    }
    if (scaling && *scaling == "yarn") {
        // llama.cpp's defaults: the ramp on (ext_factor 1), and an attention factor that,
        // with the 1 + 0.1 ln(factor) that the rotation itself applies, makes the magnitude
        // 1 + 0.1 ln(factor) in all (times rope.scaling.attn_factor).
        Yarn& y = hp.yarn;
        y.ext_factor = static_cast<float>(meta.get_float(a + ".rope.scaling.yarn_ext_factor").value_or(1.0));
        y.beta_fast = static_cast<float>(meta.get_float(a + ".rope.scaling.yarn_beta_fast").value_or(32.0));
        y.beta_slow = static_cast<float>(meta.get_float(a + ".rope.scaling.yarn_beta_slow").value_or(1.0));
        y.orig_ctx = static_cast<uint32_t>(meta.get_uint(a + ".rope.scaling.original_context_length")
                                               .value_or(hp.n_ctx_train));
        // yarn_log_multiplier (mscale_all_dim; Mistral 3 writes 1) divides the magnitude by
        // its own mscale, as llama.cpp does for every architecture but DeepSeek 2's.
        const float log_multiplier =
            static_cast<float>(meta.get_float(a + ".rope.scaling.yarn_log_multiplier").value_or(0.0));
        const float factor = 1.0f / hp.rope_freq_scale;
        if (y.ext_factor != 0.0f) {
            const auto mscale = [&](float m) { return factor <= 1.0f ? 1.0f : 0.1f * m * std::log(factor) + 1.0f; };
            y.attn_factor = log_multiplier != 0.0f ? mscale(1.0f) / mscale(log_multiplier) : mscale(1.0f);
            y.attn_factor *= 1.0f / (1.0f + 0.1f * std::log(factor));
        }
        if (y.orig_ctx == 0) return make_error(ErrorCode::format, "YaRN scaling without an original context length");
    } else if (scaling && *scaling != "linear" && *scaling != "none") {
        return make_error(ErrorCode::unsupported, fmt::format("RoPE scaling '{}' is not supported yet", *scaling));
    }
    // As llama.cpp, with any scaling: cos and sin times this (Phi-3's LongRoPE writes it).
    hp.yarn.attn_factor *= static_cast<float>(meta.get_float(a + ".rope.scaling.attn_factor").value_or(1.0));

    const GgufTensorInfo* embd = model.find_tensor("token_embd.weight");
    if (embd == nullptr) return make_error(ErrorCode::format, "the model has no token_embd.weight");
    hp.n_vocab = static_cast<uint32_t>(embd->ne[1]);
    hp.tied_output = model.find_tensor("output.weight") == nullptr;
    hp.has_rope_freqs = model.find_tensor("rope_freqs.weight") != nullptr;

    hp.layers.assign(hp.n_layer, LayerAttention{0, hp.rope_base, hp.rope_freq_scale});
    // Experts, as Mixtral (general.architecture "llama") and the MoE architectures write
    // them; an architecture may set their width from its own key.
    hp.experts.count = static_cast<uint32_t>(std::min<uint64_t>(meta.get_uint(a + ".expert_count").value_or(0),
                                                                 kMaxExperts + 1));
    if (hp.experts.count > 0) {
        if (hp.experts.count > kMaxExperts) {
            return make_error(ErrorCode::format, fmt::format("{}.expert_count is more than {}", a, kMaxExperts));
        }
        Result<uint32_t> used = required_u32(meta, a + ".expert_used_count");
        if (!used) return used.error();
        if (*used > hp.experts.count) {
            return make_error(ErrorCode::format, fmt::format("{} experts used of {}", *used, hp.experts.count));
        }
        hp.experts.used = *used;
        hp.experts.n_ff = hp.n_ff;
    }
    PH_TRY(architecture->read(model, hp));
    return hp;
}

void use_context_length(Hparams& hp, uint32_t n_ctx) {
    if (hp.rope_freqs_long.empty() || n_ctx <= hp.rope_freqs_long_above) return;
    hp.rope_freqs = hp.rope_freqs_long;
    hp.rope_freqs_long.clear();
}

}  // namespace powerhouse::arch
