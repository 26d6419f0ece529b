// Powerhouse's tokenizers against llama.cpp on the multilingual corpus in tests/data/tokenizer
// (made by scripts/fixtures/make_tokenizer_fixture.py with llama-cpp-python): token ids,
// detokenized text, every token's bytes, and the special tokens.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "gguf/gguf_model.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer_test_util.h"

namespace powerhouse {
namespace {

std::vector<TokenId> ids_of(const nlohmann::json& array) {
    return array.get<std::vector<TokenId>>();
}

TEST(ReferenceCorpus, SmolLM2TokenIdsEqualLlamaCpp) {
    const Tokenizer& tokenizer = test::smollm2();
    const auto& corpus = test::corpus();
    const auto expected = test::read_jsonl(test::tokenizer_data("smollm2_expected.jsonl"));
    ASSERT_EQ(corpus.size(), expected.size());
    ASSERT_GE(corpus.size(), 2000u);
    size_t mismatches = 0;
    size_t special_lines = 0;
    for (size_t i = 0; i < corpus.size(); ++i) {
        const std::vector<TokenId> ids = tokenizer.tokenize(corpus[i], false, false);
        if (ids != ids_of(expected[i]["ids"])) {
            ++mismatches;
            ADD_FAILURE() << "line " << i << " '" << test::printable(corpus[i]) << "'\n  llama.cpp "
                          << test::ids_to_string(ids_of(expected[i]["ids"])) << "\n  ours      "
                          << test::ids_to_string(ids);
        }
        // With special parsing (recorded where it makes a difference).
        if (corpus[i].find('<') != std::string::npos) {
            ++special_lines;
            const auto& reference =
                expected[i].contains("ids_special") ? expected[i]["ids_special"] : expected[i]["ids"];
            const std::vector<TokenId> special = tokenizer.tokenize(corpus[i], false, true);
            if (special != ids_of(reference)) {
                ++mismatches;
                ADD_FAILURE() << "line " << i << " with specials '" << test::printable(corpus[i]) << "'\n  llama.cpp "
                              << test::ids_to_string(ids_of(reference)) << "\n  ours      "
                              << test::ids_to_string(special);
            }
        }
    }
    EXPECT_EQ(mismatches, 0u) << "of " << corpus.size() << " lines (+" << special_lines << " with specials)";
}

TEST(ReferenceCorpus, SharedVocabulariesEqualLlamaCppOnACorpusSubset) {
    const auto& corpus = test::corpus();
    size_t checked = 0;
    for (const auto& record : test::read_jsonl(test::tokenizer_data("vocab_subset_expected.jsonl"))) {
        const std::string name = record["vocab"];
        const size_t line = record["line"];
        ASSERT_LT(line, corpus.size());
        const std::vector<TokenId> ids = test::shared_vocab(name).tokenize(corpus[line], false, false);
        EXPECT_EQ(ids, ids_of(record["ids"]))
            << name << " line " << line << " '" << test::printable(corpus[line]) << "'\n  llama.cpp "
            << test::ids_to_string(ids_of(record["ids"])) << "\n  ours      " << test::ids_to_string(ids);
        ++checked;
    }
    EXPECT_GE(checked, 6 * 200u);
}

// GPT-2's vocabulary under other pre-tokenizers' names: their splitting rules against llama.cpp.
Tokenizer gpt2_as(const std::string& pre) {
    Result<GgufModel> model = GgufModel::open(test::vocab_path("gpt-2"));
    EXPECT_TRUE(model.ok());
    GgufMetadata metadata;
    for (const auto& [key, value] : model->metadata().entries()) metadata.set(key, value);
    metadata.set_string("tokenizer.ggml.pre", pre);
    Result<Tokenizer> tokenizer = tokenizer_from_metadata(metadata);
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.error().message;
    return std::move(tokenizer).value();
}

TEST(ReferenceCorpus, PreTokenizerVariantsEqualLlamaCpp) {
    const auto& corpus = test::corpus();
    std::map<std::string, Tokenizer> tokenizers;
    size_t checked = 0;
    for (const auto& record : test::read_jsonl(test::tokenizer_data("pre_tokenizer_variants_expected.jsonl"))) {
        const std::string pre = record["pre"];
        auto it = tokenizers.find(pre);
        if (it == tokenizers.end()) it = tokenizers.emplace(pre, gpt2_as(pre)).first;
        const size_t line = record["line"];
        ASSERT_LT(line, corpus.size());
        const std::vector<TokenId> ids = it->second.tokenize(corpus[line], false, false);
        EXPECT_EQ(ids, ids_of(record["ids"]))
            << pre << " line " << line << " '" << test::printable(corpus[line]) << "'\n  llama.cpp "
            << test::ids_to_string(ids_of(record["ids"])) << "\n  ours      " << test::ids_to_string(ids);
        ++checked;
    }
    EXPECT_EQ(tokenizers.size(), 7u);  // llama-bpe, qwen2, default, gpt-4o, glm4, seed-coder, tekken
    EXPECT_EQ(tokenizers.count("gpt-4o"), 1u);
    EXPECT_EQ(tokenizers.count("tekken"), 1u);
    EXPECT_GE(checked, 7 * 200u);
}

TEST(ReferenceCorpus, SmolLM2DetokenizedTextEqualsLlamaCpp) {
    const Tokenizer& tokenizer = test::smollm2();
    size_t checked = 0;
    for (const auto& record : test::read_jsonl(test::tokenizer_data("smollm2_detokenize.jsonl"))) {
        const std::vector<TokenId> ids = ids_of(record["ids"]);
        const bool special = record["special"];
        EXPECT_EQ(tokenizer.detokenize(ids, special), record["text"].get<std::string>())
            << "ids " << test::ids_to_string(ids) << (special ? " (specials shown)" : "");
        ++checked;
    }
    EXPECT_GE(checked, 500u);
}

uint64_t fnv1a64(const std::string& bytes) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (unsigned char c : bytes) h = (h ^ c) * 0x100000001B3ull;
    return h;
}

TEST(ReferenceCorpus, SmolLM2EveryTokenPieceEqualsLlamaCpp) {
    const Tokenizer& tokenizer = test::smollm2();
    int32_t covered = 0;
    for (const auto& record : test::read_jsonl(test::tokenizer_data("smollm2_pieces.jsonl"))) {
        const TokenId first = record["first"];
        const int32_t count = record["count"];
        const bool special = record["special"];
        std::string bytes;
        for (TokenId id = first; id < first + count; ++id) bytes += tokenizer.token_piece(id, special);
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(bytes)));
        EXPECT_EQ(std::string(hex), record["fnv1a64"].get<std::string>())
            << "tokens " << first << ".." << first + count - 1 << (special ? " (specials shown)" : "");
        if (!special) covered += count;
    }
    EXPECT_EQ(covered, tokenizer.n_vocab());
}

