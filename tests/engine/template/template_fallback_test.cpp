// Built-in templates and the choice between a model's own template and a fallback: the
// family guess from GGUF metadata, resolve_chat_template, and the model file reader on
// SmolLM2. Built-in renders are checked against jinja2 (the published Qwen and Gemma
// templates in the fixtures produce the same text).
#include <gtest/gtest.h>

#include <vector>

#include "engine/template/template_test_support.h"
#include "powerhouse/chat_template.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using nlohmann::ordered_json;

ordered_json fixture_context(const std::string& name) {
    return ordered_json::parse(test::read_file(test::data_dir() / "templates" / "contexts.json")).at(name);
}

std::string fixture_expected(const std::string& template_name, const std::string& context) {
    return ordered_json::parse(test::read_file(test::data_dir() / "templates" / "expected.json"))
        .at(template_name)
        .at(context)
        .get<std::string>();
}

std::string render_builtin(TemplateFamily family, const ordered_json& context) {
    Result<std::string> out = render_template(builtin_template(family), context);
    return out.ok() ? *out : "ERROR: " + out.error().message;
}

TEST(TemplateFallback, GuessesTheFamilyFromTokensFirst) {
    const std::vector<std::string_view> chatml = {"<s>", "<|im_start|>", "<|im_end|>"};
    const std::vector<std::string_view> llama3 = {"<|begin_of_text|>", "<|start_header_id|>"};
    const std::vector<std::string_view> gemma = {"<bos>", "<start_of_turn>", "<end_of_turn>"};
    const std::vector<std::string_view> mistral = {"<s>", "[INST]", "[/INST]"};
    const std::vector<std::string_view> plain = {"<s>", "</s>", "hello"};
    EXPECT_EQ(guess_template_family("llama", "smollm", chatml), TemplateFamily::chatml);  // SmolLM2
    EXPECT_EQ(guess_template_family("llama", "llama-bpe", llama3), TemplateFamily::llama3);
    EXPECT_EQ(guess_template_family("gemma2", "default", gemma), TemplateFamily::gemma);
    EXPECT_EQ(guess_template_family("llama", "default", mistral), TemplateFamily::mistral);
    EXPECT_EQ(guess_template_family("llama", "llama-bpe", chatml), TemplateFamily::chatml);  // a ChatML fine-tune
    EXPECT_EQ(guess_template_family("gemma3", "", plain), TemplateFamily::gemma);
    EXPECT_EQ(guess_template_family("qwen2", "qwen2", plain), TemplateFamily::chatml);
    EXPECT_EQ(guess_template_family("llama", "llama-bpe", plain), TemplateFamily::llama3);
    EXPECT_EQ(guess_template_family("mistral", "", plain), TemplateFamily::mistral);
    EXPECT_EQ(guess_template_family("llama", "default", plain), std::nullopt);
}

TEST(TemplateFallback, BuiltinChatmlMatchesQwenAndSmolLM2) {
    const ordered_json context = fixture_context("system_multi_turn");
    EXPECT_EQ(render_builtin(TemplateFamily::chatml, context),
              fixture_expected("Qwen-Qwen2.5-7B-Instruct", "system_multi_turn"));
    EXPECT_EQ(render_builtin(TemplateFamily::chatml, context), fixture_expected("smollm2", "system_multi_turn"));
}

TEST(TemplateFallback, BuiltinGemmaMatchesGemma2) {
    EXPECT_EQ(render_builtin(TemplateFamily::gemma, fixture_context("no_system_multi_turn")),
              fixture_expected("google-gemma-2-2b-it", "no_system_multi_turn"));
    // Gemma has no system role: the built-in one folds it into the first user turn.
    EXPECT_EQ(render_builtin(TemplateFamily::gemma, fixture_context("single_user")),
              "<s><start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\n");
}

TEST(TemplateFallback, BuiltinLlama3AndMistral) {
    // Expected texts rendered by jinja2 from the same template sources.
    EXPECT_EQ(render_builtin(TemplateFamily::llama3, fixture_context("system_multi_turn")),
              "<s><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nWhat is the capital of France?<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\nThe capital of France is Paris.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nAnd of Japan?<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
    EXPECT_EQ(render_builtin(TemplateFamily::mistral, fixture_context("system_multi_turn")),
              "<s>[INST] You are a helpful assistant.\n\nWhat is the capital of France? [/INST]"
              "The capital of France is Paris.</s>[INST] And of Japan? [/INST]");
}

TEST(TemplateFallback, BuiltinsSurviveToolCallsAndNullContent) {
    for (TemplateFamily family : {TemplateFamily::chatml, TemplateFamily::llama3, TemplateFamily::mistral,
                                  TemplateFamily::gemma, TemplateFamily::harmony}) {
        const std::string out = render_builtin(family, fixture_context("tool_calls"));
        EXPECT_FALSE(out.starts_with("ERROR")) << template_family_name(family) << ": " << out;
    }
}

TEST(TemplateFallback, ResolveUsesTheModelsTemplateWhenItParses) {
    ModelTemplateInfo info;
    info.chat_template = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}";
    info.family = TemplateFamily::llama3;
    const ResolvedTemplate resolved = resolve_chat_template(info);
    EXPECT_FALSE(resolved.is_fallback);
    EXPECT_TRUE(resolved.note.empty());
    EXPECT_EQ(resolved.chat_template.source(), *info.chat_template);
}

