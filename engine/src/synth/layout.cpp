#include "synth/layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <string>

#include "synth/chat_templates.h"
#include "synth/vocab.h"

namespace powerhouse::synth {
namespace {

constexpr uint32_t kMaxLayers = 4096;
constexpr uint32_t kMaxContext = 1u << 24;

// "a, b, c": the names a message lists as valid choices.
template <class Range, class Name>
std::string join_names(const Range& items, Name name) {
    std::vector<std::string> names;
    for (const auto& item : items) {
        std::string n(name(item));
        // Architectures repeat across presets.
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(std::move(n));
    }
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

std::string known_presets() {
    return join_names(preset_specs(), [](const PresetSpec& p) { return p.info.name; });
}
std::string known_types() {
    return join_names(file_type_specs(), [](const FileTypeSpec& t) { return t.name; });
}
std::string known_architectures() {
    return join_names(preset_specs(), [](const PresetSpec& p) { return p.info.architecture; });
}

}  // namespace

Result<ResolvedOptions> resolve_options(const SynthOptions& options) {
    const PresetSpec* preset = nullptr;
    if (!options.preset.empty()) {
        preset = find_preset(options.preset);
        if (preset == nullptr) {
            return make_error(ErrorCode::invalid_argument,
                              fmt::format("unknown preset '{}' (known: {})", options.preset, known_presets()));
        }
    }
    if (!options.architecture.empty()) {
        const PresetSpec* arch_default = default_preset(options.architecture);
        if (arch_default == nullptr) {
            return make_error(ErrorCode::invalid_argument, fmt::format("unknown architecture '{}' (known: {})",
                                                                       options.architecture, known_architectures()));
        }
        if (preset == nullptr) {
            preset = arch_default;
        } else if (preset->info.architecture != options.architecture) {
            return make_error(ErrorCode::invalid_argument,
                              fmt::format("preset '{}' is a {} model, not {}: drop the architecture or pick a {} "
                                          "preset such as {}",
                                          preset->info.name, preset->info.architecture, options.architecture,
                                          options.architecture, arch_default->info.name));
        }
    }
    if (preset == nullptr) preset = default_preset("llama");

    ResolvedOptions r;
    r.type = find_file_type(options.type);
    if (r.type == nullptr) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("unknown type '{}' (known: {})", options.type, known_types()));
    }
    if (options.n_layer > kMaxLayers) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("{} layers asked for; at most {}", options.n_layer, kMaxLayers));
    }
    if (options.n_ctx > kMaxContext) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("context length {} asked for; at most {}", options.n_ctx, kMaxContext));
    }
    r.preset = *preset;
    r.real_n_layer = preset->info.n_layer;
    if (options.n_layer > 0) r.preset.info.n_layer = options.n_layer;
    if (options.n_ctx > 0) r.preset.info.n_ctx_train = options.n_ctx;
    return r;
}

namespace {

void set_u32(GgufMetadata& m, const std::string& key, uint32_t value) {
    m.set(key, GgufValue{value});
}
void set_f32(GgufMetadata& m, const std::string& key, float value) {
    m.set(key, GgufValue{value});
}

}  // namespace

