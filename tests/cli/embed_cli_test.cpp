// powerhouse-cli embed on the test model, against llama.cpp's embeddings of the same texts
// (tests/data/embeddings, scripts/fixtures/make_embedding_fixture.py) under each pooling;
// inputs from -p, from a file and from standard input giving the same vectors; the
// similarity table; --no-normalize; and the errors.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_runner.h"
#include "support/test_support.h"

namespace powerhouse {
namespace embed_cli_test {

using test::quoted;

const nlohmann::json& fixture() {
    static const nlohmann::json data =
        nlohmann::json::parse(test::read_file(test::data_dir() / "embeddings" / "smollm2_embeddings.json"));
    return data;
}

std::string smollm2() {
    return "embed -m " + quoted(test::test_model_path()) + " -t 2 --ctx 512";
}

// The JSON lines of a run, in order.
std::vector<nlohmann::json> lines_of(const test::CliRun& run) {
    std::vector<nlohmann::json> out;
    std::istringstream in(run.out);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
}

double cosine(const nlohmann::json& a, const nlohmann::json& b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double x = a[i].get<double>(), y = b[i].get<double>();
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    return ab / std::sqrt(aa * bb);
}

double norm(const nlohmann::json& v) {
    double sum = 0;
    for (const auto& x : v) sum += x.get<double>() * x.get<double>();
    return std::sqrt(sum);
}

// The bound embedding_test allows (smollm2_reference_test's on the logits' correlation).
constexpr double kMinCosine = 0.998;

TEST(CliEmbed, EachPoolingGivesLlamaCppsEmbeddings) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    for (const std::string pooling : {"mean", "last", "cls"}) {
        SCOPED_TRACE(pooling);
        std::vector<nlohmann::json> cases;
        std::string args = smollm2() + " --pooling " + pooling;
        for (const nlohmann::json& c : fixture().at("cases")) {
            if (c.at("pooling") != pooling) continue;
            cases.push_back(c);
            args += " -p " + test::quoted(c.at("text").get<std::string>());
        }
        ASSERT_EQ(cases.size(), 5u);
        const test::CliRun run = test::run_cli(args);
        ASSERT_EQ(run.status, 0) << run.err;
        const std::vector<nlohmann::json> got = lines_of(run);
        ASSERT_EQ(got.size(), cases.size());
        for (size_t i = 0; i < cases.size(); ++i) {
            EXPECT_EQ(got[i].at("index"), i);
            EXPECT_EQ(got[i].at("tokens"), cases[i].at("prompt_ids").size()) << "tokenized as llama.cpp's";
            const nlohmann::json& v = got[i].at("embedding");
            ASSERT_EQ(v.size(), cases[i].at("embedding").size());
            EXPECT_GE(cosine(v, cases[i].at("embedding")), kMinCosine) << cases[i].at("text");
            EXPECT_NEAR(norm(v), 1.0, 1e-5);
        }
    }
}

TEST(CliEmbed, AFileAndStandardInputGiveThePsVectors) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    const std::vector<std::string> texts = {"The quick brown fox jumps over the lazy dog.",
                                            "Paris is the capital of France.", "Zürich, Genève — and 東京."};
    std::string args = smollm2();
    for (const std::string& t : texts) args += " -p " + test::quoted(t);
    const std::vector<nlohmann::json> given = lines_of(test::run_cli(args));
    ASSERT_EQ(given.size(), 3u);
    // Blank lines skipped, Windows line ends taken off.
    const std::string file_text = texts[0] + "\r\n\n   \n" + texts[1] + "\n" + texts[2];
    test::TempDir dir;
    test::write_file(dir / "texts.txt", file_text);
    const std::vector<nlohmann::json> from_file =
        lines_of(test::run_cli(smollm2() + " -f " + quoted(dir / "texts.txt")));
    const std::vector<nlohmann::json> from_stdin = lines_of(test::run_cli(smollm2(), file_text));
    ASSERT_EQ(from_file.size(), 3u);
    ASSERT_EQ(from_stdin.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(from_file[i], given[i]) << i;
        EXPECT_EQ(from_stdin[i], given[i]) << i;
    }
    // -p texts first, then the file's.
    const std::vector<nlohmann::json> both =
        lines_of(test::run_cli(smollm2() + " -p " + test::quoted(texts[2]) + " -f " + quoted(dir / "texts.txt")));
    ASSERT_EQ(both.size(), 4u);
    EXPECT_EQ(both[0].at("embedding"), given[2].at("embedding"));
    EXPECT_EQ(both[1].at("embedding"), given[0].at("embedding"));
    EXPECT_EQ(both[3].at("index"), 3);
}

