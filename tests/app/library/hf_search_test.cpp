// The Hub's model search and a repository's GGUF files: URLs and their encoding, every
// recorded answer of tests/data/hub parsed (the malformed ones with their messages), and
// searches and listings through the loopback Hub (hub_test_server.py), pages followed and
// the test model downloaded through a listing with its sha256. The Hugging Face token: sent
// to the Hub's host and not after its redirect to another host (the "CDN"), and the words for
// a gated or private repository without a token, with one refused, and with one lacking
// access. A model's shape from its GGUF header read over Range requests, equal to the shape
// of the same file on disk, and the cap on what is read holding against a server that
// ignores Range. No network.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "hub_test_server.h"
#include "library/download.h"
#include "library/hf_search.h"
#include "library/hf_url.h"
#include "library/remote_shape.h"
#include "powerhouse/plan.h"
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

// --- The token, gated and private repositories ----------------------------------------

constexpr const char* kGatedRepo = "gated-org/Gated-Model-GGUF";
constexpr const char* kPrivateRepo = "private-org/Private-Model-GGUF";
constexpr const char* kToken = "hf_test_accepted";

DownloadOptions fast_options() {
    DownloadOptions o;
    o.initial_backoff = std::chrono::milliseconds(10);
    o.max_backoff = std::chrono::milliseconds(50);
    o.max_attempts = 2;
    o.connect_timeout_seconds = 5;
    return o;
}

// The hub with the test model in the smol, gated and private repositories, files redirected
// to the "CDN" on another host name (localhost).
class HubToken : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        const std::string model = test::test_model_path().string();
        hub_ = new test::HubTestServer(true, {"--cdn", "--private", kPrivateRepo, "--serve",
                                              std::string(kGatedRepo) + "/model.Q4_1.gguf=" + model, "--serve",
                                              std::string(kPrivateRepo) + "/model.Q4_1.gguf=" + model});
    }
    static void TearDownTestSuite() { delete hub_; }
    void SetUp() override {
        if (!fs::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
        ASSERT_TRUE(hub_->running());
        hub_->requests(/*clear=*/true);
    }
    // [{request, authorization}] since the last clear.
    static std::vector<std::pair<std::string, std::string>> asked() {
        std::vector<std::pair<std::string, std::string>> out;
        for (const auto& r : hub_->get_json("/_requests?auth=1")) {
            out.emplace_back(r["request"].get<std::string>(),
                             r["authorization"].is_null() ? "" : r["authorization"].get<std::string>());
        }
        return out;
    }
    static std::string file_url(const char* repo) {
        return hf_file_url(*parse_hf_repo_id(repo), "model.Q4_1.gguf", hub_->endpoint());
    }
    static test::HubTestServer* hub_;
};

test::HubTestServer* HubToken::hub_ = nullptr;

TEST_F(HubToken, SentToTheHubAndNotAfterItsRedirectToAnotherHost) {
    DownloadOptions options = fast_options();
    options.bearer_token = kToken;
    auto found = search_hf_models("gguf", 2, hub_->endpoint(), options);
    ASSERT_TRUE(found) << found.error().message;
    test::TempDir dir;
    auto done = download_file(file_url(kGatedRepo), dir / "gated.gguf", options);
    ASSERT_TRUE(done) << done.error().message;
    EXPECT_TRUE(done->verified);
    EXPECT_TRUE(contains(done->effective_url, "http://localhost:")) << done->effective_url;
    const auto requests = asked();
    ASSERT_GE(requests.size(), 3u);
    EXPECT_TRUE(requests[0].first.starts_with("GET /api/models?search=gguf")) << requests[0].first;
    EXPECT_EQ(requests[0].second, std::string("Bearer ") + kToken) << "the search carries the token";
    bool hub = false, cdn = false;
    for (const auto& [request, authorization] : requests) {
        if (contains(request, "/resolve/main/model.Q4_1.gguf")) {
            hub = true;
            EXPECT_EQ(authorization, std::string("Bearer ") + kToken) << request;
        }
        if (request.starts_with("GET /_cdn/")) {
            cdn = true;
            EXPECT_EQ(authorization, "") << "no token after the redirect to another host: " << request;
        }
    }
    EXPECT_TRUE(hub);
    EXPECT_TRUE(cdn);
}

