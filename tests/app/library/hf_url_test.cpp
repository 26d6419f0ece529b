// Hugging Face URLs and the tree API's answer, on canned JSON in the API's shape (no
// network): file pages to download URLs, model pages to API URLs, GGUF files grouped by
// quantization with multi-part files joined.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "library/hf_url.h"

namespace powerhouse::library {
namespace {

TEST(HfUrl, AFilePageBecomesItsDownloadUrl) {
    EXPECT_EQ(hf_resolve_url("https://huggingface.co/bartowski/Llama-3.2-1B-Instruct-GGUF/blob/main/"
                             "Llama-3.2-1B-Instruct-Q4_K_M.gguf"),
              "https://huggingface.co/bartowski/Llama-3.2-1B-Instruct-GGUF/resolve/main/"
              "Llama-3.2-1B-Instruct-Q4_K_M.gguf");
    // Sub-folders, a query and other host spellings.
    EXPECT_EQ(hf_resolve_url("https://hf.co/unsloth/Qwen3-8B-GGUF/blob/main/Q8_0/Qwen3-8B-Q8_0.gguf?download=true"),
              "https://huggingface.co/unsloth/Qwen3-8B-GGUF/resolve/main/Q8_0/Qwen3-8B-Q8_0.gguf");
    EXPECT_EQ(hf_resolve_url("https://www.huggingface.co/a/b/blob/v1.0/c.gguf"),
              "https://huggingface.co/a/b/resolve/v1.0/c.gguf");
    // A download URL stays one; a pinned commit stays pinned.
    EXPECT_EQ(hf_resolve_url("https://huggingface.co/a/b/resolve/0123abcd/c.gguf"),
              "https://huggingface.co/a/b/resolve/0123abcd/c.gguf");
}

TEST(HfUrl, OtherUrlsAreNotFileUrls) {
    EXPECT_FALSE(hf_resolve_url("https://example.com/a/b/blob/main/c.gguf"));
    EXPECT_FALSE(hf_resolve_url("https://huggingface.co/a/b"));
    EXPECT_FALSE(hf_resolve_url("https://huggingface.co/a/b/tree/main/sub"));
    EXPECT_FALSE(hf_resolve_url("https://huggingface.co/datasets/a/b/blob/main/c.parquet"));
    EXPECT_FALSE(hf_resolve_url("https://huggingface.co/a/b/blob/main"));  // no file
    EXPECT_FALSE(hf_resolve_url("ftp://huggingface.co/a/b/blob/main/c.gguf"));
    EXPECT_FALSE(hf_resolve_url("huggingface.co/a/b/blob/main/c.gguf"));
}

TEST(HfUrl, ModelPagesAreRecognised) {
    auto repo = parse_hf_model_page("https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF");
    ASSERT_TRUE(repo);
    EXPECT_EQ(repo->org, "Qwen");
    EXPECT_EQ(repo->repo, "Qwen2.5-0.5B-Instruct-GGUF");
    EXPECT_EQ(repo->revision, "main");
    repo = parse_hf_model_page("https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/");
    ASSERT_TRUE(repo);
    repo = parse_hf_model_page("https://huggingface.co/a/b/tree/refs%2Fpr%2F3/sub/dir");
    ASSERT_TRUE(repo);
    EXPECT_EQ(repo->revision, "refs%2Fpr%2F3");
    repo = parse_hf_model_page("https://hf.co/a/b?not=used#readme");
    ASSERT_TRUE(repo);
    EXPECT_EQ(repo->repo, "b");

    EXPECT_FALSE(parse_hf_model_page("https://huggingface.co/a/b/blob/main/c.gguf"));
    EXPECT_FALSE(parse_hf_model_page("https://huggingface.co/a/b/resolve/main/c.gguf"));
    EXPECT_FALSE(parse_hf_model_page("https://huggingface.co/datasets/a/b"));
    EXPECT_FALSE(parse_hf_model_page("https://huggingface.co/spaces/a/b"));
    EXPECT_FALSE(parse_hf_model_page("https://huggingface.co/docs/hub"));
    EXPECT_FALSE(parse_hf_model_page("https://huggingface.co/a"));
    EXPECT_FALSE(parse_hf_model_page("https://example.com/a/b"));
}

TEST(HfUrl, ApiAndFileUrls) {
    const HfRepo repo{"bartowski", "SmolLM2-135M-Instruct-GGUF", "main"};
    EXPECT_EQ(hf_tree_api_url(repo),
              "https://huggingface.co/api/models/bartowski/SmolLM2-135M-Instruct-GGUF/tree/main?recursive=true");
    EXPECT_EQ(hf_file_url(repo, "sub dir/model+Q4_K_M.gguf"),
              "https://huggingface.co/bartowski/SmolLM2-135M-Instruct-GGUF/resolve/main/sub%20dir/model%2BQ4_K_M.gguf");
}

TEST(HfUrl, AnotherEndpointWorksLikeHfEndpoint) {
    const std::string endpoint = "http://127.0.0.1:8080";
    EXPECT_EQ(hf_resolve_url("http://127.0.0.1:8080/a/b/blob/main/c.gguf", endpoint),
              "http://127.0.0.1:8080/a/b/resolve/main/c.gguf");
    EXPECT_FALSE(hf_resolve_url("http://127.0.0.1:9090/a/b/blob/main/c.gguf", endpoint));
    EXPECT_FALSE(hf_resolve_url("https://huggingface.co/a/b/blob/main/c.gguf", endpoint));
    const auto repo = parse_hf_model_page("http://127.0.0.1:8080/a/b", endpoint + "/");
    ASSERT_TRUE(repo);
    EXPECT_EQ(hf_tree_api_url(*repo, endpoint + "/"), "http://127.0.0.1:8080/api/models/a/b/tree/main?recursive=true");
}

// HF_ENDPOINT as the CLI and the desktop app read it: a mirror when set, Hugging Face itself
// when unset or empty (an empty address would make every download and search fail).
TEST(HfUrl, EndpointFromTheEnvironment) {
    const char* saved = std::getenv("HF_ENDPOINT");
    const std::string previous = saved != nullptr ? saved : "";
    ::unsetenv("HF_ENDPOINT");
    EXPECT_EQ(hf_endpoint_from_environment(), kHuggingFaceEndpoint);
    ::setenv("HF_ENDPOINT", "", 1);
    EXPECT_EQ(hf_endpoint_from_environment(), kHuggingFaceEndpoint);
    ::setenv("HF_ENDPOINT", "https://hf-mirror.example/", 1);
    EXPECT_EQ(hf_endpoint_from_environment(), "https://hf-mirror.example/");
    if (saved != nullptr) {
        ::setenv("HF_ENDPOINT", previous.c_str(), 1);
    } else {
        ::unsetenv("HF_ENDPOINT");
    }
}

TEST(HfUrl, NextPageComesFromTheLinkHeader) {
    EXPECT_EQ(
        next_page_url("<https://huggingface.co/api/models/a/b/tree/main?recursive=true&cursor=ZXlK>; rel=\"next\""),
        "https://huggingface.co/api/models/a/b/tree/main?recursive=true&cursor=ZXlK");
    EXPECT_EQ(next_page_url("<https://x/1?a=1,2>; rel=\"prev\", <https://x/3>; rel=\"next\""), "https://x/3");
    EXPECT_FALSE(next_page_url("<https://x/1>; rel=\"prev\""));
    EXPECT_FALSE(next_page_url(""));
}

// One page of /api/models/<org>/<repo>/tree/main?recursive=true, in its real shape.
constexpr const char* kTree = R"([
  {"type":"file","oid":"a5bfa1c4f6e0b5f3e31a8d2fd0e2b4b2e44e2ac1","size":1570,"path":".gitattributes"},
  {"type":"file","oid":"0c5c0d0c9e4b7d6f5c3e7b2a1d9f8e7c6b5a4d3e","size":3412,"path":"README.md"},
  {"type":"file","oid":"6f3b8c4a8f2e0e3c54e9a0b9d1f6c0ab31b4e2d5","size":105472032,
   "path":"Model-7B-Q4_K_M.gguf",
   "lfs":{"oid":"D1B1E3F9B0A8C7D6E5F4A3B2C1D0E9F8A7B6C5D4E3F2A1B0C9D8E7F6A5B4C3D2","size":105472032,"pointerSize":135}},
  {"type":"file","oid":"7e4c9d5b9f3f1f4d65fab1cae2a7d1bc42c5f3e6","size":141000000,"path":"Model-7B-Q8_0.gguf",
   "lfs":{"oid":"e2c2f4a0c1b9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3","size":141000000,"pointerSize":135}},
  {"type":"file","oid":"8f5dae6cae4a2a5e76abc2dbf3b8e2cd53d6a4f7","size":90000000,"path":"model-7b.iq4_xs.gguf",
   "lfs":{"oid":"f3d3a5b1d2cae9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4","size":90000000,"pointerSize":134}},
  {"type":"directory","oid":"9a6ebf7dbf5b3b6f87bcd3ecf4c9f3de64e7b5a8","size":0,"path":"F16"},
  {"type":"file","oid":"ab7fc08ec06c4c7098cde4fd05da04ef75f8c6b9","size":5000000000,
   "path":"F16/Model-7B-F16-00002-of-00003.gguf",
   "lfs":{"oid":"0000000000000000000000000000000000000000000000000000000000000002","size":5000000000,"pointerSize":135}},
  {"type":"file","oid":"bc80d19fd17d5d81a9def5ae16eb15f086a9d7ca","size":5000000000,
   "path":"F16/Model-7B-F16-00001-of-00003.gguf",
   "lfs":{"oid":"0000000000000000000000000000000000000000000000000000000000000001","size":5000000000,"pointerSize":135}},
  {"type":"file","oid":"cd91e2a0e28e6e92baef06bf27fc26a197bae8db","size":4000000000,
   "path":"F16/Model-7B-F16-00003-of-00003.gguf",
   "lfs":{"oid":"0000000000000000000000000000000000000000000000000000000000000003","size":4000000000,"pointerSize":135}},
  {"type":"file","oid":"de02f3b1f39f7fa3cbf017c038ad37b2a8cbf9ec","size":200000000,"path":"mmproj-model.gguf",
   "lfs":{"oid":"1111111111111111111111111111111111111111111111111111111111111111","size":200000000,"pointerSize":135}},
  {"type":"file","oid":"ef13a4c2a4aa8ab4dcab128d49be48c3b9dcaafd","size":123,"path":"notes.GGUF"}
])";

