// WordPiece ("bert") vocabularies: the synthetic one has bert-base-uncased's layout as
// llama.cpp's converter writes it, and tokenizes as llama.cpp does (the fixture
// tests/data/tokenizer/wpm_expected.json, from scripts/fixtures/make_wpm_fixture.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include "synth/vocab.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"
#include "tokenizer/wpm.h"
#include "tokenizer_test_util.h"

namespace powerhouse {
namespace {

using synth::SpecialToken;
using synth::TokenType;
using synth::VocabKind;
using synth::VocabSpec;

constexpr std::string_view kMark = "\xE2\x96\x81";  // "▁"

// The WordPiece vocabulary of a synth preset: bge-small (bert-base-uncased's 30522 tokens,
// as all-MiniLM-L6-v2 has them) or nomic-embed (the same tokens padded to 30528).
VocabSpec preset_vocab(std::string_view preset = "bge-small") {
    const synth::PresetSpec* spec = synth::find_preset(preset);
    EXPECT_NE(spec, nullptr) << preset;
    return spec != nullptr ? spec->vocab : VocabSpec{};
}

std::string mark(std::string_view s) {
    return std::string(kMark) + std::string(s);
}

TEST(WpmSynthVocab, HasBertBaseUncasedLayout) {
    Result<synth::SynthVocab> built = synth::build_vocab(preset_vocab());
    ASSERT_TRUE(built) << built.error().message;
    const synth::SynthVocab& v = *built;
    ASSERT_EQ(v.tokens.size(), 30522u);
    ASSERT_EQ(v.token_types.size(), 30522u);
    EXPECT_TRUE(v.scores.empty());
    EXPECT_TRUE(v.merges.empty());
    const std::pair<uint32_t, const char*> specials[] = {
        {0, "[PAD]"}, {100, "[UNK]"}, {101, "[CLS]"}, {102, "[SEP]"}, {103, "[MASK]"}};
    for (const auto& [id, text] : specials) {
        EXPECT_EQ(v.tokens[id], text);
        EXPECT_EQ(v.token_types[id], 3) << text;  // added special tokens: control
    }
    // [unusedN] are ordinary entries of vocab.txt: normal, with the word-start mark.
    EXPECT_EQ(v.tokens[1], mark("[unused0]"));
    EXPECT_EQ(v.tokens[99], mark("[unused98]"));
    EXPECT_EQ(v.tokens[104], mark("[unused99]"));
    EXPECT_EQ(v.tokens[998], mark("[unused993]"));
    EXPECT_EQ(v.token_types[1], 1);
    // Characters from 999, as in bert-base-uncased ("!" is 999).
    EXPECT_EQ(v.tokens[999], mark("!"));
    // Every token is distinct, nothing carries BERT's "##", and there are no capitals.
    std::set<std::string> seen;
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        EXPECT_TRUE(seen.insert(v.tokens[i]).second) << "duplicate " << v.tokens[i];
        EXPECT_EQ(v.tokens[i].rfind("##", 0), std::string::npos) << v.tokens[i];
        if (i > 103) {
            EXPECT_EQ(v.token_types[i], 1) << i;
            for (char c : v.tokens[i]) EXPECT_FALSE(c >= 'A' && c <= 'Z') << v.tokens[i];
        }
    }
    // Whole words and word pieces learned from the corpus, and continuation characters.
    for (const std::string& t : {mark("the"), mark("and"), mark("model"), std::string("ing"), std::string("s"),
                                 std::string("7"), mark("a"), mark("7")}) {
        EXPECT_EQ(seen.count(t), 1u) << t;
    }
    // BERT puts its "##x" single characters last: here "a".."z", then the non-ASCII letters.
    const auto z = std::find(v.tokens.begin(), v.tokens.end(), "z");
    ASSERT_NE(z, v.tokens.end());
    for (auto it = z - 25; it != v.tokens.end(); ++it) {
        EXPECT_EQ(it->rfind(kMark, 0), std::string::npos) << *it;
        EXPECT_EQ(test::printable(*it).size(), it->size()) << "one character, no control bytes";
        std::vector<uint32_t> cpts;
        decode_utf8_lenient(*it, cpts);
        EXPECT_EQ(cpts.size(), 1u) << *it;
    }
    EXPECT_EQ(*(z - 25), "a");
}

TEST(WpmSynthVocab, PadsToAPaddedVocabularySize) {
    // nomic-embed-text-v1.5: 30522 real tokens padded to 30528.
    Result<synth::SynthVocab> built = synth::build_vocab(preset_vocab("nomic-embed"));
    ASSERT_TRUE(built) << built.error().message;
    ASSERT_EQ(built->tokens.size(), 30528u);
    EXPECT_EQ(built->tokens[30522], "[PAD30522]");
    EXPECT_EQ(built->tokens[30527], "[PAD30527]");
    EXPECT_EQ(built->token_types[30527], 5);
    EXPECT_EQ(built->tokens[102], "[SEP]");
    // The same regular tokens as the unpadded vocabulary's.
    Result<synth::SynthVocab> plain = synth::build_vocab(preset_vocab());
    ASSERT_TRUE(plain);
    EXPECT_EQ(std::vector<std::string>(built->tokens.begin(), built->tokens.begin() + 30522), plain->tokens);
}

// scripts/fixtures/make_wpm_fixture.py runs this with PH_WPM_VOCAB_OUT=FILE to get the
// synthetic vocabulary it gives llama.cpp; the fixture keeps its checksum (below).
TEST(WpmSynthVocab, WritesItselfForTheFixtureScript) {
    const char* path = std::getenv("PH_WPM_VOCAB_OUT");
    if (path == nullptr) GTEST_SKIP() << "only for scripts/fixtures/make_wpm_fixture.py";
    Result<synth::SynthVocab> built = synth::build_vocab(preset_vocab());
    ASSERT_TRUE(built);
    const nlohmann::json out = {{"tokens", built->tokens}, {"types", built->token_types}};
    std::ofstream(path, std::ios::binary) << out.dump();
}

TEST(WpmSynthVocab, RejectsALayoutThatDoesNotFit) {
    VocabSpec no_room = preset_vocab();
    no_room.n_regular = no_room.n_vocab;
    EXPECT_FALSE(synth::build_vocab(no_room));
    VocabSpec no_specials = preset_vocab();
    no_specials.leading.clear();
    EXPECT_FALSE(synth::build_vocab(no_specials));
}

const nlohmann::json& fixture() {
    static const nlohmann::json f = [] {
        std::ifstream in(test::tokenizer_data("wpm_expected.json"), std::ios::binary);
        return nlohmann::json::parse(in);
    }();
    return f;
}

const synth::SynthVocab& synthetic_vocab() {
    static const synth::SynthVocab v = *synth::build_vocab(preset_vocab());
    return v;
}

// The metadata make_wpm_fixture.py writes (what the converter writes for bge-small-en-v1.5),
// with the normalizer switches of a variant ("default", "cased", "keep_accents").
GgufMetadata bge_metadata(const std::string& variant) {
    const synth::SynthVocab& v = synthetic_vocab();
    GgufMetadata m;
    m.set_string("general.architecture", "bert");
    m.set_string("tokenizer.ggml.model", "bert");
    m.set_string("tokenizer.ggml.pre", "bert-bge");
    m.set_string_array("tokenizer.ggml.tokens", v.tokens);
    m.set_array<int32_t>("tokenizer.ggml.token_type", GgufValueType::i32, std::span<const int32_t>(v.token_types));
    const std::pair<const char*, uint32_t> ids[] = {
        {"tokenizer.ggml.bos_token_id", 101},     {"tokenizer.ggml.eos_token_id", 102},
        {"tokenizer.ggml.unknown_token_id", 100}, {"tokenizer.ggml.seperator_token_id", 102},
        {"tokenizer.ggml.padding_token_id", 0},   {"tokenizer.ggml.cls_token_id", 101},
        {"tokenizer.ggml.mask_token_id", 103},
    };
    for (const auto& [key, id] : ids) m.set(key, GgufValue{id});
    m.set("tokenizer.ggml.add_bos_token", GgufValue{true});
    m.set("tokenizer.ggml.add_eos_token", GgufValue{true});
    m.set("tokenizer.ggml.add_sep_token", GgufValue{false});
    if (variant == "cased") m.set("tokenizer.ggml.normalizer.lowercase", GgufValue{false});
    if (variant == "keep_accents") m.set("tokenizer.ggml.normalizer.strip_accents", GgufValue{false});
    return m;
}

const Tokenizer& bge_tokenizer(const std::string& variant = "default") {
    static std::map<std::string, Tokenizer> cache;
    auto it = cache.find(variant);
    if (it == cache.end()) {
        Result<Tokenizer> t = tokenizer_from_metadata(bge_metadata(variant));
        if (!t) {
            std::fprintf(stderr, "cannot load the WordPiece vocabulary: %s\n", t.error().message.c_str());
            std::abort();
        }
        it = cache.emplace(variant, std::move(t).value()).first;
    }
    return it->second;
}

std::vector<TokenId> ids_of(const nlohmann::json& j) {
    return j.get<std::vector<TokenId>>();
}

uint64_t fnv1a64(std::string_view bytes, uint64_t h = 0xCBF29CE484222325ull) {
    for (char c : bytes) {
        h ^= static_cast<unsigned char>(c);
        h *= 0x100000001B3ull;
    }
    return h;
}

std::string hex64(uint64_t h) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

TEST(WpmSynthVocab, IsTheVocabularyTheFixtureWasMadeWith) {
    // Else re-run scripts/fixtures/make_wpm_fixture.py.
    const synth::SynthVocab& v = synthetic_vocab();
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        h = fnv1a64(v.tokens[i], h);
        const char tail[2] = {'\0', static_cast<char>(v.token_types[i])};
        h = fnv1a64(std::string_view(tail, 2), h);
    }
    EXPECT_EQ(hex64(h), fixture()["vocab_fnv1a64"].get<std::string>());
}

