// The token ids of every test string of every shared vocabulary equal the reference ids
// (../shared/testdata/vocab/*.out, made with the models' Hugging Face tokenizers).
#include <gtest/gtest.h>

#include <sstream>

#include "tokenizer_test_util.h"

namespace powerhouse {
namespace {

struct VocabCase {
    std::vector<std::string> texts;
    std::vector<std::vector<TokenId>> expected;
};

VocabCase read_case(const std::string& name) {
    const auto base = test::vocab_path(name).string();
    const std::string inp = test::read_file(base + ".inp");
    const std::string out = test::read_file(base + ".out");
    VocabCase c;
    const std::string separator = "\n__ggml_vocab_test__\n";
    size_t pos = 0;
    while (pos < inp.size()) {
        const size_t end = inp.find(separator, pos);
        if (end == std::string::npos) break;
        c.texts.push_back(inp.substr(pos, end - pos));
        pos = end + separator.size();
    }
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream fields(line);
        std::vector<TokenId> ids;
        TokenId id;
        while (fields >> id) ids.push_back(id);
        c.expected.push_back(ids);
    }
    return c;
}

class VocabFile : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabFile, TokenIdsEqualTheReference) {
    const VocabCase c = read_case(GetParam());
    ASSERT_EQ(c.texts.size(), c.expected.size());
    ASSERT_GT(c.texts.size(), 40u);
    const Tokenizer& tokenizer = test::shared_vocab(GetParam());
    size_t mismatches = 0;
    for (size_t i = 0; i < c.texts.size(); ++i) {
        const std::vector<TokenId> ids = tokenizer.tokenize(c.texts[i], false, false);
        if (ids != c.expected[i]) {
            ++mismatches;
            ADD_FAILURE() << GetParam() << " string " << i << " '" << test::printable(c.texts[i]) << "'\n  expected "
                          << test::ids_to_string(c.expected[i]) << "\n  actual   " << test::ids_to_string(ids);
        }
    }
    EXPECT_EQ(mismatches, 0u) << "of " << c.texts.size() << " strings";
}

TEST_P(VocabFile, DetokenizingGivesTheTextBack) {
    const VocabCase c = read_case(GetParam());
    const Tokenizer& tokenizer = test::shared_vocab(GetParam());
    for (size_t i = 0; i < c.texts.size(); ++i) {
        const std::string back = tokenizer.detokenize(tokenizer.tokenize(c.texts[i], false, false));
        EXPECT_EQ(back, c.texts[i]) << GetParam() << " string " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Shared, VocabFile,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "deepseek-llm", "falcon", "starcoder"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                             std::string name = param.param;
                             for (char& ch : name) {
                                 if (ch == '-') ch = '_';
                             }
                             return name;
                         });

}  // namespace
}  // namespace powerhouse
