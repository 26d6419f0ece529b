// Embeddings (Model::embed, EmbedCommand): SmolLM2's final-norm output pooled by mean, last
// token and first token, against llama.cpp's embeddings of the same texts
// (tests/data/embeddings, scripts/fixtures/make_embedding_fixture.py), the same tokens
// first; through the engine, beside a generation that goes on unchanged; and the inputs it
// refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "powerhouse/engine.h"
#include "powerhouse/generation.h"
#include "powerhouse/model.h"
#include "powerhouse/synth.h"
#include "support/engine_runs.h"
#include "support/test_support.h"

namespace powerhouse {
namespace embedding_test {
namespace {

using namespace std::chrono_literals;

const nlohmann::json& fixture() {
    static const nlohmann::json data =
        nlohmann::json::parse(test::read_file(test::data_dir() / "embeddings" / "smollm2_embeddings.json"));
    return data;
}

EmbeddingPooling pooling_named(const std::string& name) {
    return name == "last" ? EmbeddingPooling::last : name == "cls" ? EmbeddingPooling::cls : EmbeddingPooling::mean;
}

ModelOptions two_threads(uint32_t n_batch = 512) {
    ModelOptions o;
    o.n_ctx = 512;
    o.n_threads = 2;
    o.n_batch = n_batch;
    return o;
}

double cosine(const std::vector<float>& a, const std::vector<double>& b) {
    double dot = 0, na = 0, nb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        dot += a[i] * b[i];
        na += static_cast<double>(a[i]) * a[i];
        nb += b[i] * b[i];
    }
    return dot / std::sqrt(na * nb);
}

TEST(Embeddings, EqualLlamaCppsForEveryPooling) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    // Small batches too: an input longer than a batch is pooled across its batches.
    for (uint32_t n_batch : {512u, 4u}) {
        SCOPED_TRACE(testing::Message() << "n_batch " << n_batch);
        Result<Model> model = Model::load(test::test_model_path(), two_threads(n_batch));
        ASSERT_TRUE(model) << model.error().message;
        int compared = 0;
        double worst_cosine = 1.0;
        for (const nlohmann::json& c : fixture().at("cases")) {
            SCOPED_TRACE(c.at("pooling").get<std::string>() + ": " + c.at("text").get<std::string>());
            const std::vector<TokenId> ids = model->tokenizer().tokenize(c.at("text").get<std::string>(), true, false);
            ASSERT_EQ(nlohmann::json(ids), c.at("prompt_ids"));
            Result<std::vector<float>> got = model->embed(ids, pooling_named(c.at("pooling")));
            ASSERT_TRUE(got) << got.error().message;
            const auto want = c.at("embedding").get<std::vector<double>>();
            ASSERT_EQ(got->size(), want.size());
            double length = 0, worst = 0;
            for (size_t i = 0; i < want.size(); ++i) {
                length += static_cast<double>((*got)[i]) * (*got)[i];
                worst = std::max(worst, std::abs((*got)[i] - want[i]));
            }
            EXPECT_NEAR(length, 1.0, 1e-5) << "normalized";
            // As close as the logits must be (smollm2_reference_test: correlation above
            // 0.998): both quantize the Q4_1 products' activations, each its own way. Seen
            // with AVX-512: cosine 0.99937 at worst, a component 0.0101 apart. Another pooling
            // of the same text has a cosine of 0.32 to 0.84.
            worst_cosine = std::min(worst_cosine, cosine(*got, want));
            EXPECT_GT(cosine(*got, want), 0.998);
            EXPECT_LT(worst, 0.03);
            ++compared;
        }
        EXPECT_EQ(compared, 15);
        std::printf("n_batch %u: the lowest cosine similarity to llama.cpp's embedding: %.6f\n", n_batch, worst_cosine);
    }
}

TEST(Embeddings, SimilarTextsAreNearerThanOthers) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    Result<Model> model = Model::load(test::test_model_path(), two_threads());
    ASSERT_TRUE(model) << model.error().message;
    const auto embed = [&](const char* text) {
        Result<std::vector<float>> v =
            model->embed(model->tokenizer().tokenize(text, true, false), EmbeddingPooling::mean);
        EXPECT_TRUE(v) << v.error().message;
        return v ? *v : std::vector<float>();
    };
    const std::vector<float> fox = embed("The quick brown fox jumps over the lazy dog.");
    const std::vector<float> fox2 = embed("A fast brown fox jumped over a lazy dog.");
    const std::vector<float> code = embed("int main() { return 0; }");
    const auto dot = [](const std::vector<float>& a, const std::vector<float>& b) {
        double s = 0;
        for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
        return s;
    };
    EXPECT_GT(dot(fox, fox2), dot(fox, code));
    // Without normalizing, the same direction, longer.
    Result<std::vector<float>> raw =
        model->embed(model->tokenizer().tokenize("The quick brown fox jumps over the lazy dog.", true, false),
                     EmbeddingPooling::mean, false);
    ASSERT_TRUE(raw) << raw.error().message;
    double length = 0;
    for (float v : *raw) length += static_cast<double>(v) * v;
    EXPECT_GT(std::sqrt(length), 1.5);
    std::vector<double> as_double(raw->begin(), raw->end());
    EXPECT_GT(cosine(fox, as_double), 0.999999);
}