void write_model_metadata(GgufMetadata& m, const ResolvedOptions& r, const SynthOptions& options) {
    const SynthPreset& p = r.preset.info;
    const std::string& a = p.architecture;
    std::string name = p.model_name + " (synthetic)";
    if (p.n_layer != r.real_n_layer) {
        name = fmt::format("{} (synthetic, {} of {} layers)", p.model_name, p.n_layer, r.real_n_layer);
    }
    m.set_string("general.architecture", a);
    m.set_string("general.type", "model");
    m.set_string("general.name", name);
    m.set_string("general.description",
                 fmt::format("Random weights with the shapes of {}: powerhouse-cli synth --like {} --type {} "
                             "--layers {} --seed {}",
                             p.model_name, p.name, r.type->name, p.n_layer, options.seed));
    set_u32(m, "general.file_type", r.type->llama_ftype);
    set_u32(m, "general.quantization_version", 2);

    set_u32(m, a + ".vocab_size", p.n_vocab);
    set_u32(m, a + ".context_length", p.n_ctx_train);
    set_u32(m, a + ".embedding_length", p.n_embd);
    set_u32(m, a + ".block_count", p.n_layer + r.preset.glm4moe.nextn_layers);
    set_u32(m, a + ".feed_forward_length", p.n_ff);
    set_u32(m, a + ".attention.head_count", p.n_head);
    if (r.preset.bert) {
        // As BertModel writes it: LayerNorm's epsilon, no RoPE, no KV head count.
        set_f32(m, a + ".attention.layer_norm_epsilon", p.rms_norm_eps);
        m.set(a + ".attention.causal", GgufValue{false});
        set_u32(m, a + ".pooling_type", r.preset.pooling_type);
        // NomicBertModel: the RoPE base (rotary_emb_base) too; no position table.
        if (r.preset.nomic_bert) set_f32(m, a + ".rope.freq_base", p.rope_freq_base);
        return;
    }
    set_u32(m, a + ".attention.head_count_kv", p.n_head_kv);
    set_f32(m, a + ".attention.layer_norm_rms_epsilon", p.rms_norm_eps);
    set_f32(m, a + ".rope.freq_base", p.rope_freq_base);
    if (r.preset.write_rope_dims) {
        set_u32(m, a + ".rope.dimension_count", r.preset.rope_dims > 0 ? r.preset.rope_dims : p.head_dim);
    }
    if (r.preset.write_head_lengths) {
        set_u32(m, a + ".attention.key_length", p.head_dim);
        set_u32(m, a + ".attention.value_length", p.head_dim);
    }
    if (p.n_expert > 0) {
        set_u32(m, a + ".expert_count", p.n_expert);
        set_u32(m, a + ".expert_used_count", p.n_expert_used);
        if (r.preset.write_expert_ff) set_u32(m, a + ".expert_feed_forward_length", p.n_ff_expert);
    }
    if (r.preset.sliding_window > 0) set_u32(m, a + ".attention.sliding_window", r.preset.sliding_window);
    if (r.preset.rope_scaling_linear > 0) {
        m.set_string(a + ".rope.scaling.type", "linear");
        set_f32(m, a + ".rope.scaling.factor", r.preset.rope_scaling_linear);
    }
    if (r.preset.rope_scaling_yarn > 0) {
        m.set_string(a + ".rope.scaling.type", "yarn");
        set_f32(m, a + ".rope.scaling.factor", r.preset.rope_scaling_yarn);
        set_u32(m, a + ".rope.scaling.original_context_length", r.preset.rope_scaling_original_context);
    }
    if (r.preset.rope_scaling_yarn == 0 && r.preset.rope_scaling_original_context > 0) {
        set_u32(m, a + ".rope.scaling.original_context_length", r.preset.rope_scaling_original_context);
    }
    if (r.preset.rope_attn_factor > 0) set_f32(m, a + ".rope.scaling.attn_factor", r.preset.rope_attn_factor);
    if (r.preset.yarn_log_multiplier > 0)
        set_f32(m, a + ".rope.scaling.yarn_log_multiplier", r.preset.yarn_log_multiplier);
    if (r.preset.attn_temperature_scale > 0) {
        set_f32(m, a + ".attention.temperature_scale", r.preset.attn_temperature_scale);
    }
    if (r.preset.granite) {
        const GraniteScales& g = r.preset.granite_scales;
        set_f32(m, a + ".embedding_scale", g.embedding);
        set_f32(m, a + ".residual_scale", g.residual);
        set_f32(m, a + ".attention.scale", g.attention);
        set_f32(m, a + ".logit_scale", g.logit);
    }
    if (a == "glm4moe") {
        // As Glm4MoeModel writes them; the leading dense layers are at most the layers written.
        const Glm4MoeSpec& g = r.preset.glm4moe;
        set_u32(m, a + ".leading_dense_block_count", std::min(g.lead_dense, p.n_layer));
        set_u32(m, a + ".expert_shared_count", g.shared_experts);
        set_u32(m, a + ".expert_gating_func", 2);  // llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID
        set_f32(m, a + ".expert_weights_scale", g.weights_scale);
        m.set(a + ".expert_weights_norm", GgufValue{g.weights_norm});
        set_u32(m, a + ".nextn_predict_layers", g.nextn_layers);
    }
}

