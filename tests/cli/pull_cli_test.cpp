// powerhouse-cli pull against the download tests' local server (127.0.0.1 only): files by
// URL, Hugging Face file and model pages (HF_ENDPOINT pointing at the server), multi-part
// models, errors, and a second pull of a file already there.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "cli_runner.h"
#include "http_test_server.h"
#include "library/sha256.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

namespace fs = std::filesystem;
using test::quoted;
using test::run_cli;

class CliPull : public ::testing::Test {
protected:
    static void SetUpTestSuite() { server_ = new test::HttpTestServer(); }
    static void TearDownTestSuite() { delete server_; }
    void SetUp() override {
        ASSERT_TRUE(server_->running());
        unsetenv("HF_ENDPOINT");
        unsetenv("HF_TOKEN");
    }
    static const std::string& payload() {
        static const std::string bytes = test::test_payload(1);
        return bytes;
    }

    test::TempDir dir_;
    static test::HttpTestServer* server_;
};

test::HttpTestServer* CliPull::server_ = nullptr;

TEST_F(CliPull, DownloadsAndVerifiesAFile) {
    const std::string url = server_->url("/org/repo/resolve/main/tiny-model-Q4_K_M.gguf");
    const test::CliRun run = run_cli("pull " + url + " -o " + quoted(dir_.path()));
    ASSERT_EQ(run.status, 0) << run.err;
    const fs::path file = dir_ / "tiny-model-Q4_K_M.gguf";
    EXPECT_EQ(test::read_file(file), payload());
    EXPECT_NE(run.out.find("verified (X-Linked-Etag)"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find(library::sha256_hex(payload())), std::string::npos) << run.out;
    EXPECT_NE(run.err.find("Downloading " + url), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(dir_ / "tiny-model-Q4_K_M.gguf.part"));

    // Again: nothing to download, the file is checked.
    const test::CliRun again = run_cli("pull " + url + " -o " + quoted(dir_.path()));
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_NE(again.out.find("already exists and its sha256 matches"), std::string::npos) << again.out;
}

TEST_F(CliPull, NameFromContentDispositionAndGivenHash) {
    const std::string sha = library::sha256_hex(payload());
    const test::CliRun run =
        run_cli("pull '" + server_->url("/named?id=cli") + "' --sha256 " + sha + " -o " + quoted(dir_.path()));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(test::read_file(dir_ / "named-model.gguf"), payload());
    EXPECT_NE(run.out.find("verified (given)"), std::string::npos) << run.out;
}

TEST_F(CliPull, NotFoundExitsNonZeroWithTheStatus) {
    const std::string url = server_->url("/404");
    const test::CliRun run = run_cli("pull " + url + " -o " + quoted(dir_.path()));
    EXPECT_EQ(run.status, 1);
    EXPECT_NE(run.err.find("error: HTTP 404 (Not Found) from " + url), std::string::npos) << run.err;
    EXPECT_TRUE(fs::is_empty(dir_.path()));
}

TEST_F(CliPull, AWrongHashLeavesNothing) {
    const test::CliRun run =
        run_cli("pull " + server_->url("/ok") + " --sha256 " + std::string(64, '0') + " -o " + quoted(dir_.path()));
    EXPECT_EQ(run.status, 1);
    EXPECT_NE(run.err.find("sha256 mismatch"), std::string::npos) << run.err;
    EXPECT_TRUE(fs::is_empty(dir_.path()));

    const test::CliRun bad = run_cli("pull " + server_->url("/ok") + " --sha256 xyz -o " + quoted(dir_.path()));
    EXPECT_EQ(bad.status, 2);
    EXPECT_NE(bad.err.find("not a sha256"), std::string::npos) << bad.err;
}

// A folder under the file's name is not the model: without a hash to check, it passed for
// the file already downloaded ("not downloaded again", status 0), leaving no model; with
// one, hashing it failed with "cannot read ...: Is a directory".
TEST_F(CliPull, AFolderUnderTheFileNameIsAnError) {
    for (const std::string path : {"/ok", "/org/repo/resolve/main/tiny-model-Q4_K_M.gguf"}) {
        const std::string name = fs::path(path).filename().string();
        fs::create_directory(dir_ / name);
        const test::CliRun run = run_cli("pull " + server_->url(path) + " -o " + quoted(dir_.path()));
        EXPECT_EQ(run.status, 1) << path << ": " << run.out;
        EXPECT_NE(run.err.find(name + " already exists and is a folder"), std::string::npos) << run.err;
        EXPECT_NE(run.err.find("move it away or download into another folder"), std::string::npos) << run.err;
        EXPECT_TRUE(fs::is_directory(dir_ / name));
    }
}

// A failed attempt is said when it happens: the backoff doubles from 1 s, and a server
// that kept failing meant about two minutes of silence before the error.
TEST_F(CliPull, RetriesAreSaidWhenTheyHappen) {
    // The first request (the probe before the download) gets 503.
    const std::string flaky = server_->url("/flaky?fail=1&id=cli-retry");
    const test::CliRun probe = run_cli("pull '" + flaky + "' -o " + quoted(dir_.path()));
    ASSERT_EQ(probe.status, 0) << probe.err;
    EXPECT_NE(probe.err.find("HTTP 503 (Service Unavailable) from " + flaky + ": trying again in 1 s"),
              std::string::npos)
        << probe.err;
    EXPECT_EQ(test::read_file(dir_ / "flaky"), payload());

    // The download's request (the second) drops the connection after 1000 bytes.
    const std::string dropped = server_->url("/ok?drop=999999999,1000&id=cli-drop");
    const test::CliRun download = run_cli("pull '" + dropped + "' -o " + quoted(dir_.path()));
    ASSERT_EQ(download.status, 0) << download.err;
    EXPECT_NE(download.err.find(dropped + "): trying again in 1 s"), std::string::npos) << download.err;
    EXPECT_EQ(test::read_file(dir_ / "ok"), payload());
}

// The server's ETag is kept in the .part.json beside the download, for If-Range: one that
// is not UTF-8 made nlohmann's dump throw there, and pull aborted (status 134) with a
// .part.json.tmp left behind.
TEST_F(CliPull, AnEtagThatIsNotUtf8IsNoCrash) {
    const std::string url = server_->url("/latin1-etag?drop=999999999,1000&id=cli-latin1");
    const test::CliRun run = run_cli("pull '" + url + "' -o " + quoted(dir_.path()));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(test::read_file(dir_ / "latin1-etag"), payload());
    EXPECT_EQ(std::distance(fs::directory_iterator(dir_.path()), fs::directory_iterator()), 1) << run.err;
}

// A code host's page about a file (GitHub's .../blob/... URL) answers 200 with HTML: pull
// saved the page under the model's name and exited 0 ("NOT verified").
TEST_F(CliPull, AWebPageIsNotKeptAsTheModel) {
    const std::string url = server_->url("/blob/model-Q4_K_M.gguf");
    const test::CliRun run = run_cli("pull " + url + " -o " + quoted(dir_.path()));
    EXPECT_EQ(run.status, 1) << run.out;
    EXPECT_NE(run.err.find(url + " answered with a web page, not the file"), std::string::npos) << run.err;
    EXPECT_TRUE(fs::is_empty(dir_.path()));
}

TEST_F(CliPull, HuggingFaceFilePagesAreDownloadedFromTheirResolveUrl) {
    setenv("HF_ENDPOINT", server_->url("").c_str(), 1);
    const test::CliRun run =
        run_cli("pull " + server_->url("/org/repo/blob/main/tiny-model-Q4_K_M.gguf") + " -o " + quoted(dir_.path()));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(test::read_file(dir_ / "tiny-model-Q4_K_M.gguf"), payload());
    EXPECT_NE(run.err.find("/org/repo/resolve/main/tiny-model-Q4_K_M.gguf"), std::string::npos) << run.err;
}

TEST_F(CliPull, AModelPageListsTheGgufFilesByQuantization) {
    setenv("HF_ENDPOINT", server_->url("").c_str(), 1);
    const test::CliRun run = run_cli("pull " + server_->url("/org/repo") + " -o " + quoted(dir_.path()));
    EXPECT_EQ(run.status, 2) << run.err;
    EXPECT_NE(run.out.find("org/repo (revision main): 3 GGUF models"), std::string::npos) << run.out;
    const size_t q4 = run.out.find("\nQ4_K_M\n");
    const size_t q8 = run.out.find("\nQ8_0\n");
    const size_t f16 = run.out.find("\nF16\n");
    ASSERT_NE(q4, std::string::npos) << run.out;
    ASSERT_NE(q8, std::string::npos) << run.out;
    ASSERT_NE(f16, std::string::npos) << run.out;
    EXPECT_LT(q4, q8);  // smaller first
    EXPECT_LT(q8, f16);
    EXPECT_NE(run.out.find("16.00 MiB  F16/tiny-model-F16 (2 parts)"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find(server_->url("/org/repo/resolve/main/tiny-model-Q4_K_M.gguf")), std::string::npos)
        << run.out;
    EXPECT_NE(run.out.find(server_->url("/org/repo/resolve/main/F16/tiny-model-F16-00001-of-00002.gguf")),
              std::string::npos)
        << run.out;
    EXPECT_NE(run.err.find("pick one file"), std::string::npos) << run.err;
    EXPECT_TRUE(fs::is_empty(dir_.path()));
}

TEST_F(CliPull, APartOfASplitModelBringsAllParts) {
    const test::CliRun run =
        run_cli("pull " + server_->url("/org/repo/resolve/main/F16/tiny-model-F16-00002-of-00002.gguf") + " -o " +
                quoted(dir_.path()));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(test::read_file(dir_ / "tiny-model-F16-00001-of-00002.gguf"), payload());
    EXPECT_EQ(test::read_file(dir_ / "tiny-model-F16-00002-of-00002.gguf"), payload());
    EXPECT_NE(run.err.find("Part 2 of 2"), std::string::npos) << run.err;
}

TEST_F(CliPull, TheDefaultFolderIsTheModelsFolder) {
    setenv("XDG_DATA_HOME", dir_.path().c_str(), 1);
    const test::CliRun run = run_cli("pull " + server_->url("/org/repo/resolve/main/default.gguf"));
    unsetenv("XDG_DATA_HOME");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(test::read_file(dir_ / "powerhouse" / "models" / "default.gguf"), payload());
}

}  // namespace
}  // namespace powerhouse