std::set<TokenId> set_of(const nlohmann::json& array) {
    const auto ids = array.get<std::vector<TokenId>>();
    return {ids.begin(), ids.end()};
}

TEST(ReferenceCorpus, SpecialTokensEqualLlamaCpp) {
    const nlohmann::json all = nlohmann::json::parse(test::read_file(test::tokenizer_data("special_tokens.json")));
    for (const auto& [name, expected] : all.items()) {
        SCOPED_TRACE(name);
        const Tokenizer& tokenizer = name == "smollm2" ? test::smollm2() : test::shared_vocab(name);
        EXPECT_EQ(tokenizer.n_vocab(), expected["n_vocab"].get<int32_t>());
        const auto optional_id = [](const nlohmann::json& v) -> std::optional<TokenId> {
            return v.is_null() ? std::nullopt : std::optional<TokenId>(v.get<TokenId>());
        };
        EXPECT_EQ(tokenizer.bos(), optional_id(expected["bos"]));
        EXPECT_EQ(tokenizer.eos(), optional_id(expected["eos"]));
        // Where several tokens could be the EOT token, llama.cpp takes the first it meets in a
        // hash map; ours prefers them in a fixed order. Both end generation either way.
        const std::set<TokenId> eog_expected = set_of(expected["eog"]);
        EXPECT_EQ(tokenizer.eot().has_value(), !expected["eot"].is_null());
        if (tokenizer.eot()) {
            EXPECT_TRUE(eog_expected.count(*tokenizer.eot())) << *tokenizer.eot();
        }
        EXPECT_EQ(tokenizer.adds_bos(), expected["add_bos"].get<bool>());
        EXPECT_EQ(tokenizer.adds_eos(), expected["add_eos"].get<bool>());
        std::set<TokenId> eog, control;
        for (TokenId id = 0; id < tokenizer.n_vocab(); ++id) {
            if (tokenizer.is_eog(id)) eog.insert(id);
            if (tokenizer.impl().vocab.has_attr(id, token_attr::control)) control.insert(id);
        }
        EXPECT_EQ(eog, eog_expected);
        EXPECT_EQ(control, set_of(expected["control"]));
    }
}

}  // namespace
}  // namespace powerhouse