TEST(TemplateFallback, ResolveFallsBackWhenTheTemplateIsMissingOrBroken) {
    ModelTemplateInfo missing;
    missing.family = TemplateFamily::gemma;
    const ResolvedTemplate a = resolve_chat_template(missing);
    EXPECT_TRUE(a.is_fallback);
    EXPECT_EQ(a.fallback_family, TemplateFamily::gemma);
    EXPECT_EQ(a.chat_template.source(), builtin_template(TemplateFamily::gemma));
    EXPECT_EQ(a.note,
              "the model has no chat template: using the built-in gemma template (chosen from the model's "
              "metadata)");

    ModelTemplateInfo broken;
    broken.chat_template = "{% for m in messages %}{{ m.content|frobnicate }}{% endfor %}";
    const ResolvedTemplate b = resolve_chat_template(broken);
    EXPECT_TRUE(b.is_fallback);
    EXPECT_EQ(b.fallback_family, TemplateFamily::chatml);
    EXPECT_EQ(b.note,
              "the model's chat template cannot be used (1:37: no filter named 'frobnicate'): using the built-in "
              "chatml template (nothing in the model's metadata points to a family)");
}

// A filter that does not exist inside an if fails only where it is reached, as in jinja2
// (DeepSeek-V3.2's template uses from_json on a branch most conversations never take). So a
// template that parses is tried on one plain message: one that takes such a branch every time
// would fail every conversation, and the built-in one is used instead.
TEST(TemplateFallback, ResolveFallsBackWhenTheTemplateParsesButCannotRenderAMessage) {
    ModelTemplateInfo rare;
    rare.chat_template =
        "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{{ m.content|from_json }}"
        "{% endif %}{% endfor %}";
    const ResolvedTemplate kept = resolve_chat_template(rare);
    EXPECT_FALSE(kept.is_fallback) << kept.note;

    ModelTemplateInfo always;
    always.chat_template = "{% for m in messages %}{% if true %}{{ m.content|from_json }}{% endif %}{% endfor %}";
    always.family = TemplateFamily::llama3;
    const ResolvedTemplate replaced = resolve_chat_template(always);
    EXPECT_TRUE(replaced.is_fallback);
    EXPECT_EQ(replaced.chat_template.source(), builtin_template(TemplateFamily::llama3));
    EXPECT_EQ(replaced.note,
              "the model's chat template cannot be used (1:50: no filter named 'from_json'): using the built-in "
              "llama3 template (chosen from the model's metadata)");
}

TEST(TemplateFallback, ReadsSmolLM2sTemplateAndTokens) {
    Result<ModelTemplateInfo> info = read_model_template_info(test::test_model_path());
    ASSERT_TRUE(info.ok()) << info.error().message;
    ASSERT_TRUE(info->chat_template.has_value());
    EXPECT_EQ(*info->chat_template, test::read_file(test::data_dir() / "templates" / "smollm2.jinja"));
    EXPECT_EQ(info->bos_token, "<|im_start|>");
    EXPECT_EQ(info->eos_token, "<|im_end|>");
    EXPECT_EQ(info->architecture, "llama");
    EXPECT_EQ(info->tokenizer_pre, "smollm");
    EXPECT_EQ(info->family, TemplateFamily::chatml);
}

TEST(TemplateFallback, MissingModelIsAnError) {
    test::TempDir dir;
    EXPECT_FALSE(read_model_template_info(dir / "missing.gguf").ok());
}

TEST(TemplateFallback, DefaultTokensDoNotOverrideTheContext) {
    ModelTemplateInfo info;
    info.bos_token = "<bos>";
    info.eos_token = "<eos>";
    ordered_json context = {{"messages", ordered_json::array()}, {"eos_token", "mine"}};
    add_default_tokens(context, info);
    EXPECT_EQ(context["bos_token"], "<bos>");
    EXPECT_EQ(context["eos_token"], "mine");
}

}  // namespace
}  // namespace powerhouse
