// The streaming detokenizer: fed one id at a time it emits exactly detokenize() of all the
// ids, and never a chunk that is not valid UTF-8.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace powerhouse {
namespace {

// Feeds ids one by one; checks every chunk is valid UTF-8 and returns the concatenation.
std::string stream(const Tokenizer& tokenizer, const std::vector<TokenId>& ids, DetokenizeOptions options = {}) {
    StreamingDetokenizer detokenizer(tokenizer, options);
    std::string text;
    for (TokenId id : ids) {
        const std::string chunk = detokenizer.feed(id);
        EXPECT_TRUE(is_valid_utf8(chunk)) << "chunk '" << test::printable(chunk) << "' after id " << id;
        text += chunk;
    }
    const std::string rest = detokenizer.flush();
    EXPECT_TRUE(is_valid_utf8(rest));
    EXPECT_FALSE(detokenizer.has_pending());
    return text + rest;
}

TEST(StreamingDetokenizer, EqualsDetokenizeOnTheCorpus) {
    const Tokenizer& tokenizer = test::smollm2();
    for (const std::string& line : test::corpus()) {
        const std::vector<TokenId> ids = tokenizer.tokenize(line, false, true);
        for (bool special : {false, true}) {
            const std::string whole = tokenizer.detokenize(ids, special);
            EXPECT_TRUE(is_valid_utf8(whole));
            EXPECT_EQ(stream(tokenizer, ids, {special, true}), whole) << test::printable(line);
        }
    }
}

TEST(StreamingDetokenizer, EqualsDetokenizeOnRandomIds) {
    std::mt19937 rng(7);
    for (const char* name : {"llama-spm", "phi-3", "gpt-2", "deepseek-llm"}) {
        const Tokenizer& tokenizer = test::shared_vocab(name);
        std::uniform_int_distribution<TokenId> any(0, tokenizer.n_vocab() - 1);
        std::uniform_int_distribution<TokenId> low(0, 300);  // SentencePiece byte tokens live here
        for (int round = 0; round < 300; ++round) {
            std::vector<TokenId> ids(static_cast<size_t>(1 + round % 17));
            for (TokenId& id : ids) id = (rng() % 2) ? any(rng) : low(rng);
            EXPECT_EQ(stream(tokenizer, ids), tokenizer.detokenize(ids)) << name << ": " << test::ids_to_string(ids);
        }
    }
}

TEST(StreamingDetokenizer, HoldsACharacterSplitAcrossByteTokens) {
    const Tokenizer& llama = test::shared_vocab("llama-spm");
    // "🦀" is not in the Llama 2 vocabulary: it becomes four byte-fallback tokens.
    const std::vector<TokenId> ids = llama.tokenize("a🦀", false, false);
    ASSERT_GE(ids.size(), 5u) << test::ids_to_string(ids);
    const std::vector<TokenId> crab(ids.end() - 4, ids.end());
    EXPECT_EQ(llama.token_text(crab[0]), "<0xF0>");
    StreamingDetokenizer detokenizer(llama);
    std::string text;
    for (size_t i = 0; i + 4 < ids.size(); ++i) text += detokenizer.feed(ids[i]);
    EXPECT_EQ(text, "a");
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(detokenizer.feed(crab[i]), "") << "byte " << i;
        EXPECT_TRUE(detokenizer.has_pending());
    }
    EXPECT_EQ(detokenizer.feed(crab[3]), "🦀");
    EXPECT_EQ(detokenizer.flush(), "");
}