TEST(HfTree, GgufFilesWithSizesAndLfsHashes) {
    const auto files = parse_hf_tree_gguf_files(kTree);
    ASSERT_TRUE(files) << files.error().message;
    ASSERT_EQ(files->size(), 8u);  // not .gitattributes, README.md, the directory
    EXPECT_EQ((*files)[0].path, "Model-7B-Q4_K_M.gguf");
    EXPECT_EQ((*files)[0].size, 105472032u);
    EXPECT_EQ((*files)[0].sha256, "d1b1e3f9b0a8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2");  // lower case
    EXPECT_EQ((*files)[3].size, 5000000000u);  // sizes past 4 GiB
    EXPECT_EQ(files->back().path, "notes.GGUF");
    EXPECT_EQ(files->back().sha256, "");  // not in LFS
}

TEST(HfTree, MalformedAnswersAreErrors) {
    EXPECT_FALSE(parse_hf_tree_gguf_files("not json"));
    EXPECT_FALSE(parse_hf_tree_gguf_files(R"({"files": []})"));
    const auto error = parse_hf_tree_gguf_files(R"({"error": "Repository not found"})");
    ASSERT_FALSE(error);
    EXPECT_NE(error.error().message.find("Repository not found"), std::string::npos);
    EXPECT_FALSE(parse_hf_tree_gguf_files(R"([{"type":"file","size":1}])"));
    EXPECT_FALSE(parse_hf_tree_gguf_files(R"([{"type":"file","path":"a.gguf","size":"big"}])"));
    EXPECT_FALSE(
        parse_hf_tree_gguf_files(R"([{"type":"file","path":"a.gguf","size":1,"lfs":{"oid":"xyz","size":1}}])"));
    const auto empty = parse_hf_tree_gguf_files("[]");
    ASSERT_TRUE(empty);
    EXPECT_TRUE(empty->empty());
}