TEST_F(HubToken, GatedAndPrivateRepositoriesSayWhatToDo) {
    const std::string page = hub_->endpoint() + "/" + kGatedRepo;
    EXPECT_EQ(hf_access_message(kGatedRepo, std::nullopt, false, HubClient::app, hub_->endpoint()),
              std::string(kGatedRepo) + " is gated: accept its terms at " + page +
                  ", then add your Hugging Face token in Settings");
    EXPECT_EQ(hf_access_message(kGatedRepo, std::nullopt, false, HubClient::cli, hub_->endpoint()),
              std::string(kGatedRepo) + " is gated: accept its terms at " + page +
                  ", then set HF_TOKEN (or --hf-token-file FILE) to your Hugging Face token");

    test::TempDir dir;
    // No token: 401, what to do.
    auto refused = download_file(file_url(kGatedRepo), dir / "a.gguf", fast_options());
    ASSERT_FALSE(refused);
    EXPECT_EQ(http_status_of(refused.error()), 401);
    EXPECT_EQ(explain_hf_refusal(refused.error(), kGatedRepo, false, HubClient::app, hub_->endpoint()).message,
              std::string(kGatedRepo) + " needs a Hugging Face token (HTTP 401: it is gated or private): accept its "
                                        "terms at " + page + ", then add your Hugging Face token in Settings");
    // Another token: 403, the token lacks access.
    DownloadOptions other = fast_options();
    other.bearer_token = "hf_not_accepted";
    auto denied = download_file(file_url(kGatedRepo), dir / "b.gguf", other);
    ASSERT_FALSE(denied);
    EXPECT_EQ(http_status_of(denied.error()), 403);
    const std::string lacks = explain_hf_refusal(denied.error(), kGatedRepo, true, HubClient::app, hub_->endpoint()).message;
    EXPECT_TRUE(lacks.starts_with(std::string("Your Hugging Face token has no access to ") + kGatedRepo + " (HTTP 403)"))
        << lacks;

    // A private repository's listing: 401 without the token and with a wrong one (refused).
    auto hidden = list_hf_gguf_files(*parse_hf_repo_id(kPrivateRepo), hub_->endpoint(), other);
    ASSERT_FALSE(hidden);
    const std::string wrong = explain_hf_refusal(hidden.error(), kPrivateRepo, true, HubClient::cli, hub_->endpoint()).message;
    EXPECT_TRUE(wrong.starts_with("The Hugging Face token was refused (HTTP 401) for " + std::string(kPrivateRepo)))
        << wrong;
    EXPECT_TRUE(contains(wrong, "set HF_TOKEN")) << wrong;
    DownloadOptions right = fast_options();
    right.bearer_token = kToken;
    auto listed = list_hf_gguf_files(*parse_hf_repo_id(kPrivateRepo), hub_->endpoint(), right);
    ASSERT_TRUE(listed) << listed.error().message;
    EXPECT_EQ(listed->size(), 1u);
    // Anything else is left as it was.
    const Error other_error{ErrorCode::io, "connection refused (http://x)"};
    EXPECT_EQ(explain_hf_refusal(other_error, kGatedRepo, false, HubClient::app).message, other_error.message);
    EXPECT_EQ(http_status_of(other_error), std::nullopt);
}

// --- A model's shape from its header over HTTP --------------------------------------------

void expect_same_shape(const ModelShape& remote, const ModelShape& local) {
    EXPECT_EQ(remote.architecture, local.architecture);
    EXPECT_EQ(remote.n_layer, local.n_layer);
    EXPECT_EQ(remote.n_head, local.n_head);
    EXPECT_EQ(remote.n_head_kv, local.n_head_kv);
    EXPECT_EQ(remote.head_dim, local.head_dim);
    EXPECT_EQ(remote.n_embd, local.n_embd);
    EXPECT_EQ(remote.n_ff, local.n_ff);
    EXPECT_EQ(remote.n_vocab, local.n_vocab);
    EXPECT_EQ(remote.n_ctx_train, local.n_ctx_train);
    EXPECT_EQ(remote.embedding_bytes, local.embedding_bytes);
    EXPECT_EQ(remote.output_bytes, local.output_bytes);
    EXPECT_EQ(remote.tied_output, local.tied_output);
    EXPECT_EQ(remote.weight_bytes(), local.weight_bytes());
    ASSERT_EQ(remote.layers.size(), local.layers.size());
    for (size_t i = 0; i < local.layers.size(); ++i) EXPECT_EQ(remote.layers[i].total(), local.layers[i].total()) << i;
}