TEST(StreamingDetokenizer, ChineseAndEmojiSplitAcrossByteLevelTokens) {
    const Tokenizer& smol = test::smollm2();
    for (const std::string text :
         {"今天天气很好", "👨‍👩‍👧‍👦🏳️‍🌈🇯🇵", "日本語のテキスト", "مرحبا"}) {
        const std::vector<TokenId> ids = smol.tokenize(text, false, false);
        EXPECT_EQ(stream(smol, ids), text);
    }
    const Tokenizer& llama = test::shared_vocab("llama-spm");
    for (const std::string text : {"今天天气很好", "👨‍👩‍👧‍👦🏳️‍🌈🇯🇵", "ᏣᎳᎩ 𐐀𐐁"}) {
        const std::vector<TokenId> ids = llama.tokenize(text, false, false);
        EXPECT_EQ(stream(llama, ids), text);
    }
}

TEST(StreamingDetokenizer, BrokenBytesBecomeReplacementCharacters) {
    const Tokenizer& llama = test::shared_vocab("llama-spm");
    const auto byte = [&](int b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        for (TokenId id = 0; id < 300; ++id) {
            if (llama.token_text(id) == name) return id;
        }
        ADD_FAILURE() << "no token " << name;
        return TokenId{0};
    };
    StreamingDetokenizer d(llama);
    EXPECT_EQ(d.feed(byte(0xE4)), "");
    EXPECT_EQ(d.feed(byte(0xBD)), "");
    EXPECT_EQ(d.feed(byte(0x41)),
              "\xEF\xBF\xBD"
              "A");                                 // 'A' cannot continue the character
    EXPECT_EQ(d.feed(byte(0xFF)), "\xEF\xBF\xBD");  // never valid: replaced at once
    EXPECT_EQ(d.feed(byte(0xF0)), "");
    EXPECT_EQ(d.flush(), "\xEF\xBF\xBD");  // the stream ended mid-character
    const std::vector<TokenId> ids = {byte(0xE4), byte(0xBD), byte(0x41), byte(0xFF), byte(0xF0)};
    EXPECT_EQ(llama.detokenize(ids),
              "\xEF\xBF\xBD"
              "A\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(StreamingDetokenizer, SentencePieceLeadingSpace) {
    const Tokenizer& llama = test::shared_vocab("llama-spm");
    const std::vector<TokenId> with_bos = llama.tokenize("Hello world", true, false);
    ASSERT_EQ(with_bos.front(), 1);
    EXPECT_EQ(llama.detokenize(with_bos), "Hello world");
    EXPECT_EQ(llama.detokenize(llama.tokenize("Hello world", false, false)), "Hello world");
    EXPECT_EQ(llama.detokenize(with_bos, true), "<s> Hello world");
    // Generated tokens continue a text: their leading space is real.
    const std::vector<TokenId> continuation(with_bos.begin() + 1, with_bos.end());
    EXPECT_EQ(stream(llama, continuation, {false, false}), " Hello world");
    // flush() starts a new stream: the rule applies again.
    StreamingDetokenizer d(llama);
    EXPECT_EQ(d.feed(continuation[0]), "Hello");
    d.flush();
    EXPECT_EQ(d.feed(continuation[0]), "Hello");
    // Byte-level BPE never strips.
    const Tokenizer& smol = test::smollm2();
    EXPECT_EQ(smol.detokenize(smol.tokenize(" Hello", false, false)), " Hello");
}

TEST(StreamingDetokenizer, ControlTokensRenderedOnlyWhenAsked) {
    const Tokenizer& smol = test::smollm2();
    const std::vector<TokenId> ids = smol.tokenize("<|im_start|>assistant\nHi<|im_end|>", false, true);
    EXPECT_EQ(stream(smol, ids, {false, true}), "assistant\nHi");
    EXPECT_EQ(stream(smol, ids, {true, true}), "<|im_start|>assistant\nHi<|im_end|>");
    EXPECT_EQ(smol.token_piece(2, false), "");
    EXPECT_EQ(smol.token_piece(2, true), "<|im_end|>");
    StreamingDetokenizer d(smol);
    EXPECT_EQ(d.feed(-1), "");
    EXPECT_EQ(d.feed(smol.n_vocab()), "");
}

}  // namespace
}  // namespace powerhouse
