// Rendering behaviour beyond the jinja2 fixtures: message content is data, errors name
// line:column, parse once / render many (also from several threads), strftime_now's
// clock, transformers' {% generation %} tag, and what the subset refuses.
#include <gtest/gtest.h>

#include <thread>

#include "engine/template/template_test_support.h"
#include "powerhouse/chat_template.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using nlohmann::ordered_json;

std::string render(std::string_view source, const ordered_json& context = ordered_json::object()) {
    Result<std::string> out = render_template(source, context, test::fixture_options());
    return out.ok() ? *out : "ERROR: " + out.error().message;
}

std::string parse_error(std::string_view source) {
    Result<ChatTemplate> parsed = ChatTemplate::parse(source);
    return parsed.ok() ? "parsed" : parsed.error().message;
}

std::string smollm2_template() {
    return test::read_file(test::data_dir() / "templates" / "smollm2.jinja");
}

TEST(TemplateRender, MessageContentIsNeverEvaluated) {
    const ordered_json context = {
        {"messages",
         {{{"role", "user"}, {"content", "{{ 7*7 }} {% for x in range(3) %}x{% endfor %} {# c #}"}},
          {{"role", "assistant"}, {"content", "{{ raise_exception('boom') }}{% raw %}"}}}},
        {"add_generation_prompt", false}};
    EXPECT_EQ(render(smollm2_template(), context),
              "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
              "<|im_start|>user\n{{ 7*7 }} {% for x in range(3) %}x{% endfor %} {# c #}<|im_end|>\n"
              "<|im_start|>assistant\n{{ raise_exception('boom') }}{% raw %}<|im_end|>\n");
}

TEST(TemplateRender, SyntaxErrorsNameLineAndColumn) {
    EXPECT_EQ(parse_error("line one\n{% for x in xs %}\n{{ x }}"),
              "2:4: unexpected end of template: the 'for' block opened here is never closed (expected 'endfor' or "
              "'else')");
    EXPECT_EQ(parse_error("{% if a %}\n  {% endfor %}"), "2:6: unknown tag 'endfor'");
    EXPECT_EQ(parse_error("a\n  {{ x|no_such_filter }}"), "2:8: no filter named 'no_such_filter'");
    EXPECT_EQ(parse_error("{{ x is no_such_test }}"), "1:9: no test named 'no_such_test'");
    EXPECT_EQ(parse_error("{% frobnicate %}"), "1:4: unknown tag 'frobnicate'");
    EXPECT_EQ(parse_error("{{ }}"), "1:4: expected an expression, got end of print statement '}}'");
    EXPECT_EQ(parse_error("{{ x + }}"), "1:8: expected an expression, got end of print statement '}}'");
    EXPECT_EQ(parse_error("{% set = 1 %}"), "1:8: expected a name, got '='");
    EXPECT_EQ(parse_error("{% break %}"), "1:4: 'break' outside of a for loop");
    EXPECT_EQ(parse_error("{{ x|wordwrap }}"), "1:6: the filter 'wordwrap' is not supported");
    EXPECT_EQ(
        parse_error("{% include 'other.jinja' %}"),
        "1:4: the 'include' tag is not supported (a chat template cannot load other templates or run extensions)");
    EXPECT_EQ(parse_error("{% for x in xs recursive %}{% endfor %}"), "1:16: recursive for loops are not supported");
    EXPECT_EQ(parse_error("\xFF"), "1:1: the template is not valid UTF-8");
}

TEST(TemplateRender, RuntimeErrorsNameLineAndColumn) {
    EXPECT_EQ(render("a\nb {{ missing + 1 }}"), "ERROR: 2:14: 'missing' is undefined");
    EXPECT_EQ(
        render("{% for m in messages %}\n  {{ m.content + 1 }}\n{% endfor %}", {{"messages", {{{"content", "x"}}}}}),
        "ERROR: 2:16: can only concatenate str (not \"int\") to str");
    EXPECT_EQ(render("{% if true %}\n    {{ raise_exception('Roles must alternate') }}\n{% endif %}"),
              "ERROR: 2:8: Roles must alternate");
}