TEST(Embeddings, BadInputsAreRefusedWithTheReason) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    ModelOptions o = two_threads();
    o.n_ctx = 32;
    Result<Model> model = Model::load(test::test_model_path(), o);
    ASSERT_TRUE(model) << model.error().message;
    const Result<std::vector<float>> empty = model->embed({}, EmbeddingPooling::mean);
    ASSERT_FALSE(empty);
    EXPECT_NE(empty.error().message.find("empty"), std::string::npos) << empty.error().message;
    const std::vector<TokenId> long_input(40, 100);
    const Result<std::vector<float>> too_long = model->embed(long_input, EmbeddingPooling::mean);
    ASSERT_FALSE(too_long);
    EXPECT_EQ(too_long.error().code, ErrorCode::context_full);
    EXPECT_NE(too_long.error().message.find("40 tokens"), std::string::npos) << too_long.error().message;
    // The model goes on: nothing was left open.
    EXPECT_TRUE(model->embed(std::vector<TokenId>(20, 100), EmbeddingPooling::last));
    EXPECT_EQ(model->kv_stats().sequences, 0u);
}

TEST(Embeddings, TheEngineEmbedsBesideAGenerationThatGoesOnUnchanged) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    Engine engine;
    ModelOptions o = two_threads(32);
    o.max_sequences = 2;
    engine.submit(LoadCommand{test::test_model_path(), o});
    std::vector<EngineEvent> loaded = test::events_until(engine, [](const EngineEvent& e) {
        return std::holds_alternative<LoadedEvent>(e) || std::holds_alternative<ErrorEvent>(e);
    });
    ASSERT_TRUE(std::holds_alternative<LoadedEvent>(loaded.back()));

    GenerateCommand story;
    story.request_id = 1;
    story.raw_prompt = "Once upon a time";
    story.settings.max_tokens = 40;
    story.settings.ignore_eos = true;
    story.settings.sampling.temperature = 0;
    // Eight inputs (two texts four times), an input at a time between the story's steps.
    size_t tokens_before_embedded = 0;
    const auto run_story = [&](bool with_embeddings) {
        engine.submit(story);
        if (with_embeddings) {
            EmbedCommand embed;
            embed.request_id = 2;
            for (int i = 0; i < 4; ++i) {
                embed.inputs.push_back("The quick brown fox jumps over the lazy dog.");
                embed.inputs.push_back("Paris is the capital of France.");
            }
            engine.submit(embed);
        }
        std::vector<TokenId> ids;
        std::optional<EmbeddingsEvent> embedded;
        const std::vector<EngineEvent> events = test::events_until(engine, [&](const EngineEvent& e) {
            if (const auto* em = std::get_if<EmbeddingsEvent>(&e)) embedded = *em;
            if (std::holds_alternative<TokenEvent>(e) && !embedded) ++tokens_before_embedded;
            if (const auto* d = std::get_if<DoneEvent>(&e)) ids = d->generated_ids;
            if (const auto* err = std::get_if<ErrorEvent>(&e)) ADD_FAILURE() << err->error.message;
            return !ids.empty() && (embedded || !with_embeddings);
        });
        return std::make_pair(ids, embedded);
    };
    const auto [alone, none] = run_story(false);
    tokens_before_embedded = 0;
    const auto [beside, embedded] = run_story(true);
    EXPECT_EQ(beside, alone) << "the generation is unchanged";
    ASSERT_TRUE(embedded);
    ASSERT_EQ(embedded->vectors.size(), 8u);
    EXPECT_EQ(embedded->request_id, 2u);
    // The story went on while the inputs were embedded, rather than waiting for all eight.
    EXPECT_GE(tokens_before_embedded, 3u);
    for (size_t i = 2; i < 8; ++i) EXPECT_EQ(embedded->vectors[i], embedded->vectors[i % 2]) << "input " << i;
    // The model's default pooling (the file names none: mean), as Model::embed gives it.
    const nlohmann::json& first = fixture().at("cases").at(0);
    ASSERT_EQ(first.at("pooling"), "mean");
    EXPECT_GT(cosine(embedded->vectors[0], first.at("embedding").get<std::vector<double>>()), 0.998);
    EXPECT_EQ(embedded->prompt_tokens,
              4 * (first.at("prompt_ids").size() + fixture().at("cases").at(3).at("prompt_ids").size()));

    // No input, and ids outside the vocabulary, are errors of that request.
    EmbedCommand nothing;
    nothing.request_id = 3;
    engine.submit(nothing);
    EmbedCommand bad_ids;
    bad_ids.request_id = 4;
    bad_ids.token_inputs = {{1, 2, 999999}};
    engine.submit(bad_ids);
    std::vector<ErrorEvent> errors;
    test::events_until(engine, [&](const EngineEvent& e) {
        if (const auto* err = std::get_if<ErrorEvent>(&e)) errors.push_back(*err);
        return errors.size() == 2;
    });
    ASSERT_EQ(errors.size(), 2u);
    EXPECT_EQ(errors[0].request_id, 3u);
    EXPECT_NE(errors[0].error.message.find("no input"), std::string::npos) << errors[0].error.message;
    EXPECT_EQ(errors[1].request_id, 4u);
    EXPECT_NE(errors[1].error.message.find("999999"), std::string::npos) << errors[1].error.message;
}

