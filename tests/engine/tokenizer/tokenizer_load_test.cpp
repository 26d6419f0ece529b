// Loading refuses what it cannot tokenize correctly, with an error that names the field.
#include <gtest/gtest.h>

#include "gguf/gguf_value.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer_test_util.h"

namespace powerhouse {
namespace {

// A tiny byte-level BPE vocabulary: "a", "b", "ab" (from the merge "a b"), "Ġ" (space), <|end|>.
void set_tiny_bpe(GgufMetadata& m) {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    m.set_string("tokenizer.ggml.model", "gpt2");
    m.set_string("tokenizer.ggml.pre", "gpt-2");
    for (const char* t : {"a", "b", "ab", "Ġ", "<|end|>"}) tokens.push_back(t);
    types = {1, 1, 1, 1, 3};
    m.set_string_array("tokenizer.ggml.tokens", tokens);
    m.set_array<int32_t>("tokenizer.ggml.token_type", GgufValueType::i32, std::span<const int32_t>(types));
    m.set_string_array("tokenizer.ggml.merges", {"a b"});
    m.set("tokenizer.ggml.eos_token_id", GgufValue{uint32_t{4}});
}

std::string load_error(const GgufMetadata& m) {
    Result<Tokenizer> t = tokenizer_from_metadata(m);
    return t ? std::string("(loaded)") : t.error().message;
}

TEST(TokenizerLoad, TinyVocabularyWorks) {
    GgufMetadata m;
    set_tiny_bpe(m);
    Result<Tokenizer> t = tokenizer_from_metadata(m);
    ASSERT_TRUE(t.ok()) << t.error().message;
    EXPECT_EQ(t->tokenize("ab ab", false, false), (std::vector<TokenId>{2, 3, 2}));
    EXPECT_EQ(t->tokenize("abc", false, false),
              (std::vector<TokenId>{2}));  // no token for "c": dropped, as the reference
    EXPECT_EQ(t->tokenize("ab<|end|>", false, true), (std::vector<TokenId>{2, 4}));
    EXPECT_TRUE(t->is_eog(4));
    EXPECT_EQ(t->detokenize(std::vector<TokenId>{2, 3, 2}), "ab ab");
}

TEST(TokenizerLoad, UnknownTokenizerModelIsRefused) {
    GgufMetadata m;
    set_tiny_bpe(m);
    m.set_string("tokenizer.ggml.model", "t5");  // Unigram: not supported ("bert" is, see wpm_test.cpp)
    EXPECT_NE(load_error(m).find("tokenizer.ggml.model 't5' is not supported"), std::string::npos) << load_error(m);
    EXPECT_NE(load_error(m).find("'bert' = WordPiece"), std::string::npos) << load_error(m);
}

TEST(TokenizerLoad, UnknownOrMissingPreTokenizerIsRefused) {
    GgufMetadata m;
    set_tiny_bpe(m);
    m.set_string("tokenizer.ggml.pre", "viking");
    EXPECT_NE(load_error(m).find("tokenizer.ggml.pre 'viking' is not supported (supported: llama-bpe"),
              std::string::npos)
        << load_error(m);
    m.erase("tokenizer.ggml.pre");
    EXPECT_NE(load_error(m).find("tokenizer.ggml.pre is missing"), std::string::npos) << load_error(m);
}

TEST(TokenizerLoad, MalformedFieldsAreNamed) {
    {
        GgufMetadata m;
        set_tiny_bpe(m);
        m.erase("tokenizer.ggml.merges");
        EXPECT_NE(load_error(m).find("tokenizer.ggml.merges is missing"), std::string::npos) << load_error(m);
    }
    {
        GgufMetadata m;
        set_tiny_bpe(m);
        m.erase("tokenizer.ggml.tokens");
        EXPECT_NE(load_error(m).find("tokenizer.ggml.tokens is missing"), std::string::npos) << load_error(m);
    }
    {
        GgufMetadata m;
        set_tiny_bpe(m);
        const std::vector<int32_t> short_types = {1, 1};
        m.set_array<int32_t>("tokenizer.ggml.token_type", GgufValueType::i32, std::span<const int32_t>(short_types));
        EXPECT_NE(load_error(m).find("tokenizer.ggml.token_type has 2 entries for 5 tokens"), std::string::npos)
            << load_error(m);
    }
    {
        GgufMetadata m;
        set_tiny_bpe(m);
        m.erase("tokenizer.ggml.model");
        EXPECT_NE(load_error(m).find("the file has no tokenizer"), std::string::npos) << load_error(m);
    }
    {
        GgufMetadata m;
        set_tiny_bpe(m);
        m.set("tokenizer.ggml.eos_token_id", GgufValue{uint32_t{999}});  // out of range: ignored
        Result<Tokenizer> t = tokenizer_from_metadata(m);
        ASSERT_TRUE(t.ok());
        EXPECT_FALSE(t->eos().has_value());
    }
}

TEST(TokenizerLoad, FileErrorsNameTheFile) {
    Result<Tokenizer> missing = Tokenizer::load("/nonexistent/model.gguf");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("/nonexistent/model.gguf"), std::string::npos);
    test::TempDir dir;
    GgufWriter writer;
    writer.metadata().set_string("general.architecture", "llama");
    ASSERT_TRUE(writer.write_file(dir / "no_vocab.gguf", nullptr).ok());
    Result<Tokenizer> no_vocab = Tokenizer::load(dir / "no_vocab.gguf");
    ASSERT_FALSE(no_vocab.ok());
    EXPECT_NE(no_vocab.error().message.find("no_vocab.gguf: the file has no tokenizer"), std::string::npos)
        << no_vocab.error().message;
}

TEST(TokenizerLoad, CopiesShareAndOutliveTheFile) {
    Tokenizer copy = test::shared_vocab("gpt-2");
    EXPECT_EQ(copy.model_name(), "gpt2");
    EXPECT_EQ(copy.pre_tokenizer_name(), "gpt-2");
    EXPECT_EQ(&copy.impl(), &test::shared_vocab("gpt-2").impl());
    EXPECT_EQ(copy.token_text(-5), "");
    EXPECT_EQ(copy.token_text(copy.n_vocab()), "");
    EXPECT_EQ(copy.token_text(50256), "<|endoftext|>");
}

}  // namespace
}  // namespace powerhouse