TEST(TemplateRender, ErrorCodesSayWhatKindOfFailure) {
    EXPECT_EQ(ChatTemplate::parse("{% if %}").error().code, ErrorCode::format);
    EXPECT_EQ(ChatTemplate::parse("{% include 'x' %}").error().code, ErrorCode::unsupported);
    EXPECT_EQ(render_template("{{ raise_exception('no') }}", ordered_json::object()).error().code,
              ErrorCode::invalid_argument);
    EXPECT_EQ(render_template("{{ range(10**6) }}", ordered_json::object()).error().code, ErrorCode::unsupported);
    EXPECT_EQ(render_template("{{ 1 }}", ordered_json::array()).error().message,
              "1:1: the context must be a JSON object");
}

TEST(TemplateRender, ParseOnceRenderManyTimesAndFromManyThreads) {
    Result<ChatTemplate> parsed = ChatTemplate::parse(smollm2_template());
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    const ChatTemplate chat_template = *parsed;
    auto context_for = [](int i) {
        return ordered_json{{"messages", {{{"role", "user"}, {"content", "message " + std::to_string(i)}}}},
                            {"add_generation_prompt", true}};
    };
    auto expected_for = [](int i) {
        return "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
               "<|im_start|>user\nmessage " +
               std::to_string(i) + "<|im_end|>\n<|im_start|>assistant\n";
    };
    std::vector<std::thread> threads;
    std::vector<int> failures(8, 0);
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 200; ++i) {
                const Result<std::string> out = chat_template.render(context_for(t * 1000 + i));
                if (!out.ok() || *out != expected_for(t * 1000 + i)) ++failures[t];
            }
        });
    }
    for (auto& thread : threads) thread.join();
    for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

TEST(TemplateRender, StrftimeNowUsesTheGivenMomentOrTheClock) {
    EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}"), "26 Jul 2024");
    const Result<std::string> today = render_template("{{ strftime_now('%Y-%m-%d') }}", ordered_json::object());
    ASSERT_TRUE(today.ok());
    EXPECT_EQ(today->size(), 10u);
    EXPECT_EQ((*today)[4], '-');
    EXPECT_NE(*today, "2024-07-26");
}

TEST(TemplateRender, GenerationTagRendersItsBody) {
    // transformers' AssistantTracker extension: {% generation %} marks assistant text.
    EXPECT_EQ(render("{% for m in ['a', 'b'] %}<{% generation %}{{ m }}{% set x = 1 %}{% endgeneration %}>{% endfor %}"
                     "[{{ x }}]"),
              "<a><b>[]");
}

TEST(TemplateRender, ContextValuesKeepTheirOrderAndTypes) {
    const ordered_json context = ordered_json::parse(R"({"tool": {"z": 1, "a": [1.0, 2, "x", null, true], "m": {}}})");
    EXPECT_EQ(
        render("{{ tool|tojson }}|{{ tool }}", context),
        "{\"z\": 1, \"a\": [1.0, 2, \"x\", null, true], \"m\": {}}|{'z': 1, 'a': [1.0, 2, 'x', None, True], 'm': {}}");
}

TEST(TemplateRender, MacrosAndScopesFollowJinja2) {
    // A macro defined in a loop keeps the loop variable's value at definition time.
    EXPECT_EQ(render("{% for i in [1, 2] %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}"), "12");
    // A macro may call itself and later top-level macros.
    EXPECT_EQ(render("{% macro a(n) %}{% if n > 0 %}{{ n }}{{ a(n - 1) }}{% endif %}{% endmacro %}{{ a(3) }}"), "321");
    // The caller of a {% call %} block sees the caller's scope.
    EXPECT_EQ(
        render("{% macro w() %}[{{ caller() }}]{% endmacro %}{% set v = 'in' %}{% call w() %}{{ v }}{% endcall %}"),
        "[in]");
}

TEST(TemplateRender, EmptyAndWhitespaceTemplates) {
    EXPECT_EQ(render(""), "");
    EXPECT_EQ(render("\n"), "");
    EXPECT_EQ(render("  \n  "), "  \n  ");
    EXPECT_EQ(render("{# only a comment #}"), "");
}

}  // namespace
}  // namespace powerhouse