TEST_F(HubSearch, ShapeFromTheHeaderEqualsTheFileOnDisk) {
    if (!fs::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    const std::string url = hf_file_url(*parse_hf_repo_id(test::kHubSmolRepo), test::kHubSmolFile, hub_->endpoint());
    auto local = read_model_shape(test::test_model_path());
    ASSERT_TRUE(local) << local.error().message;
    // A small first read, so that it grows while the header goes on.
    RemoteHeaderLimits limits;
    limits.first_bytes = 64 << 10;
    auto remote = read_remote_model_shape({{url, test::kHubSmolFile, fs::file_size(test::test_model_path())}},
                                          fast(), limits);
    ASSERT_TRUE(remote) << remote.error().message;
    expect_same_shape(remote->shape, *local);
    EXPECT_LT(remote->bytes_read, uint64_t{8} << 20) << "the header, not the file";
    // Ranges asked, none for the whole file.
    for (const std::string& r : hub_->requests()) EXPECT_TRUE(contains(r, "/resolve/main/")) << r;

    // The size unknown to the caller: the server's Content-Range gives it.
    auto unsized = read_remote_model_shape({{url, test::kHubSmolFile, 0}}, fast());
    ASSERT_TRUE(unsized) << unsized.error().message;
    expect_same_shape(unsized->shape, *local);

    // Cut off below its header: refused with the reason, never read on.
    limits.max_bytes = 128 << 10;
    auto capped = read_remote_model_shape({{url, test::kHubSmolFile, 0}}, fast(), limits);
    ASSERT_FALSE(capped);
    EXPECT_EQ(capped.error().code, ErrorCode::unsupported);
    EXPECT_TRUE(contains(capped.error().message, "longer than 128 KiB")) << capped.error().message;
}

TEST(HubHeader, TheCapHoldsAgainstAServerThatIgnoresRange) {
    if (!fs::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    test::HubTestServer hub(true, {"--ignore-range"});
    ASSERT_TRUE(hub.running());
    const std::string url = hf_file_url(*parse_hf_repo_id(test::kHubSmolRepo), test::kHubSmolFile, hub.endpoint());
    // 100 kB asked of a 94 MiB file that comes whole: 100 kB kept, the rest never read.
    auto got = fetch_range(url, 0, 100000, fast_options());
    ASSERT_TRUE(got) << got.error().message;
    EXPECT_TRUE(got->range_ignored);
    EXPECT_EQ(got->bytes.size(), 100000u);
    EXPECT_EQ(got->file_size, fs::file_size(test::test_model_path()));
    // From an offset: the bytes there, from the whole answer.
    auto later = fetch_range(url, 4096, 1000, fast_options());
    ASSERT_TRUE(later) << later.error().message;
    EXPECT_EQ(later->bytes, got->bytes.substr(4096, 1000));

    RemoteHeaderLimits limits;
    limits.first_bytes = 64 << 10;
    limits.max_bytes = 256 << 10;
    auto capped = read_remote_model_shape({{url, test::kHubSmolFile, 0}}, fast_options(), limits);
    ASSERT_FALSE(capped);
    EXPECT_EQ(capped.error().code, ErrorCode::unsupported) << capped.error().message;
    EXPECT_TRUE(contains(capped.error().message, "longer than 256 KiB")) << capped.error().message;
    // The default cap reads the whole header of it even so.
    auto whole = read_remote_model_shape({{url, test::kHubSmolFile, 0}}, fast_options());
    ASSERT_TRUE(whole) << whole.error().message;
    auto local = read_model_shape(test::test_model_path());
    ASSERT_TRUE(local);
    expect_same_shape(whole->shape, *local);
    EXPECT_LE(whole->bytes_read, uint64_t{64} << 20);
}

}  // namespace
}  // namespace powerhouse::library
