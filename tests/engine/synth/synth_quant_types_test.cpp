// synth's mixtures against llama.cpp's own quantizer: tests/data/synth/quant_types.json
// holds the type llama-quantize's choice (llama_quant_compute_types in the libllama of
// PyPI llama-cpp-python) gives every quantizable tensor of mixture-of-experts (gpt-oss
// included) and dense models, for every file type synth offers, with tensor lists written apart from synth
// (scripts/fixtures/make_quant_types_fixture.py). Every tensor of synth's plan must have
// that type; the tensors llama.cpp leaves alone (norms, the router, rope_freqs) are F32.
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

TEST(SynthQuantTypes, EveryTensorHasLlamaCppsType) {
    std::ifstream in(test::data_dir() / "synth" / "quant_types.json");
    const json fixture = json::parse(in, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(fixture.is_discarded());
    size_t n_checked = 0;
    std::set<std::string> presets;
    for (const json& c : fixture.at("cases")) {
        const std::string preset = c.at("preset").get<std::string>();
        const uint32_t layers = c.at("layers").get<uint32_t>();
        const std::vector<std::string> names = c.at("names").get<std::vector<std::string>>();
        presets.insert(preset);
        for (const auto& [type, joined] : c.at("types").items()) {
            SCOPED_TRACE(c.at("case").get<std::string>() + " " + type);
            const std::vector<std::string> want = split_words(joined.get<std::string>());
            ASSERT_EQ(want.size(), names.size());
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
    EXPECT_TRUE(presets.count("qwen3-30b-a3b") && presets.count("qwen3-235b-a22b") && presets.count("mixtral-8x7b"));
    EXPECT_TRUE(presets.count("gpt-oss-20b") && presets.count("gpt-oss-120b"));
    EXPECT_GT(n_checked, 50000u);  // 51504 (tensor, file type) pairs
}

}  // namespace
}  // namespace powerhouse