TEST(WpmTokenizer, LoadsAsLlamaCppDoes) {
    const Tokenizer& t = bge_tokenizer();
    const nlohmann::json& f = fixture();
    EXPECT_EQ(t.model_name(), "bert");
    EXPECT_FALSE(t.is_sentencepiece());
    EXPECT_EQ(t.n_vocab(), f["n_vocab"].get<int32_t>());
    EXPECT_EQ(t.bos(), f["bos"].get<TokenId>());
    EXPECT_EQ(t.eos(), f["eos"].get<TokenId>());
    EXPECT_EQ(t.impl().vocab.sep, f["sep"].get<TokenId>());
    EXPECT_EQ(t.impl().vocab.unk, f["unk"].get<TokenId>());
    EXPECT_EQ(t.adds_bos(), f["add_bos"].get<bool>());
    EXPECT_EQ(t.adds_eos(), f["add_eos"].get<bool>());
    std::vector<TokenId> eog, control;
    for (TokenId id = 0; id < t.n_vocab(); ++id) {
        if (t.is_eog(id)) eog.push_back(id);
        if (t.is_control(id)) control.push_back(id);
    }
    // [SEP] as EOS, and [PAD], which both take for a fill-in-the-middle pad token.
    EXPECT_EQ(eog, ids_of(f["eog"]));
    EXPECT_EQ(control, ids_of(f["control"]));  // [PAD] [UNK] [CLS] [SEP] [MASK]; not "▁[unused0]"
}

