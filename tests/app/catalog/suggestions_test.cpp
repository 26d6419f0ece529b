// The welcome view's suggested models: the shipped list is valid and plannable, and each
// model is placed on hand-made machines as the planner places it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "catalog/suggestions.h"
#include "powerhouse/synth.h"

namespace powerhouse::catalog {
namespace {

DeviceDesc gpu(const std::string& name, double gib) {
    DeviceDesc d;
    d.name = name;
    d.kind = DeviceKind::cuda;
    d.total_bytes = d.free_bytes = static_cast<uint64_t>(gib * (1ull << 30));
    return d;
}

DeviceDesc ram(double gib, double bandwidth_gb_s = 50) {
    DeviceDesc d;
    d.name = "CPU";
    d.kind = DeviceKind::cpu;
    d.total_bytes = d.free_bytes = static_cast<uint64_t>(gib * (1ull << 30));
    d.bandwidth_gb_s = bandwidth_gb_s;
    return d;
}

std::vector<SuggestedModel> builtin() {
    Result<std::vector<SuggestedModel>> list = parse_suggested_models(builtin_suggested_models_json());
    EXPECT_TRUE(list.ok()) << list.error().message;
    return list.ok() ? *list : std::vector<SuggestedModel>{};
}

const Suggestion& find(const std::vector<Suggestion>& all, const std::string& name) {
    const auto it = std::find_if(all.begin(), all.end(), [&](const Suggestion& s) { return s.model.name == name; });
    EXPECT_NE(it, all.end()) << name << " is not in the list";
    return it != all.end() ? *it : all.front();
}

TEST(SuggestedModels, TheShippedListIsValidAndEveryModelHasAShape) {
    const std::vector<SuggestedModel> list = builtin();
    ASSERT_GE(list.size(), 6u);
    for (const SuggestedModel& m : list) {
        SynthOptions o;
        o.preset = m.like;
        o.type = m.type;
        Result<SynthPlan> plan = plan_synth_model(o);
        ASSERT_TRUE(plan.ok()) << m.name << ": " << plan.error().message;
        Result<ModelShape> shape = synth_model_shape(*plan);
        ASSERT_TRUE(shape.ok()) << m.name << ": " << shape.error().message;
        EXPECT_GT(shape->weight_bytes(), 100ull << 20) << m.name;
        EXPECT_FALSE(m.files.empty());
        // A file name names the quantization the entry says it is.
        for (const SuggestedFile& f : m.files) {
            std::string lower_path = f.path, lower_quant = m.quantization;
            std::transform(lower_path.begin(), lower_path.end(), lower_path.begin(), ::tolower);
            std::transform(lower_quant.begin(), lower_quant.end(), lower_quant.begin(), ::tolower);
            EXPECT_NE(lower_path.find(lower_quant), std::string::npos) << f.path;
        }
    }
}

// The welcome view takes the shapes from the options alone (no tokenizer laid out): they
// must be the ones of the whole layout, tensor for tensor.
TEST(SuggestedModels, ShapesFromTheOptionsAloneEqualThoseOfTheWholeLayout) {
    for (const SuggestedModel& m : builtin()) {
        SynthOptions o;
        o.preset = m.like;
        o.type = m.type;
        Result<SynthPlan> plan = plan_synth_model(o);
        ASSERT_TRUE(plan.ok()) << m.name;
        Result<ModelShape> whole = synth_model_shape(*plan);
        Result<ModelShape> alone = synth_model_shape(o);
        ASSERT_TRUE(whole.ok() && alone.ok()) << m.name;
        EXPECT_EQ(alone->name, whole->name);
        EXPECT_EQ(alone->architecture, whole->architecture);
        EXPECT_EQ(alone->n_layer, whole->n_layer) << m.name;
        EXPECT_EQ(alone->n_vocab, whole->n_vocab) << m.name;
        EXPECT_EQ(alone->n_expert, whole->n_expert) << m.name;
        EXPECT_EQ(alone->embedding_bytes, whole->embedding_bytes) << m.name;
        EXPECT_EQ(alone->output_bytes, whole->output_bytes) << m.name;
        EXPECT_EQ(alone->tied_output, whole->tied_output) << m.name;
        EXPECT_EQ(alone->weight_bytes(), whole->weight_bytes()) << m.name;
        ASSERT_EQ(alone->layers.size(), whole->layers.size()) << m.name;
        for (size_t i = 0; i < alone->layers.size(); ++i) {
            EXPECT_EQ(alone->layers[i].total(), whole->layers[i].total()) << m.name << " layer " << i;
            EXPECT_EQ(alone->layers[i].experts, whole->layers[i].experts) << m.name << " layer " << i;
            EXPECT_EQ(alone->layers[i].ff_block, whole->layers[i].ff_block) << m.name << " layer " << i;
        }
    }
    SynthOptions unknown;
    unknown.preset = "llama9-1t";
    EXPECT_EQ(synth_model_shape(unknown).error().code, ErrorCode::invalid_argument);
}

TEST(SuggestedModels, TwoGpusOf24GiBSplitA70BAndPutMoeExpertsInRam) {
    PlanOptions options;
    options.n_ctx = 4096;
    options.ram_bytes = 64ull << 30;
    const std::vector<Suggestion> all =
        suggest_models(builtin(), {gpu("RTX 4090", 24), gpu("RTX 4090", 24)}, ram(64), options);
    const Suggestion& llama70 = find(all, "Llama 3.3 70B Instruct");
    EXPECT_EQ(llama70.placement, SuggestedPlacement::split) << llama70.where;
    EXPECT_EQ(llama70.where, "split over 2 GPUs");
    // About 40 GiB of Q4_K_M weights.
    EXPECT_GT(llama70.size_bytes, 38ull << 30);
    EXPECT_LT(llama70.size_bytes, 44ull << 30);
    const Suggestion& oss120 = find(all, "gpt-oss 120B");
    EXPECT_EQ(oss120.placement, SuggestedPlacement::gpu_and_ram) << oss120.where;
    EXPECT_NE(oss120.where.find("in RAM"), std::string::npos);
    const Suggestion& qwen8 = find(all, "Qwen3 8B");
    EXPECT_EQ(qwen8.placement, SuggestedPlacement::gpu);
    EXPECT_EQ(qwen8.where, "fits on GPU 0 (RTX 4090)");
    // A 4090 reads a 5 GB model about 200 times a second; the estimate is of that order.
    EXPECT_GT(qwen8.tokens_per_second, 100);
    EXPECT_LT(qwen8.tokens_per_second, 260);
    // Four recommended, all wholly on GPUs, the most capable first.
    std::vector<std::string> recommended;
    for (const Suggestion& s : all) {
        if (!s.recommended) continue;
        recommended.push_back(s.model.name);
        EXPECT_TRUE(s.placement == SuggestedPlacement::gpu || s.placement == SuggestedPlacement::split) << s.model.name;
    }
    ASSERT_EQ(recommended.size(), 4u);
    EXPECT_EQ(recommended.front(), "Llama 3.3 70B Instruct");
}

TEST(SuggestedModels, OneGpuOf80GiBHoldsTheLargestWhole) {
    PlanOptions options;
    options.n_ctx = 4096;
    const std::vector<Suggestion> all = suggest_models(builtin(), {gpu("A100", 80)}, ram(64), options);
    const Suggestion& oss120 = find(all, "gpt-oss 120B");
    EXPECT_EQ(oss120.placement, SuggestedPlacement::gpu) << oss120.where;
    EXPECT_TRUE(oss120.recommended);
    EXPECT_EQ(find(all, "Llama 3.3 70B Instruct").placement, SuggestedPlacement::gpu);
}

TEST(SuggestedModels, WithoutAGpuSmallModelsRunOnTheCpuAndLargeOnesSayWhyNot) {
    PlanOptions options;
    options.n_ctx = 4096;
    const std::vector<Suggestion> all = suggest_models(builtin(), {}, ram(16, 50), options);
    const Suggestion& small = find(all, "Qwen3 0.6B");
    EXPECT_EQ(small.placement, SuggestedPlacement::cpu);
    EXPECT_EQ(small.where, "runs on the CPU");
    // 16 GiB at 50 GB/s: an 8B Q4_K_M (about 5 GB read per token) is still about 10 tokens/s.
    const Suggestion& qwen8 = find(all, "Qwen3 8B");
    EXPECT_EQ(qwen8.placement, SuggestedPlacement::cpu);
    EXPECT_TRUE(qwen8.recommended);
    const Suggestion& llama70 = find(all, "Llama 3.3 70B Instruct");
    EXPECT_EQ(llama70.placement, SuggestedPlacement::does_not_fit);
    EXPECT_EQ(llama70.where.rfind("does not fit: ", 0), 0u) << llama70.where;
    EXPECT_FALSE(llama70.recommended);
    // Recommended ones are fast enough to chat with by the planner's estimate.
    for (const Suggestion& s : all) {
        if (s.recommended) {
            EXPECT_GE(s.tokens_per_second, kRecommendedTokensPerSecond) << s.model.name;
        }
    }
}

TEST(SuggestedModels, SizesFromTheListWinOverThePlannedSize) {
    Result<std::vector<SuggestedModel>> list = parse_suggested_models(R"({"version": 1, "models": [
        {"name": "Qwen3 0.6B", "repo": "Qwen/Qwen3-0.6B-GGUF", "quantization": "Q8_0", "like": "qwen3-0.6b",
         "type": "q8_0", "files": [{"path": "Qwen3-0.6B-Q8_0.gguf", "size": 639446688,
         "sha256": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}]}]})");
    ASSERT_TRUE(list.ok()) << list.error().message;
    ASSERT_EQ(list->size(), 1u);
    EXPECT_EQ(list->front().files.front().sha256.size(), 64u);
    const std::vector<Suggestion> all = suggest_models(*list, {gpu("RTX 3090", 24)}, std::nullopt, {});
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all.front().size_bytes, 639446688u);
}