TEST(HfTree, QuantizationFromFileNames) {
    const std::pair<const char*, const char*> cases[] = {
        {"Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Q4_K_M"},
        {"qwen2.5-0.5b-instruct-q8_0.gguf", "Q8_0"},
        {"model.IQ4_XS.gguf", "IQ4_XS"},
        {"model-iq2_xxs.gguf", "IQ2_XXS"},
        {"model-IQ3_M.gguf", "IQ3_M"},
        {"gemma-3-4b-it-F16.gguf", "F16"},
        {"gemma-3-4b-it-BF16.gguf", "BF16"},
        {"model-f32.gguf", "F32"},
        {"Qwen3-8B-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"},
        {"model-Q4_0_4_4.gguf", "Q4_0_4_4"},
        {"model-Q2_K.gguf", "Q2_K"},
        {"model-Q3_K_S.gguf", "Q3_K_S"},
        {"model-Q5_K_L.gguf", "Q5_K_L"},
        {"model-Q4_1.gguf", "Q4_1"},
        {"model-TQ1_0.gguf", "TQ1_0"},
        {"gpt-oss-20b-MXFP4.gguf", "MXFP4"},
        {"Model-7B-F16-00001-of-00003.gguf", "F16"},
        {"Q4_K_M/Model-7B-00001-of-00002.gguf", "Q4_K_M"},  // the folder says it
        {"model-F16-Q4_K_M.gguf", "Q4_K_M"},                // the last one wins
        {"Qwen2-7B.gguf", ""},                              // "Q" of the name, not a quantization
        {"mmproj-model.gguf", ""},
        {"model-Q4_K_Mx.gguf", ""},  // not a whole name
        {"model_q5_k_m.gguf", "Q5_K_M"},
    };
    for (const auto& [name, quantization] : cases) EXPECT_EQ(gguf_quantization(name), quantization) << name;
}

