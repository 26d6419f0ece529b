// detokenize(tokenize(text)) == text wherever the tokenizer keeps all of the text: for
// byte-level BPE, valid UTF-8 whose bytes all have a token (SmolLM2's vocabulary lacks 21 of
// the 256 byte tokens, e.g. 0x04 and 0xC0: those bytes are dropped, by llama.cpp too); for
// SentencePiece, text without special tokens (which put a space after themselves, or
// swallow one).
#include <gtest/gtest.h>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace powerhouse {
namespace {

bool has_special_token(const Tokenizer& tokenizer, const std::string& text) {
    std::vector<Fragment> fragments;
    tokenizer.impl().specials.partition(text, false, fragments);
    for (const Fragment& f : fragments) {
        if (f.is_token()) return true;
    }
    return false;
}

bool every_byte_has_a_token(const Tokenizer& tokenizer, const std::string& text) {
    for (char c : text) {
        if (tokenizer.impl().vocab.byte_token[static_cast<uint8_t>(c)] < 0) return false;
    }
    return true;
}

void check_round_trip(const std::string& name, const Tokenizer& tokenizer) {
    size_t checked = 0;
    size_t failures = 0;
    for (const std::string& line : test::corpus()) {
        if (!is_valid_utf8(line) || !every_byte_has_a_token(tokenizer, line)) continue;
        if (tokenizer.is_sentencepiece() && has_special_token(tokenizer, line)) continue;
        for (bool add_special : {false, true}) {
            const std::string back = tokenizer.detokenize(tokenizer.tokenize(line, add_special, false));
            if (back != line && ++failures <= 10) {
                ADD_FAILURE() << name << ": '" << test::printable(line) << "' came back as '" << test::printable(back)
                              << "'";
            }
        }
        ++checked;
    }
    EXPECT_EQ(failures, 0u) << name;
    EXPECT_GT(checked, 2400u) << name;
}

TEST(RoundTrip, SmolLM2) {
    check_round_trip("smollm2", test::smollm2());
}

class RoundTripVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTripVocab, Corpus) {
    check_round_trip(GetParam(), test::shared_vocab(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Shared, RoundTripVocab,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "deepseek-llm", "falcon", "starcoder"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                             std::string name = param.param;
                             for (char& ch : name) {
                                 if (ch == '-') ch = '_';
                             }
                             return name;
                         });

TEST(RoundTrip, BytesWithoutATokenAreDropped) {
    const Tokenizer& smol = test::smollm2();
    ASSERT_LT(smol.impl().vocab.byte_token[0x04], 0);
    EXPECT_EQ(smol.detokenize(smol.tokenize("a\x04"
                                            "b",
                                            false, false)),
              "ab");
}

TEST(RoundTrip, InvalidUtf8BecomesReplacementCharacters) {
    const Tokenizer& smol = test::smollm2();
    // Byte-level BPE tokenizes each invalid byte as U+FFFD, as llama.cpp does.
    EXPECT_EQ(smol.detokenize(smol.tokenize("a\xFF"
                                            "b\xE2\x82",
                                            false, false)),
              "a\xEF\xBF\xBD"
              "b\xEF\xBF\xBD\xEF\xBF\xBD");
    // SentencePiece keeps the bytes (byte fallback); showing them replaces what is invalid.
    const Tokenizer& llama = test::shared_vocab("llama-spm");
    EXPECT_EQ(llama.detokenize(llama.tokenize("a\xFF"
                                              "b\xE2\x82",
                                              false, false)),
              "a\xEF\xBF\xBD"
              "b\xEF\xBF\xBD");
}

}  // namespace
}  // namespace powerhouse
