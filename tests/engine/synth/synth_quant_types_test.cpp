// synth's mixtures against llama.cpp's own quantizer: tests/data/synth/quant_types.json
// holds the type llama-quantize's choice (llama_quant_compute_types in the libllama of
// PyPI llama-cpp-python) gives every quantizable tensor of mixture-of-experts (gpt-oss
// included) and dense models, for every file type synth offers, with tensor lists written apart from synth
// (scripts/fixtures/make_quant_types_fixture.py). Every tensor of synth's plan must have
// that type; the tensors llama.cpp leaves alone (norms, the router, rope_freqs) are F32.
// quant_types_arch.json does the same for the presets of the architectures added later.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "engine/synth/synth_test_support.h"

namespace powerhouse {
namespace {

using namespace synth_test;
using nlohmann::json;

std::vector<std::string> split_words(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> out;
    for (std::string word; in >> word;) out.push_back(word);
    return out;
}

// Checks every case of a fixture; returns the number of (tensor, file type) pairs checked and
// the presets covered.
std::pair<size_t, std::set<std::string>> check_fixture(const std::string& file) {
    std::ifstream in(test::data_dir() / "synth" / file);
    const json fixture = json::parse(in, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(fixture.is_discarded()) << file;
    size_t n_checked = 0;
    std::set<std::string> presets;
    if (fixture.is_discarded()) return {n_checked, presets};
    for (const json& c : fixture.at("cases")) {
        const std::string preset = c.at("preset").get<std::string>();
        const uint32_t layers = c.at("layers").get<uint32_t>();
        const std::vector<std::string> names = c.at("names").get<std::vector<std::string>>();
        presets.insert(preset);
        for (const auto& [type, joined] : c.at("types").items()) {
            SCOPED_TRACE(c.at("case").get<std::string>() + " " + type);
            const std::vector<std::string> want = split_words(joined.get<std::string>());
            EXPECT_EQ(want.size(), names.size());
            if (want.size() != names.size()) continue;
            const Tensors planned = tensors_of(preset, type, layers);
            std::set<std::string> quantizable;
            for (size_t i = 0; i < names.size(); ++i) {
                EXPECT_EQ(planned.type_of(names[i]), want[i]) << names[i];
                quantizable.insert(names[i]);
                ++n_checked;
            }
            for (const auto& [name, t] : planned.type) {
                if (!quantizable.count(name)) {
                    EXPECT_EQ(t, "F32") << name << " is not quantized by llama.cpp";
                }
            }
        }
    }
    return {n_checked, presets};
}

TEST(SynthQuantTypes, EveryTensorHasLlamaCppsType) {
    const auto [n_checked, presets] = check_fixture("quant_types.json");
    EXPECT_TRUE(presets.count("qwen3-30b-a3b") && presets.count("qwen3-235b-a22b") && presets.count("mixtral-8x7b"));
    EXPECT_TRUE(presets.count("gpt-oss-20b") && presets.count("gpt-oss-120b"));
    EXPECT_GT(n_checked, 50000u);  // 51504 (tensor, file type) pairs
}

// The presets of phi3, smollm3, seed_oss, glm4, glm4moe, mistral3, granite and granitemoe
// (tests/data/synth/quant_types_arch.json, scripts/fixtures/make_quant_types_arch_fixture.py):
// Phi-3's fused attn_qkv, GLM's fused ffn_up, GLM-4.5's shared experts and prediction block
// (its eh_proj quantized, its block counted in the layer counts) among them.
TEST(SynthQuantTypes, TheNewArchitecturesHaveLlamaCppsTypes) {
    const auto [n_checked, presets] = check_fixture("quant_types_arch.json");
    for (const char* p : {"phi3.5-mini", "smollm3-3b", "seed-oss-36b", "glm4-9b", "glm4.5-air", "glm4.5",
                          "ministral3-8b", "granite3.3-8b", "granite3.1-1b-a400m"}) {
        EXPECT_TRUE(presets.count(p)) << p;
    }
    EXPECT_GT(n_checked, 50000u);
}

}  // namespace
}  // namespace powerhouse