// Every input of the fixture, with and without add_special and parse_special, gives
// llama.cpp's ids; and the normalizer switches change them as they change llama.cpp's.
TEST(WpmTokenizer, TokenIdsEqualLlamaCpp) {
    size_t mismatches = 0;
    size_t n_cases = 0;
    for (const nlohmann::json& c : fixture()["cases"]) {
        const std::string text = test::from_hex(c["hex"].get<std::string>());
        ++n_cases;
        auto check = [&](const std::vector<TokenId>& expected, const std::vector<TokenId>& actual, const char* what) {
            if (expected == actual) return;
            ++mismatches;
            ADD_FAILURE() << what << " '" << test::printable(text) << "'\n  expected " << test::ids_to_string(expected)
                          << "\n  actual   " << test::ids_to_string(actual);
        };
        for (int add = 0; add < 2; ++add) {
            for (int special = 0; special < 2; ++special) {
                check(ids_of(c["ids"][add][special]), bge_tokenizer().tokenize(text, add != 0, special != 0),
                      add ? (special ? "add_special, parse_special" : "add_special")
                          : (special ? "parse_special" : "plain"));
            }
        }
        check(ids_of(c["cased"]), bge_tokenizer("cased").tokenize(text, false, false), "lowercase=false");
        check(ids_of(c["keep_accents"]), bge_tokenizer("keep_accents").tokenize(text, false, false),
              "strip_accents=false");
    }
    EXPECT_GT(n_cases, 30u);
    EXPECT_EQ(mismatches, 0u);
}

