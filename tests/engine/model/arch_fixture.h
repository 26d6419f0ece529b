// The architecture fixture of tests/data/arch (scripts/fixtures/make_arch_fixture.py): tiny
// random-weight models of every architecture and weight type, with llama.cpp's logits at
// every position of a 20-token sequence. Read by the CPU engine's reference test and by the
// CUDA backend's.
//
// Thread-safety: manifest() is initialised once (a function-local static); the rest are
// pure.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace powerhouse::test {

inline std::filesystem::path arch_dir() { return data_dir() / "arch"; }

// The manifest, or an empty one when it is missing or malformed (the tests that need it then
// fail, instead of the whole program at start-up, where the list of models is read).
inline const nlohmann::json& arch_manifest() {
    static const nlohmann::json data = [] {
        nlohmann::json parsed = nlohmann::json::parse(read_file(arch_dir() / "arch_models.json"), nullptr, false);
        return parsed.is_object() ? parsed
                                  : nlohmann::json::object({{"models", nlohmann::json::array()},
                                                            {"tokens", nlohmann::json::array()}});
    }();
    return data;
}

inline std::vector<std::string> arch_model_names() {
    std::vector<std::string> names;
    for (const nlohmann::json& m : arch_manifest().at("models")) names.push_back(m.at("name").get<std::string>());
    return names;
}

inline bool arch_has_experts(const nlohmann::json& entry) {
    return entry.at("settings").value("n_expert", 0) > 0;
}

// The models with experts (mixture of experts), or those without (dense).
inline std::vector<std::string> arch_model_names(bool experts) {
    std::vector<std::string> names;
    for (const nlohmann::json& m : arch_manifest().at("models")) {
        if (arch_has_experts(m) == experts) names.push_back(m.at("name").get<std::string>());
    }
    return names;
}

// The manifest's entry of one model; an empty object (and a test failure) when it has none.
inline const nlohmann::json& arch_entry(const std::string& name) {
    for (const nlohmann::json& m : arch_manifest().at("models")) {
        if (m.at("name") == name) return m;
    }
    ADD_FAILURE() << "no model " << name << " in the manifest";
    static const nlohmann::json none = nlohmann::json::object();
    return none;
}

// A test name from a model name ("llama3-rope-f16" -> "llama3_rope_f16").
inline std::string arch_test_name(const ::testing::TestParamInfo<std::string>& param) {
    std::string name = param.param;
    for (char& c : name) {
        if (c == '-') c = '_';
    }
    return name;
}

}  // namespace powerhouse::test
