// A model's chat template and tokens from its GGUF metadata, the family guess, and the
// choice between the model's template and a built-in one.
#include <fmt/format.h>

#include <algorithm>

#include "gguf/gguf_model.h"
#include "powerhouse/chat_template.h"
#include "template/fallback_templates.h"

namespace powerhouse {

std::string_view template_family_name(TemplateFamily family) {
    switch (family) {
        case TemplateFamily::chatml:
            return "chatml";
        case TemplateFamily::llama3:
            return "llama3";
        case TemplateFamily::mistral:
            return "mistral";
        case TemplateFamily::gemma:
            return "gemma";
        case TemplateFamily::harmony:
            return "harmony";
    }
    return "chatml";
}

std::string_view builtin_template(TemplateFamily family) {
    switch (family) {
        case TemplateFamily::chatml:
            return jinja::kChatmlTemplate;
        case TemplateFamily::llama3:
            return jinja::kLlama3Template;
        case TemplateFamily::mistral:
            return jinja::kMistralTemplate;
        case TemplateFamily::gemma:
            return jinja::kGemmaTemplate;
        case TemplateFamily::harmony:
            return jinja::kHarmonyTemplate;
    }
    return jinja::kChatmlTemplate;
}

std::optional<TemplateFamily> guess_template_family(std::string_view architecture, std::string_view tokenizer_pre,
                                                    std::span<const std::string_view> tokens) {
    // A family's turn markers in the vocabulary are the strongest evidence: fine-tunes keep
    // the base architecture but often switch to ChatML.
    // Harmony (gpt-oss) needs both its turn and its channel marker.
    bool chatml = false, llama3 = false, gemma = false, mistral = false, harmony_start = false, harmony_channel = false;
    for (std::string_view token : tokens) {
        if (token == "<|im_start|>") chatml = true;
        if (token == "<|start_header_id|>") llama3 = true;
        if (token == "<start_of_turn>") gemma = true;
        if (token == "[INST]") mistral = true;
        if (token == "<|start|>") harmony_start = true;
        if (token == "<|channel|>") harmony_channel = true;
    }
    if (chatml) return TemplateFamily::chatml;
    if (harmony_start && harmony_channel) return TemplateFamily::harmony;
    if (llama3) return TemplateFamily::llama3;
    if (gemma) return TemplateFamily::gemma;
    if (mistral) return TemplateFamily::mistral;
    if (architecture.starts_with("gemma")) return TemplateFamily::gemma;
    if (architecture.starts_with("qwen")) return TemplateFamily::chatml;
    if (architecture == "gpt-oss") return TemplateFamily::harmony;
    if (tokenizer_pre == "llama-bpe" || tokenizer_pre == "llama3") return TemplateFamily::llama3;
    if (architecture == "mistral" || architecture == "mixtral" || tokenizer_pre == "tekken") {
        return TemplateFamily::mistral;
    }
    return std::nullopt;
}

Result<ModelTemplateInfo> read_model_template_info(const std::filesystem::path& model_path) {
    Result<GgufModel> model = GgufModel::open(model_path);
    if (!model) return model.error();
    const GgufMetadata& meta = model->metadata();
    ModelTemplateInfo info;
    if (auto text = meta.get_string("tokenizer.chat_template")) info.chat_template = std::string(*text);
    if (auto arch = meta.get_string("general.architecture")) info.architecture = std::string(*arch);
    if (auto pre = meta.get_string("tokenizer.ggml.pre")) info.tokenizer_pre = std::string(*pre);
    std::span<const std::string_view> tokens;
    const GgufArray* token_array = meta.get_array("tokenizer.ggml.tokens");
    if (token_array != nullptr && token_array->element_type == GgufValueType::string) tokens = token_array->strings;
    auto token_text = [&](std::string_view key) {
        const std::optional<uint64_t> id = meta.get_uint(key);
        return id && *id < tokens.size() ? std::string(tokens[*id]) : std::string();
    };
    info.bos_token = token_text("tokenizer.ggml.bos_token_id");
    info.eos_token = token_text("tokenizer.ggml.eos_token_id");
    info.family = guess_template_family(info.architecture, info.tokenizer_pre, tokens);
    return info;
}

namespace {

// The template, when it parses and renders one plain message: a filter that does not exist
// fails only where it is reached (as in jinja2), so a template that parses may still fail
// on every conversation.
Result<ChatTemplate> usable_template(std::string_view source, const ModelTemplateInfo& info,
                                     const TemplateLimits& limits) {
    Result<ChatTemplate> parsed = ChatTemplate::parse(source, limits);
    if (!parsed) return parsed.error();
    nlohmann::ordered_json probe = {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                                    {"add_generation_prompt", true}};
    add_default_tokens(probe, info);
    RenderOptions options;
    options.limits = limits;
    Result<std::string> rendered = parsed->render(probe, options);
    if (!rendered) return rendered.error();
    return parsed;
}

}  // namespace

Result<ResolvedTemplate> resolve_given_template(std::string_view source, const ModelTemplateInfo& info,
                                                const TemplateLimits& limits) {
    Result<ChatTemplate> given = usable_template(source, info, limits);
    if (!given) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("the chat template given cannot be used: {}", given.error().message));
    }
    ResolvedTemplate resolved{std::move(given).value(), false, info.family.value_or(TemplateFamily::chatml), {}};
    resolved.note = info.chat_template ? "using the chat template given instead of the model's own"
                                       : "using the chat template given (the model has none)";
    return resolved;
}

ResolvedTemplate resolve_chat_template(const ModelTemplateInfo& info, const TemplateLimits& limits) {
    const TemplateFamily family = info.family.value_or(TemplateFamily::chatml);
    const std::string why_family =
        info.family ? "chosen from the model's metadata" : "nothing in the model's metadata points to a family";
    std::string reason;
    if (info.chat_template) {
        Result<ChatTemplate> own = usable_template(*info.chat_template, info, limits);
        if (own) return ResolvedTemplate{std::move(own).value(), false, family, {}};
        reason = fmt::format("the model's chat template cannot be used ({})", own.error().message);
    } else {
        reason = "the model has no chat template";
    }
    Result<ChatTemplate> builtin = ChatTemplate::parse(builtin_template(family), limits);
    ResolvedTemplate resolved{std::move(builtin).value(), true, family, {}};
    resolved.note =
        fmt::format("{}: using the built-in {} template ({})", reason, template_family_name(family), why_family);
    return resolved;
}

void add_default_tokens(nlohmann::ordered_json& context, const ModelTemplateInfo& info) {
    if (!context.is_object()) return;
    if (!context.contains("bos_token")) context["bos_token"] = info.bos_token;
    if (!context.contains("eos_token")) context["eos_token"] = info.eos_token;
}

}  // namespace powerhouse