TEST(SuggestedModels, ABadListSaysWhatIsWrongAndWhere) {
    const auto error_of = [](const std::string& text) {
        Result<std::vector<SuggestedModel>> r = parse_suggested_models(text);
        return r.ok() ? std::string("(accepted)") : r.error().message;
    };
    const std::string good_file = R"("files": [{"path": "m-Q4_K_M.gguf"}])";
    const std::string head = R"({"version": 1, "models": [{"name": "M", "quantization": "Q4_K_M", "like": "qwen3-8b", "type": "q4_k_m", )";
    EXPECT_EQ(error_of("{"), "the list of suggested models is not valid JSON");
    EXPECT_EQ(error_of(R"({"models": 3})"), "the list of suggested models has no \"models\" array");
    EXPECT_EQ(error_of(R"({"version": 2, "models": []})"),
              "the list of suggested models is not version 1, the one this program reads");
    EXPECT_EQ(error_of(head + good_file + "}]}"), "models[0]: \"repo\" is missing");
    EXPECT_EQ(error_of(head + R"("repo": "nameonly", )" + good_file + "}]}"),
              "models[0].repo \"nameonly\" is not ORG/NAME");
    EXPECT_EQ(error_of(head + R"("repo": "a/b", "files": []}]})"), "models[0].files must list the model's files");
    EXPECT_EQ(error_of(head + R"("repo": "a/b", "files": [{"path": "m.bin"}]}]})"),
              "models[0].files[0].path \"m.bin\" is not a .gguf file");
    EXPECT_EQ(error_of(head + R"("repo": "a/b", "files": [{"path": "m.gguf", "sha256": "ABC"}]}]})"),
              "models[0].files[0].sha256 is not 64 lower-case hex digits");
    EXPECT_EQ(error_of(head + R"("repo": "a/b", "files": [{"path": "m.gguf", "size": -4}]}]})"),
              "models[0].files[0].size is not a positive number of bytes");
    EXPECT_EQ(error_of(head + R"("repo": 7, )" + good_file + "}]}"), "models[0].repo is not a string");
}

TEST(SuggestedModels, AnEntryWithAnUnknownShapeIsListedAsNotPlannable) {
    Result<std::vector<SuggestedModel>> list = parse_suggested_models(R"({"models": [
        {"name": "X", "repo": "a/b", "quantization": "Q4_K_M", "like": "no-such-model", "type": "q4_k_m",
         "files": [{"path": "x-Q4_K_M.gguf"}]}]})");
    ASSERT_TRUE(list.ok()) << list.error().message;
    const std::vector<Suggestion> all = suggest_models(*list, {gpu("RTX 4090", 24)}, ram(64), {});
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all.front().placement, SuggestedPlacement::does_not_fit);
    EXPECT_EQ(all.front().where.rfind("cannot be planned: ", 0), 0u) << all.front().where;
    EXPECT_FALSE(all.front().recommended);
}

}  // namespace
}  // namespace powerhouse::catalog
