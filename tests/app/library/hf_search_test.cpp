// The Hub's model search and a repository's GGUF files: URLs and their encoding, every
// recorded answer of tests/data/hub parsed (the malformed ones with their messages), and
// searches and listings through the loopback Hub (hub_test_server.py), pages followed and
// the test model downloaded through a listing with its sha256. No network.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "hub_test_server.h"
#include "library/download.h"
#include "library/hf_search.h"
#include "library/hf_url.h"
#include "support/test_support.h"

namespace powerhouse::library {
namespace {

namespace fs = std::filesystem;

std::string recorded(const std::string& name) { return test::read_file(test::data_dir() / "hub" / name); }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(HfSearchUrl, AsksForGgufRepositoriesMostDownloadedFirstWithTheFieldsItReads) {
    EXPECT_EQ(hf_search_url("qwen", 20),
              "https://huggingface.co/api/models?search=qwen&filter=gguf&sort=downloads&direction=-1&limit=20"
              "&expand=downloads&expand=likes&expand=lastModified&expand=createdAt&expand=gated&expand=tags"
              "&expand=pipeline_tag&expand=private");
    // The endpoint's trailing slash goes; the limit stays within what the Hub pages.
    EXPECT_TRUE(hf_search_url("a", 0, "http://127.0.0.1:8080/").starts_with("http://127.0.0.1:8080/api/models?"));
    EXPECT_TRUE(contains(hf_search_url("a", 0), "&limit=1&"));
    EXPECT_TRUE(contains(hf_search_url("a", 5000), "&limit=1000&"));
}

TEST(HfSearchUrl, TheQueryIsPercentEncoded) {
    EXPECT_EQ(percent_encode_query_value("Qwen2.5-7B_x~"), "Qwen2.5-7B_x~");
    EXPECT_EQ(percent_encode_query_value("a b+c&d=e/f?g#h%"), "a%20b%2Bc%26d%3De%2Ff%3Fg%23h%25");
    EXPECT_EQ(percent_encode_query_value("é"), "%C3%A9");
    EXPECT_EQ(percent_encode_query_value(""), "");
    // A query cannot add parameters of its own.
    EXPECT_TRUE(contains(hf_search_url("x&filter=pytorch", 5), "search=x%26filter%3Dpytorch&filter=gguf&"));
}

TEST(HfRepoId, OwnerAndNameOnly) {
    auto repo = parse_hf_repo_id("bartowski/Qwen2.5-7B-Instruct-GGUF");
    ASSERT_TRUE(repo);
    EXPECT_EQ(repo->org, "bartowski");
    EXPECT_EQ(repo->repo, "Qwen2.5-7B-Instruct-GGUF");
    EXPECT_EQ(repo->revision, "main");
    for (const char* bad : {"", "gpt2", "a/b/c", "/b", "a/", "a/..", "../b", "a/.hidden", "a b/c", "a/b?x=1", "a/b#c",
                            "a/-b", "https://huggingface.co/a/b"}) {
        EXPECT_FALSE(parse_hf_repo_id(bad)) << bad;
    }
}

TEST(HfSearchParse, TheRecordedAnswers) {
    auto smol = parse_hf_search(recorded("search-smollm2.json"));
    ASSERT_TRUE(smol) << smol.error().message;
    ASSERT_EQ(smol->size(), 3u);
    const HfModelSummary& first = (*smol)[0];
    EXPECT_EQ(first.id, "smol-org/SmolLM2-135M-Instruct-GGUF");
    EXPECT_EQ(first.downloads, 48213u);
    EXPECT_EQ(first.likes, 37u);
    EXPECT_EQ(first.last_modified, "2025-01-14T09:31:02.000Z");
    EXPECT_EQ(first.created_at, "2024-11-02T16:20:11.000Z");
    EXPECT_EQ(first.updated_date(), "2025-01-14");
    EXPECT_EQ(first.gated, "");
    EXPECT_FALSE(first.is_private);
    EXPECT_EQ(first.pipeline_tag, "text-generation");
    EXPECT_NE(std::find(first.tags.begin(), first.tags.end(), "gguf"), first.tags.end());
    // Optional fields missing: no lastModified (the date falls back to createdAt), no pipeline tag.
    const HfModelSummary& third = (*smol)[2];
    EXPECT_EQ(third.last_modified, "");
    EXPECT_EQ(third.updated_date(), "2024-11-20");
    EXPECT_EQ(third.pipeline_tag, "");
    EXPECT_EQ(third.likes, 0u);

    size_t total = 0;
    for (const char* page : {"search-gguf.json", "search-gguf.2.json", "search-gguf.3.json"}) {
        auto models = parse_hf_search(recorded(page));
        ASSERT_TRUE(models) << page << ": " << models.error().message;
        total += models->size();
    }
    EXPECT_EQ(total, 5u);
    auto gated = parse_hf_search(recorded("search-gguf.json"));
    ASSERT_TRUE(gated);
    EXPECT_EQ((*gated)[1].id, "gated-org/Gated-Model-GGUF");
    EXPECT_EQ((*gated)[1].gated, "manual");

    // The smallest answers: nothing found, and an entry with nothing but its id.
    auto empty = parse_hf_search("[]");
    ASSERT_TRUE(empty);
    EXPECT_TRUE(empty->empty());
    auto bare = parse_hf_search(R"([{"id": "a/b", "downloads": 12.0, "gated": true, "tags": null}])");
    ASSERT_TRUE(bare) << bare.error().message;
    EXPECT_EQ((*bare)[0].downloads, 12u);
    EXPECT_EQ((*bare)[0].gated, "yes");
    EXPECT_EQ((*bare)[0].updated_date(), "");
}

TEST(HfSearchParse, MalformedAnswersSayWhatIsWrong) {
    const std::pair<const char*, const char*> cases[] = {
        {"search-malformed-not-a-list.json", "the Hugging Face search's answer is not a list of models"},
        {"search-malformed-error.json", "the Hugging Face search answered: Invalid sort parameter"},
        {"search-malformed-no-id.json", "search result 1 has no id"},
        {"search-malformed-downloads.json",
         "model 'quant-lab/SmolLM2-1.7B-Instruct-GGUF': downloads is not a count (it is \"9120\")"},
        {"search-malformed-tags.json", "model 'quant-lab/SmolLM2-1.7B-Instruct-GGUF': tags is not a list"},
        {"search-malformed-gated.json",
         "model 'quant-lab/SmolLM2-1.7B-Instruct-GGUF': gated is neither false nor a kind of gate (it is 3)"},
        {"search-malformed-html.json", "the Hugging Face search's answer is not JSON"},
    };
    for (const auto& [file, message] : cases) {
        auto parsed = parse_hf_search(recorded(file));
        ASSERT_FALSE(parsed) << file;
        EXPECT_EQ(parsed.error().code, ErrorCode::format) << file;
        EXPECT_EQ(parsed.error().message, message) << file;
    }
    for (const auto& [text, message] : std::initializer_list<std::pair<const char*, const char*>>{
             {R"([3])", "search result 0 is not an object"},
             {R"([{"id": 7}])", "search result 0 has no id"},
             {R"([{"id": ""}])", "search result 0 has no id"},
             {R"([{"id": "a/b", "likes": -1}])", "model 'a/b': likes is not a count (it is -1)"},
             {R"([{"id": "a/b", "lastModified": 2025}])", "model 'a/b': lastModified is not a string (it is 2025)"},
             {R"([{"id": "a/b", "tags": ["x", 1]}])", "model 'a/b': a tag is not a string (it is 1)"},
         }) {
        auto parsed = parse_hf_search(text);
        ASSERT_FALSE(parsed) << text;
        EXPECT_EQ(parsed.error().message, message) << text;
    }
}

TEST(HfTreeParse, TheRecordedTrees) {
    auto smol = parse_hf_tree_gguf_files(recorded("tree-smol-org--SmolLM2-135M-Instruct-GGUF.json"));
    ASSERT_TRUE(smol) << smol.error().message;
    EXPECT_EQ(smol->size(), 3u);
    auto pending = parse_hf_tree_gguf_files(recorded("tree-plain-org--Model-GGUF-Pending.json"));
    ASSERT_TRUE(pending);
    EXPECT_TRUE(pending->empty()) << "safetensors and JSON files are not models";
    auto gated = parse_hf_tree_gguf_files(recorded("tree-gated-org--Gated-Model-GGUF.json"));
    ASSERT_TRUE(gated);
    EXPECT_EQ(gated->size(), 2u);
    // The split repository's two pages, joined, are one listing: the Q4_K_M parts are on both.
    std::vector<HfFile> big;
    for (const char* page : {"tree-split-org--Big-Model-GGUF.json", "tree-split-org--Big-Model-GGUF.2.json"}) {
        auto files = parse_hf_tree_gguf_files(recorded(page));
        ASSERT_TRUE(files) << page;
        big.insert(big.end(), files->begin(), files->end());
    }
    const auto groups = group_gguf_models(big);
    ASSERT_EQ(groups.size(), 3u);
    EXPECT_EQ(groups[0].quantization, "IQ4_XS");
    EXPECT_EQ(groups[1].quantization, "Q4_K_M");
    ASSERT_EQ(groups[1].models.size(), 1u);
    EXPECT_TRUE(groups[1].models[0].complete());
    EXPECT_EQ(groups[1].models[0].total_size, uint64_t{3990000000} + uint64_t{690000000});
    EXPECT_EQ(groups[2].quantization, "Q8_0");
    EXPECT_EQ(groups[2].models[0].parts.size(), 3u);
}

class HubSearch : public ::testing::Test {
protected:
    static void SetUpTestSuite() { hub_ = new test::HubTestServer(); }
    static void TearDownTestSuite() { delete hub_; }
    void SetUp() override {
        ASSERT_TRUE(hub_->running());
        hub_->requests(/*clear=*/true);
    }
    static DownloadOptions fast() {
        DownloadOptions o;
        o.initial_backoff = std::chrono::milliseconds(10);
        o.max_backoff = std::chrono::milliseconds(50);
        o.max_attempts = 2;
        o.connect_timeout_seconds = 5;
        return o;
    }
    static test::HubTestServer* hub_;
};

test::HubTestServer* HubSearch::hub_ = nullptr;

TEST_F(HubSearch, OnePageAnswer) {
    auto found = search_hf_models("SmolLM2", 20, hub_->endpoint(), fast());
    ASSERT_TRUE(found) << found.error().message;
    ASSERT_EQ(found->models.size(), 3u);
    EXPECT_EQ(found->models[0].id, test::kHubSmolRepo);
    EXPECT_FALSE(found->more);
    EXPECT_EQ(found->pages, 1);
    const auto asked = hub_->requests();
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_TRUE(asked[0].starts_with("GET /api/models?search=SmolLM2&filter=gguf&sort=downloads&direction=-1&limit=20"))
        << asked[0];
}

TEST_F(HubSearch, PagesAreFollowedUpToTheLimit) {
    auto all = search_hf_models("gguf", 20, hub_->endpoint(), fast());
    ASSERT_TRUE(all) << all.error().message;
    ASSERT_EQ(all->models.size(), 5u);
    EXPECT_EQ(all->pages, 3);
    EXPECT_FALSE(all->more);
    EXPECT_EQ(all->models[0].id, "split-org/Big-Model-GGUF");
    EXPECT_EQ(all->models[4].id, "plain-org/Model-GGUF-Pending");
    const auto asked = hub_->requests(/*clear=*/true);
    ASSERT_EQ(asked.size(), 3u);
    EXPECT_TRUE(contains(asked[1], "&cursor=2")) << asked[1];
    EXPECT_TRUE(contains(asked[2], "&cursor=3")) << asked[2];
    EXPECT_TRUE(contains(asked[2], "&expand=gated")) << "the next page keeps every parameter: " << asked[2];

    // Three of five: two pages read, the third not asked for.
    auto three = search_hf_models("gguf", 3, hub_->endpoint(), fast());
    ASSERT_TRUE(three) << three.error().message;
    EXPECT_EQ(three->models.size(), 3u);
    EXPECT_TRUE(three->more);
    EXPECT_EQ(three->pages, 2);
    EXPECT_EQ(hub_->requests().size(), 2u);
}

TEST_F(HubSearch, NothingFoundAndBrokenAnswers) {
    auto none = search_hf_models("no such model", 20, hub_->endpoint(), fast());
    ASSERT_TRUE(none) << none.error().message;
    EXPECT_TRUE(none->models.empty());
    EXPECT_TRUE(contains(hub_->requests()[0], "search=no%20such%20model&"));

    auto broken = search_hf_models("malformed-no-id", 20, hub_->endpoint(), fast());
    ASSERT_FALSE(broken);
    EXPECT_EQ(broken.error().code, ErrorCode::format);
    EXPECT_EQ(broken.error().message, "search result 1 has no id");

    // Nobody listening.
    auto refused = search_hf_models("x", 5, "http://127.0.0.1:1", fast());
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::io);
}

TEST_F(HubSearch, FilesAcrossPagesWithSplitModelsJoined) {
    auto files = list_hf_gguf_files(*parse_hf_repo_id("split-org/Big-Model-GGUF"), hub_->endpoint(), fast());
    ASSERT_TRUE(files) << files.error().message;
    EXPECT_EQ(files->size(), 6u);
    const auto asked = hub_->requests();
    ASSERT_EQ(asked.size(), 2u);
    EXPECT_EQ(asked[0], "GET /api/models/split-org/Big-Model-GGUF/tree/main?recursive=true");
    EXPECT_EQ(asked[1], "GET /api/models/split-org/Big-Model-GGUF/tree/main?recursive=true&cursor=2");
    const auto groups = group_gguf_models(*files);
    ASSERT_EQ(groups.size(), 3u);
    EXPECT_TRUE(groups[1].models[0].complete());
    EXPECT_EQ(groups[1].models[0].parts[1].path, "Q4_K_M/Big-Model-Q4_K_M-00002-of-00002.gguf");

    auto pending = list_hf_gguf_files(*parse_hf_repo_id("plain-org/Model-GGUF-Pending"), hub_->endpoint(), fast());
    ASSERT_TRUE(pending);
    EXPECT_TRUE(pending->empty());

    auto missing = list_hf_gguf_files(*parse_hf_repo_id("nobody/nothing"), hub_->endpoint(), fast());
    ASSERT_FALSE(missing);
    EXPECT_TRUE(contains(missing.error().message, "HTTP 404")) << missing.error().message;
}

TEST_F(HubSearch, AListedFileDownloadsAndVerifies) {
    if (!fs::exists(test::test_model_path())) GTEST_SKIP() << "no test model (scripts/fetch-test-model)";
    const HfRepo repo = *parse_hf_repo_id(test::kHubSmolRepo);
    auto files = list_hf_gguf_files(repo, hub_->endpoint(), fast());
    ASSERT_TRUE(files) << files.error().message;
    const auto q4 = std::find_if(files->begin(), files->end(), [](const HfFile& f) { return f.path == test::kHubSmolFile; });
    ASSERT_NE(q4, files->end());
    EXPECT_EQ(q4->size, fs::file_size(test::test_model_path()));
    EXPECT_EQ(q4->sha256, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53");

    test::TempDir dir;
    DownloadOptions options = fast();
    options.expected_sha256 = q4->sha256;
    auto done = download_file(hf_file_url(repo, q4->path, hub_->endpoint()), dir / test::kHubSmolFile, options);
    ASSERT_TRUE(done) << done.error().message;
    EXPECT_TRUE(done->verified);
    EXPECT_EQ(done->hash_source, HashSource::caller);
    EXPECT_EQ(done->size, q4->size);

    // The gated repository lists its files, and refuses them without the token.
    auto gated = list_hf_gguf_files(*parse_hf_repo_id("gated-org/Gated-Model-GGUF"), hub_->endpoint(), fast());
    ASSERT_TRUE(gated) << gated.error().message;
    auto refused = download_file(hf_file_url(*parse_hf_repo_id("gated-org/Gated-Model-GGUF"), (*gated)[0].path,
                                             hub_->endpoint()),
                                 dir / "gated.gguf", fast());
    ASSERT_FALSE(refused);
    EXPECT_TRUE(contains(refused.error().message, "HTTP 401")) << refused.error().message;
}

}  // namespace
}  // namespace powerhouse::library
