// The interpreter against Python jinja2 (tests/data/templates, written by
// scripts/fixtures/make_template_fixture.py): every published template (gpt-oss's
// harmony format included) x every conversation, and one small template per feature, byte
// for byte. Where jinja2 fails, the interpreter must fail too, and with the same message
// when the template raised it.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/template/template_test_support.h"
#include "powerhouse/chat_template.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using nlohmann::ordered_json;

struct FixtureCase {
    std::string name;  // "template/context" or "feature/name"
    std::string source;
    ordered_json context;
    ordered_json expected;  // string, or {"error": ..., "type": ...}
};

std::string escape_for_name(std::string name) {
    for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return name;
}

std::vector<FixtureCase> template_cases() {
    std::vector<FixtureCase> cases;
    const auto folder = test::data_dir() / "templates";
    const ordered_json contexts = ordered_json::parse(test::read_file(folder / "contexts.json"));
    const ordered_json expected = ordered_json::parse(test::read_file(folder / "expected.json"));
    for (const auto& [template_name, per_context] : expected.items()) {
        // Models' templates kept with the fixtures (SmolLM2's, gpt-oss's), else published ones.
        const auto local = folder / (template_name + ".jinja");
        const auto path = std::filesystem::exists(local)
                              ? local
                              : test::shared_testdata_dir() / "templates" / (template_name + ".jinja");
        const std::string source = test::read_file(path);
        for (const auto& [context_name, result] : per_context.items()) {
            cases.push_back({template_name + "/" + context_name, source, contexts.at(context_name), result});
        }
    }
    return cases;
}

std::vector<FixtureCase> feature_cases() {
    std::vector<FixtureCase> cases;
    const ordered_json features =
        ordered_json::parse(test::read_file(test::data_dir() / "templates" / "features.json"));
    for (const auto& [name, feature] : features.items()) {
        cases.push_back({"feature/" + name, feature.at("template").get<std::string>(), feature.at("context"),
                         feature.at("expected")});
    }
    return cases;
}

void check_case(const FixtureCase& c) {
    const Result<std::string> rendered = render_template(c.source, c.context, test::fixture_options());
    if (c.expected.is_string()) {
        ASSERT_TRUE(rendered.ok()) << c.name << ": jinja2 renders it, we fail with: " << rendered.error().message;
        const std::string expected = c.expected.get<std::string>();
        EXPECT_EQ(*rendered, expected) << c.name << ": " << test::describe_difference(expected, *rendered);
        // Following where each byte came from must not change a byte of the output.
        const Result<ChatTemplate> parsed = ChatTemplate::parse(c.source);
        ASSERT_TRUE(parsed.ok());
        const Result<RenderedPrompt> prompt = parsed->render_prompt(c.context, test::fixture_options());
        ASSERT_TRUE(prompt.ok()) << c.name << ": " << prompt.error().message;
        EXPECT_EQ(prompt->text, expected) << c.name;
        size_t previous_end = 0;
        for (const auto& [begin, end] : prompt->data_ranges) {
            EXPECT_TRUE(begin < end && end <= prompt->text.size()) << c.name;
            EXPECT_TRUE(begin == 0 || begin > previous_end) << c.name << ": ranges overlap or touch";
            previous_end = end;
        }
        return;
    }
    const std::string message = c.expected.at("error").get<std::string>();
    const std::string type = c.expected.at("type").get<std::string>();
    ASSERT_FALSE(rendered.ok()) << c.name << ": jinja2 fails (" << type << ": " << message << "), we render:\n"
                                << *rendered;
    // Errors carry "LINE:COLUMN: " before the message.
    const std::string& ours = rendered.error().message;
    if (type == "TemplateError") {
        // raise_exception: the template's own words.
        EXPECT_TRUE(ours.ends_with(": " + message))
            << c.name << ": expected the template's message '" << message << "', got '" << ours << "'";
    }
}

class TemplateFixture : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(TemplateFixture, MatchesJinja2) {
    check_case(GetParam());
}

std::string case_name(const ::testing::TestParamInfo<FixtureCase>& param) {
    return escape_for_name(param.param.name);
}

INSTANTIATE_TEST_SUITE_P(Templates, TemplateFixture, ::testing::ValuesIn(template_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Features, TemplateFixture, ::testing::ValuesIn(feature_cases()), case_name);

TEST(TemplateFixtureFiles, CoverEveryTemplateAndContext) {
    const auto cases = template_cases();
    std::map<std::string, int> per_template;
    for (const auto& c : cases) ++per_template[c.name.substr(0, c.name.find('/'))];
    EXPECT_EQ(per_template.size(), 9u);  // 7 published templates + SmolLM2 + gpt-oss
    for (const auto& [name, count] : per_template) EXPECT_GE(count, 43) << name;
    EXPECT_GE(feature_cases().size(), 130u);
}

// Errors other than raise_exception come from Python's exceptions; our messages follow
// them closely, and this keeps count so that drift shows.
TEST(TemplateFixtureFiles, MostErrorMessagesMatchPython) {
    int errors = 0;
    int matching = 0;
    std::string mismatches;
    for (const auto& cases : {template_cases(), feature_cases()}) {
        for (const auto& c : cases) {
            if (c.expected.is_string()) continue;
            ++errors;
            const Result<std::string> rendered = render_template(c.source, c.context, test::fixture_options());
            if (rendered.ok()) continue;
            const std::string message = c.expected.at("error").get<std::string>();
            if (rendered.error().message.ends_with(": " + message)) {
                ++matching;
            } else {
                mismatches += fmt::format("  {}: python '{}', ours '{}'\n", c.name, message, rendered.error().message);
            }
        }
    }
    std::printf("%d of %d error messages match Python's exactly\n%s", matching, errors, mismatches.c_str());
    EXPECT_GE(matching * 4, errors * 3) << mismatches;
}

}  // namespace
}  // namespace powerhouse
