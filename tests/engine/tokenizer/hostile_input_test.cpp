// Inputs meant to hurt: huge words, huge runs of white space, random bytes, walls of special
// tokens. They must finish (no timing assertions; they take seconds, not minutes) and give
// sane results.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace powerhouse {
namespace {

constexpr size_t kTenMegabytes = 10u << 20;

std::string random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::string bytes(n, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
    return bytes;
}

void expect_valid_ids(const Tokenizer& tokenizer, const std::vector<TokenId>& ids) {
    for (TokenId id : ids) {
        ASSERT_TRUE(tokenizer.is_valid(id)) << id;
        ASSERT_FALSE(tokenizer.is_control(id)) << id;
    }
}

TEST(HostileInput, TenMegabytesOfOneLetter) {
    const Tokenizer& smol = test::smollm2();
    const std::string text(kTenMegabytes, 'a');
    const std::vector<TokenId> ids = smol.tokenize(text, false, false);
    ASSERT_FALSE(ids.empty());
    EXPECT_LT(ids.size(), text.size());
    expect_valid_ids(smol, ids);
    EXPECT_EQ(smol.detokenize(ids), text);
}

TEST(HostileInput, TenMegabytesOfSpaces) {
    const Tokenizer& smol = test::smollm2();
    const std::string text(kTenMegabytes, ' ');
    const std::vector<TokenId> ids = smol.tokenize(text, false, false);
    expect_valid_ids(smol, ids);
    EXPECT_EQ(smol.detokenize(ids), text);
}

TEST(HostileInput, OneMegabyteOfRandomBytes) {
    const Tokenizer& smol = test::smollm2();
    const std::string text = random_bytes(1u << 20, 1);
    const std::vector<TokenId> ids = smol.tokenize(text, false, false);
    expect_valid_ids(smol, ids);
    const std::string back = smol.detokenize(ids);
    EXPECT_TRUE(is_valid_utf8(back));
    EXPECT_GT(back.size(), text.size() / 2);
    // With special parsing on, random bytes hold no special token text.
    EXPECT_EQ(smol.tokenize(text, false, true), ids);
}

TEST(HostileInput, SentencePieceHugeInputs) {
    const Tokenizer& llama = test::shared_vocab("llama-spm");
    for (const std::string& text :
         {std::string(kTenMegabytes, 'a'), std::string(kTenMegabytes, ' '), random_bytes(1u << 20, 2)}) {
        const std::vector<TokenId> ids = llama.tokenize(text, true, false);
        ASSERT_FALSE(ids.empty());
        expect_valid_ids(llama, std::vector<TokenId>(ids.begin() + 1, ids.end()));
        const std::string back = llama.detokenize(ids);
        EXPECT_TRUE(is_valid_utf8(back));
        if (is_valid_utf8(text)) {
            EXPECT_EQ(back, text);
        }
    }
}

TEST(HostileInput, WallsOfSpecialTokens) {
    const Tokenizer& smol = test::smollm2();
    std::string wall;
    for (int i = 0; i < 100000; ++i) wall += "<|im_start|><|im_end|x";
    const std::vector<TokenId> parsed = smol.tokenize(wall, false, true);
    EXPECT_EQ(std::count(parsed.begin(), parsed.end(), 1), 100000);
    const std::vector<TokenId> plain = smol.tokenize(wall, false, false);
    expect_valid_ids(smol, plain);
    EXPECT_EQ(smol.detokenize(plain), wall);
    // Thousands of user-defined tokens, densely used.
    const Tokenizer& deepseek = test::shared_vocab("deepseek-llm");
    std::string umlauts;
    for (int i = 0; i < 500000; ++i) umlauts += "üöx";
    const std::vector<TokenId> ids = deepseek.tokenize(umlauts, false, false);
    EXPECT_EQ(deepseek.detokenize(ids), umlauts);
}

TEST(HostileInput, EveryPreTokenizerOnRandomBytes) {
    for (const char* name : {"gpt-2", "deepseek-llm", "falcon", "starcoder", "phi-3"}) {
        const Tokenizer& tokenizer = test::shared_vocab(name);
        const std::string text = random_bytes(256u << 10, 3);
        const std::vector<TokenId> ids = tokenizer.tokenize(text, false, false);
        expect_valid_ids(tokenizer, ids);
        EXPECT_TRUE(is_valid_utf8(tokenizer.detokenize(ids))) << name;
    }
}

}  // namespace
}  // namespace powerhouse