// Commands run in the order given: embeddings asked before a load are the former model's,
// even when they were waiting for a sequence that a generation held.
TEST(Embeddings, EmbeddingsAskedBeforeALoadAreTheFormerModels) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    test::TempDir dir;
    SynthOptions so;
    so.preset = "smollm2-135m";  // the same vocabulary and width, random weights
    so.type = "q8_0";
    so.n_layer = 2;
    so.n_ctx = 512;
    so.output = dir / "other.gguf";
    ASSERT_TRUE(synthesize_model(so));
    Engine engine;
    ModelOptions o = two_threads();
    o.max_sequences = 1;  // the generation holds the only sequence
    engine.submit(LoadCommand{test::test_model_path(), o});
    ASSERT_TRUE(std::holds_alternative<LoadedEvent>(test::events_until(engine, [](const EngineEvent& e) {
                                                        return std::holds_alternative<LoadedEvent>(e) ||
                                                               std::holds_alternative<ErrorEvent>(e);
                                                    }).back()));
    EmbedCommand embed;
    embed.request_id = 1;
    embed.inputs = {"Paris is the capital of France."};
    engine.submit(embed);
    const EngineEvent first =
        test::events_until(engine, [](const EngineEvent& e) {
            return std::holds_alternative<EmbeddingsEvent>(e) || std::holds_alternative<ErrorEvent>(e);
        }).back();
    ASSERT_TRUE(std::holds_alternative<EmbeddingsEvent>(first));
    const std::vector<float> alone = std::get<EmbeddingsEvent>(first).vectors.at(0);

    GenerateCommand story;
    story.request_id = 2;
    story.raw_prompt = "Once upon a time";
    story.settings.max_tokens = 400;
    story.settings.ignore_eos = true;
    engine.submit(story);
    test::events_until(engine, [](const EngineEvent& e) {
        return std::holds_alternative<TokenEvent>(e) || std::holds_alternative<ErrorEvent>(e);
    });  // the story holds the sequence now
    embed.request_id = 3;
    engine.submit(embed);
    engine.submit(LoadCommand{so.output, o});
    std::optional<EmbeddingsEvent> waited;
    test::events_until(engine, [&](const EngineEvent& e) {
        if (const auto* em = std::get_if<EmbeddingsEvent>(&e)) waited = *em;
        if (const auto* err = std::get_if<ErrorEvent>(&e)) ADD_FAILURE() << err->error.message;
        return std::holds_alternative<LoadedEvent>(e) || std::holds_alternative<ErrorEvent>(e);
    });
    ASSERT_TRUE(waited) << "given before the load was done";
    EXPECT_EQ(waited->request_id, 3u);
    EXPECT_EQ(waited->vectors.at(0), alone) << "the model it was asked of";
}

}  // namespace
}  // namespace embedding_test
}  // namespace powerhouse