TEST(CliEmbed, TheSimilarityTableHoldsTheVectorsCosines) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    const std::vector<std::string> texts = {"The quick brown fox jumps over the lazy dog.",
                                            "A fast auburn fox leaped over a sleepy hound.",
                                            std::string(39, 'a') + "東京, a name beyond ASCII cut before it"};
    std::string args = smollm2();
    for (const std::string& t : texts) args += " -p " + test::quoted(t);
    const std::vector<nlohmann::json> vectors = lines_of(test::run_cli(args));
    ASSERT_EQ(vectors.size(), 3u);
    const test::CliRun table = test::run_cli(args + " --similarity");
    ASSERT_EQ(table.status, 0) << table.err;
    std::istringstream in(table.out);
    std::vector<std::string> rows;
    for (std::string line; std::getline(in, line);) rows.push_back(line);
    ASSERT_EQ(rows.size(), 4u) << table.out;
    for (size_t i = 0; i < 3; ++i) {
        SCOPED_TRACE(rows[i + 1]);
        EXPECT_EQ(rows[i + 1].rfind(std::to_string(i) + " ", 0), 0u);
        for (size_t j = 0; j < 3; ++j) {
            const std::string value =
                fmt::format("{:.4f}", cosine(vectors[i].at("embedding"), vectors[j].at("embedding")));
            EXPECT_TRUE(test::contains(rows[i + 1], value)) << i << "," << j << ": " << value;
        }
    }
    // 40 bytes would end inside 東's three: the cut goes before it.
    EXPECT_TRUE(test::contains(rows[3], std::string(39, 'a') + "... ")) << rows[3];
}

TEST(CliEmbed, NoNormalizeLeavesThePooledLength) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    const std::string args = smollm2() + " -p " + test::quoted("Paris is the capital of France.");
    const std::vector<nlohmann::json> unit = lines_of(test::run_cli(args));
    const std::vector<nlohmann::json> raw = lines_of(test::run_cli(args + " --no-normalize"));
    ASSERT_EQ(unit.size(), 1u);
    ASSERT_EQ(raw.size(), 1u);
    EXPECT_GT(std::abs(norm(raw[0].at("embedding")) - 1.0), 0.1);
    EXPECT_NEAR(cosine(raw[0].at("embedding"), unit[0].at("embedding")), 1.0, 1e-6) << "the same direction";
}

TEST(CliEmbed, BadInputsAreNamed) {
    const test::CliRun empty = test::run_cli("embed -m " + quoted(test::test_model_path()), "\n  \n");
    EXPECT_EQ(empty.status, 1);
    EXPECT_TRUE(test::contains(empty.err, "nothing to embed: standard input has no text")) << empty.err;
    const test::CliRun missing =
        test::run_cli("embed -m " + quoted(test::test_model_path()) + " -f /nonexistent/texts.txt");
    EXPECT_EQ(missing.status, 1);
    EXPECT_TRUE(test::contains(missing.err, "/nonexistent/texts.txt")) << missing.err;
    const test::CliRun pooling = test::run_cli("embed -m " + quoted(test::test_model_path()) + " -p x --pooling max");
    EXPECT_EQ(pooling.status, 2);
    EXPECT_TRUE(test::contains(pooling.err, "--pooling")) << pooling.err;
}

// An encoder (a synthetic bge-small: BERT, CLS pooling): `info` says what it is for instead of
// chat template facts, `embed` embeds with its CLS row, and `generate` refuses it by name.
TEST(CliEmbed, AnEncoderEmbedsAndSaysItWritesNoText) {
    test::TempDir dir;
    const std::string file = quoted(dir / "bge.gguf");
    const test::CliRun made = test::run_cli("synth --like bge-small --layers 2 --type q8_0 -o " + file);
    ASSERT_EQ(made.status, 0) << made.err;
    const test::CliRun info = test::run_cli("info " + file);
    ASSERT_EQ(info.status, 0) << info.err;
    EXPECT_TRUE(test::contains(info.out, "embeddings only (pooling: cls)")) << info.out;
    EXPECT_FALSE(test::contains(info.out, "chat template")) << info.out;
    const nlohmann::json facts = nlohmann::json::parse(test::run_cli("info --json " + file).out);
    EXPECT_EQ(facts.at("embedding_only"), true);
    EXPECT_EQ(facts.at("pooling"), "cls");

    const std::vector<nlohmann::json> cls =
        lines_of(test::run_cli("embed -m " + file + " -t 2 -p 'Paris is in France.'"));
    const std::vector<nlohmann::json> mean =
        lines_of(test::run_cli("embed -m " + file + " -t 2 --pooling mean -p 'Paris is in France.'"));
    ASSERT_EQ(cls.size(), 1u);
    ASSERT_EQ(mean.size(), 1u);
    EXPECT_EQ(cls[0].at("embedding").size(), 384u);
    const test::CliRun ids = test::run_cli("tokenize -m " + file, std::string(R"({"text": "Paris is in France."})"));
    ASSERT_EQ(ids.status, 0) << ids.err;
    const nlohmann::json tokens = nlohmann::json::parse(ids.out).at("ids");
    EXPECT_EQ(cls[0].at("tokens"), tokens.size()) << "[CLS] ... [SEP], as tokenize gives them: " << tokens.dump();
    EXPECT_EQ(tokens.front(), 101);
    EXPECT_EQ(tokens.back(), 102);
    EXPECT_LT(cosine(cls[0].at("embedding"), mean[0].at("embedding")), 0.999) << "the file's pooling, not mean";

    const test::CliRun generate = test::run_cli("generate -m " + file + " -t 2 -p hi");
    EXPECT_EQ(generate.status, 1);
    EXPECT_TRUE(test::contains(generate.err, "is an embedding model")) << generate.err;
    EXPECT_FALSE(test::contains(generate.err, "chat template")) << "no note on a template it never uses";
}

}  // namespace embed_cli_test
}  // namespace powerhouse