TEST(HfTree, SplitNames) {
    const auto split = parse_gguf_split_name("dir/Model-7B-F16-00002-of-00003.gguf");
    ASSERT_TRUE(split);
    EXPECT_EQ(split->base, "dir/Model-7B-F16");
    EXPECT_EQ(split->index, 2);
    EXPECT_EQ(split->count, 3);
    EXPECT_EQ(gguf_split_file_name(*split, 1), "dir/Model-7B-F16-00001-of-00003.gguf");
    EXPECT_FALSE(parse_gguf_split_name("Model-7B-F16.gguf"));
    EXPECT_FALSE(parse_gguf_split_name("Model-00004-of-00003.gguf"));
    EXPECT_FALSE(parse_gguf_split_name("Model-0001-of-00003.gguf"));
    EXPECT_FALSE(parse_gguf_split_name("-00001-of-00003.gguf"));  // no name before it
}

TEST(HfTree, ModelsGroupedByQuantizationWithPartsJoined) {
    const auto files = parse_hf_tree_gguf_files(kTree);
    ASSERT_TRUE(files);
    const std::vector<QuantizationGroup> groups = group_gguf_models(*files);
    // By the size of each group's smallest model: "" (notes.GGUF, 123 bytes), IQ4_XS,
    // Q4_K_M, Q8_0, F16 (14 GB in three parts); the mmproj file also names none.
    ASSERT_EQ(groups.size(), 5u);
    EXPECT_EQ(groups[0].quantization, "");
    ASSERT_EQ(groups[0].models.size(), 2u);
    EXPECT_EQ(groups[0].models[0].name, "notes");
    EXPECT_EQ(groups[0].models[1].name, "mmproj-model");
    EXPECT_EQ(groups[1].quantization, "IQ4_XS");
    EXPECT_EQ(groups[2].quantization, "Q4_K_M");
    EXPECT_EQ(groups[3].quantization, "Q8_0");
    EXPECT_EQ(groups[4].quantization, "F16");
    ASSERT_EQ(groups[4].models.size(), 1u);
    const GgufModel& f16 = groups[4].models[0];
    EXPECT_EQ(f16.name, "F16/Model-7B-F16");
    EXPECT_EQ(f16.expected_parts, 3);
    EXPECT_TRUE(f16.complete());
    EXPECT_EQ(f16.total_size, 14000000000u);
    ASSERT_EQ(f16.parts.size(), 3u);
    EXPECT_EQ(f16.parts[0].path, "F16/Model-7B-F16-00001-of-00003.gguf");  // in order
    EXPECT_EQ(f16.parts[1].path, "F16/Model-7B-F16-00002-of-00003.gguf");
    EXPECT_EQ(f16.parts[2].path, "F16/Model-7B-F16-00003-of-00003.gguf");
}

TEST(HfTree, AMissingPartMakesAnIncompleteModel) {
    const std::vector<HfFile> files = {{"m-Q8_0-00001-of-00002.gguf", 10, ""}};
    const auto groups = group_gguf_models(files);
    ASSERT_EQ(groups.size(), 1u);
    EXPECT_FALSE(groups[0].models[0].complete());
    EXPECT_EQ(groups[0].models[0].expected_parts, 2);
}

}  // namespace
}  // namespace powerhouse::library
