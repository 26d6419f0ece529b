// Model names as a person writes them: the real test model's metadata (general.basename
// "smollm2", size_label "135M", finetune "8k-lc100k-mix1-ep2", general.name "Smollm2 135M 8k
// Lc100K Mix1 Ep2"), the files other apps name by hash or as "model.gguf", and names made
// from file names alone.
#include "catalog/display_name.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "catalog/catalog.h"
#include "support/test_support.h"

namespace powerhouse::catalog {
namespace {

TEST(DisplayName, TheTestModelIsNamedAsItsPublisherWritesIt) {
    const store::ModelRecord r = inspect_file(test::test_model_path(), "");
    ASSERT_TRUE(r.ok) << r.problem;
    const auto info = nlohmann::json::parse(r.info_json);
    // What the file says about itself.
    EXPECT_EQ(info["name"], "Smollm2 135M 8k Lc100K Mix1 Ep2");
    EXPECT_EQ(info["basename"], "smollm2");
    EXPECT_EQ(info["size_label"], "135M");
    EXPECT_EQ(info["finetune"], "8k-lc100k-mix1-ep2");
    EXPECT_EQ(info["quantization"], "Q4_1");
    // Its file name, SmolLM2-135M-Instruct.Q4_1.gguf, names the same model better.
    EXPECT_EQ(info["display_name"], "SmolLM2 135M Instruct · Q4_1");
    EXPECT_EQ(record_display_name(r), "SmolLM2 135M Instruct · Q4_1");
}

TEST(DisplayName, WithoutAUsefulFileNameTheMetadataNamesIt) {
    NameFacts smol;
    smol.basename = "smollm2";
    smol.size_label = "135M";
    smol.finetune = "8k-lc100k-mix1-ep2";  // a training run's tags: left out
    smol.general_name = "Smollm2 135M 8k Lc100K Mix1 Ep2";
    smol.quantization = "Q4_1";
    smol.file_name = "sha256-" + std::string(64, 'a');  // an Ollama blob
    smol.other_name = "smollm2:135m";
    EXPECT_EQ(display_name(smol), "Smollm2 135M · Q4_1");

    NameFacts llama;
    llama.basename = "Llama-3.2";
    llama.size_label = "3B";
    llama.finetune = "Instruct";
    llama.general_name = "Llama 3.2 3B Instruct";
    llama.quantization = "Q4_K_M";
    llama.file_name = "sha256-" + std::string(64, 'b');
    EXPECT_EQ(display_name(llama), "Llama 3.2 3B Instruct · Q4_K_M");
    llama.file_name = "model.gguf";  // Jan's newer layout
    EXPECT_EQ(display_name(llama), "Llama 3.2 3B Instruct · Q4_K_M");

    NameFacts nemo;
    nemo.basename = "Mistral-Nemo";
    nemo.size_label = "12B";
    nemo.finetune = "Instruct-2407";
    nemo.quantization = "Q6_K";
    nemo.file_name = "model.gguf";
    EXPECT_EQ(display_name(nemo), "Mistral Nemo 12B Instruct 2407 · Q6_K");

    // A file name that names another model than the metadata does is not used.
    llama.file_name = "my-favourite.gguf";
    EXPECT_EQ(display_name(llama), "Llama 3.2 3B Instruct · Q4_K_M");
    // One that does is, with its own spelling and words.
    llama.file_name = "Llama-3.2-3B-Instruct-Q4_K_M.gguf";
    EXPECT_EQ(display_name(llama), "Llama 3.2 3B Instruct · Q4_K_M");
}

TEST(DisplayName, FileNamesAloneAreCleanedUp) {
    const auto from_file = [](const std::string& file, const std::string& quantization = {}) {
        NameFacts f;
        f.file_name = file;
        f.quantization = quantization;
        return display_name(f);
    };
    EXPECT_EQ(from_file("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"), "Meta Llama 3.1 8B Instruct · Q4_K_M");
    // llama.cpp's cache: <user>_<repository>_<file>.
    EXPECT_EQ(from_file("bartowski_Llama-3.2-1B-Instruct-GGUF_Llama-3.2-1B-Instruct-Q4_K_M.gguf"),
              "Llama 3.2 1B Instruct · Q4_K_M");
    // A split model's first part.
    EXPECT_EQ(from_file("Qwen2.5-7B-Instruct-Q8_0-00001-of-00003.gguf"), "Qwen2.5 7B Instruct · Q8_0");
    EXPECT_EQ(from_file("mistral-7b-instruct-v0.2.Q5_K_M.gguf"), "mistral 7b instruct v0.2 · Q5_K_M");
    EXPECT_EQ(from_file("gemma-3-1b-it-BF16.gguf"), "gemma 3 1b it · BF16");
    EXPECT_EQ(from_file("Phi-3-mini-4k-instruct-IQ4_XS.gguf"), "Phi 3 mini 4k instruct · IQ4_XS");
    // The file's own type wins over what its name claims.
    EXPECT_EQ(from_file("tiny.gguf", "Q8_0"), "tiny · Q8_0");
    EXPECT_EQ(from_file("notes.gguf"), "notes");

    // Names that say nothing give way to general.name, then to the other app's name.
    NameFacts f;
    f.file_name = "ggml-model-q4_0.gguf";
    f.general_name = "LLaMA v2";
    EXPECT_EQ(display_name(f), "LLaMA v2 · Q4_0");
    f = {};
    f.file_name = "sha256-" + std::string(64, 'c');
    f.other_name = "tinyllama:latest";
    EXPECT_EQ(display_name(f), "tinyllama:latest");
    f.other_name.clear();
    EXPECT_EQ(display_name(f), f.file_name) << "nothing better: the file name as it is";
}

TEST(DisplayName, QuantizationFromTheFileName) {
    EXPECT_EQ(quantization_from_file_name("Llama-3.2-1B-Instruct-Q4_K_M.gguf"), "Q4_K_M");
    EXPECT_EQ(quantization_from_file_name("SmolLM2-135M-Instruct.Q4_1.gguf"), "Q4_1");
    EXPECT_EQ(quantization_from_file_name("model-iq2_xxs.gguf"), "IQ2_XXS");
    EXPECT_EQ(quantization_from_file_name("gpt-oss-20b-mxfp4.gguf"), "MXFP4");
    EXPECT_EQ(quantization_from_file_name("qwen2.5-0.5b-instruct-fp16.gguf"), "FP16");
    EXPECT_EQ(quantization_from_file_name("Qwen3-4B.gguf"), "");
    EXPECT_EQ(quantization_from_file_name("sha256-0123abcd"), "");
}

}  // namespace
}  // namespace powerhouse::catalog