// Detokenizing the [CLS] ... [SEP] ids gives llama.cpp's text: lowercased, accents gone, a
// space before each word (the first too), the spaces before punctuation cleaned up.
TEST(WpmTokenizer, DetokenizingGivesLlamaCppsText) {
    for (const nlohmann::json& c : fixture()["cases"]) {
        const std::string text = test::from_hex(c["hex"].get<std::string>());
        const std::vector<TokenId> ids = ids_of(c["ids"][1][0]);
        EXPECT_EQ(bge_tokenizer().detokenize(ids), c["detok"].get<std::string>()) << test::printable(text);
        EXPECT_EQ(bge_tokenizer().detokenize(ids, true), c["detok_special"].get<std::string>())
            << test::printable(text);
    }
}

TEST(WpmTokenizer, EveryTokenPieceEqualsLlamaCpps) {
    const Tokenizer& t = bge_tokenizer();
    for (bool special : {false, true}) {
        uint64_t h = 0xCBF29CE484222325ull;
        for (TokenId id = 0; id < t.n_vocab(); ++id) h = fnv1a64(t.token_piece(id, special), h);
        EXPECT_EQ(hex64(h), fixture()["pieces_fnv1a64"][special ? "true" : "false"].get<std::string>()) << special;
    }
    EXPECT_EQ(t.token_piece(1037, false), " a");  // "▁a": a word start
    EXPECT_EQ(t.token_piece(101, false), "");     // [CLS] is hidden
    EXPECT_EQ(t.token_piece(101, true), "[CLS]");
}

TEST(WpmTokenizer, RoundTripsWhatItCanSpell) {
    // Lowercase text with one space between words, no punctuation: the text comes back after
    // the leading space that every word start carries.
    const Tokenizer& t = bge_tokenizer();
    for (std::string text :
         {"the model returns the values of every layer", "xylophone zebra quizzical jukebox", "cafe naive 12345"}) {
        EXPECT_EQ(t.detokenize(t.tokenize(text, true, false)), " " + text);
    }
    // Capitals and accents do not come back; an unknown word is [UNK], hidden as a control token.
    EXPECT_EQ(t.detokenize(t.tokenize("Café 🍕", false, false)), " cafe");
    EXPECT_EQ(t.detokenize(t.tokenize("Café 🍕", false, false), true), " cafe[UNK]");
}

TEST(WpmWords, NormalizeAndSplitAsBertDoes) {
    using V = std::vector<std::string>;
    EXPECT_EQ(wpm_words("Héllo, WORLD!", true, true), (V{"hello", ",", "world", "!"}));
    EXPECT_EQ(wpm_words("Héllo", false, false), (V{"Héllo"}));
    EXPECT_EQ(wpm_words("Héllo", true, false), (V{"héllo"}));
    EXPECT_EQ(wpm_words("e\xCC\x81", true, true), (V{"e"}));  // a combining mark is dropped
    EXPECT_EQ(wpm_words("\xE4\xB8\xAD\xE6\x96\x87x", true, true), (V{"\xE4\xB8\xAD", "\xE6\x96\x87", "x"}));
    // Only ASCII symbols split words ("€" does not).
    EXPECT_EQ(wpm_words("a$b\xE2\x82\xAC"
                        "c",
                        true, true),
              (V{"a", "$",
                 "b\xE2\x82\xAC"
                 "c"}));
    EXPECT_EQ(wpm_words(" \t\n ", true, true), V{});
}

TEST(WpmCleanUp, RemovesTheSpacesLlamaCppRemoves) {
    EXPECT_EQ(wpm_clean_up_spaces(" hello , world !"), " hello, world!");
    EXPECT_EQ(wpm_clean_up_spaces(" don ' t"), " don't");
    EXPECT_EQ(wpm_clean_up_spaces(" it 's"), " it's");
    EXPECT_EQ(wpm_clean_up_spaces(" rock 'n"), " rock 'n");
    EXPECT_EQ(wpm_clean_up_spaces(""), "");
}

}  // namespace
}  // namespace powerhouse