namespace {

Result<void> write_tokenizer_metadata(GgufMetadata& m, const PresetSpec& preset) {
    const VocabSpec& spec = preset.vocab;
    Result<SynthVocab> built = build_vocab(spec);
    if (!built) return std::move(built).error();
    const SynthVocab& v = *built;

    m.set_string("tokenizer.ggml.model", spec.model);
    m.set_string("tokenizer.ggml.pre", spec.pre);
    m.set_string_array("tokenizer.ggml.tokens", v.tokens);
    if (!v.scores.empty()) {
        m.set_array<float>("tokenizer.ggml.scores", GgufValueType::f32, std::span<const float>(v.scores));
    }
    m.set_array<int32_t>("tokenizer.ggml.token_type", GgufValueType::i32, std::span<const int32_t>(v.token_types));
    if (!v.merges.empty()) m.set_string_array("tokenizer.ggml.merges", v.merges);
    const std::pair<const char*, std::string_view> ids[] = {
        {"tokenizer.ggml.bos_token_id", spec.bos},     {"tokenizer.ggml.eos_token_id", spec.eos},
        {"tokenizer.ggml.unknown_token_id", spec.unk}, {"tokenizer.ggml.padding_token_id", spec.pad},
        {"tokenizer.ggml.eot_token_id", spec.eot},     {"tokenizer.ggml.eom_token_id", spec.eom},
    };
    for (const auto& [key, text] : ids) {
        if (text.empty()) continue;
        const std::optional<uint32_t> id = find_token(v, text);
        if (!id)
            return make_error(ErrorCode::internal, fmt::format("{}: token '{}' is not in the vocabulary", key, text));
        set_u32(m, key, *id);
    }
    m.set("tokenizer.ggml.add_bos_token", GgufValue{spec.add_bos});
    m.set("tokenizer.ggml.add_eos_token", GgufValue{false});
    if (spec.kind == VocabKind::spm && !spec.add_space_prefix) {
        m.set("tokenizer.ggml.add_space_prefix", GgufValue{false});
    }
    if (preset.bert) set_u32(m, "tokenizer.ggml.token_type_count", 2);
    if (preset.chat_template != ChatTemplateId::none) {
        m.set_string("tokenizer.chat_template", chat_template(preset.chat_template));
    }
    return {};
}

}  // namespace

Result<Layout> lay_out(const SynthOptions& options) {
    Result<ResolvedOptions> resolved = resolve_options(options);
    if (!resolved) return std::move(resolved).error();
    Layout layout{std::move(*resolved), {}, GgufWriter()};
    const ResolvedOptions& r = layout.resolved;
    write_model_metadata(layout.writer.metadata(), r, options);
    PH_TRY(write_tokenizer_metadata(layout.writer.metadata(), r.preset));
    layout.tensors = plan_tensors(r.preset, *r.type);
    for (const PlannedTensor& t : layout.tensors) PH_TRY(layout.writer.add_tensor(t.spec));
    return layout;
}

SynthPlan make_plan(const Layout& layout) {
    SynthPlan plan;
    plan.preset = layout.resolved.preset.info;
    const FileTypeSpec& type = *layout.resolved.type;
    plan.type = SynthType{std::string(type.name), type.llama_ftype, std::string(type.description)};
    for (const PlannedTensor& t : layout.tensors) {
        plan.tensors.push_back(
            SynthTensor{t.spec.name, std::string(type_traits(t.spec.type).name), t.spec.dims, t.spec.n_bytes()});
        plan.n_params += static_cast<uint64_t>(t.spec.n_elements());
    }
    plan.file_bytes = layout.writer.file_bytes();
    return plan;
}

}  // namespace powerhouse::synth
