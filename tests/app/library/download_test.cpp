// The download engine against a local server that misbehaves on request
// (http_test_server.py): drops, stalls, ignored ranges, 416, a changing file, corrupted
// bytes, HTTP errors, redirects; plus cancel and resume, two downloads of one target, and
// a full disk. In every case the outcome is a verified file or a clear error, and never a
// wrong file under the final name.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "http_test_server.h"
#include "library/download.h"
#include "library/sha256.h"
#include "support/test_support.h"

namespace powerhouse::library {
namespace {

namespace fs = std::filesystem;
using test::kPayloadSize;

class Download : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        server_ = new test::HttpTestServer();
        payload_ = new std::string(test::test_payload(1));
        payload_sha256_ = new std::string(sha256_hex(*payload_));
    }
    static void TearDownTestSuite() {
        delete server_;
        delete payload_;
        delete payload_sha256_;
    }
    void SetUp() override {
        ASSERT_TRUE(server_->running()) << "python3 tests/app/library/http_test_server.py did not start";
    }

    // Retries and stalls in milliseconds and one second, not the minutes meant for users.
    static DownloadOptions fast() {
        DownloadOptions o;
        o.initial_backoff = std::chrono::milliseconds(10);
        o.max_backoff = std::chrono::milliseconds(50);
        o.stall_seconds = 1;
        o.stall_bytes_per_second = 1000;
        o.connect_timeout_seconds = 5;
        o.max_attempts = 3;
        o.progress_interval = std::chrono::milliseconds(0);
        return o;
    }
    // A unique id per test, so that the server's counters are the test's own.
    static std::string id() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        return std::string(info->name());
    }
    static std::string url(const std::string& route, const std::string& query = "") {
        return server_->url(route + "?id=" + id() + (query.empty() ? "" : "&" + query));
    }
    static nlohmann::json stats() { return server_->stats(id()); }

    void expect_no_leftovers(const fs::path& target) {
        EXPECT_FALSE(fs::exists(part_path(target))) << part_path(target);
        EXPECT_FALSE(fs::exists(part_info_path(target))) << part_info_path(target);
    }

    test::TempDir dir_;
    static test::HttpTestServer* server_;
    static std::string* payload_;
    static std::string* payload_sha256_;
};

test::HttpTestServer* Download::server_ = nullptr;
std::string* Download::payload_ = nullptr;
std::string* Download::payload_sha256_ = nullptr;

TEST_F(Download, VerifiedByTheCallersHash) {
    const fs::path target = dir_ / "model.gguf";
    DownloadOptions o = fast();
    o.expected_sha256 = *payload_sha256_;
    const auto r = download_file(url("/ok"), target, o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(r->hash_source, HashSource::caller);
    EXPECT_EQ(r->sha256, *payload_sha256_);
    EXPECT_EQ(r->size, kPayloadSize);
    EXPECT_EQ(r->bytes_transferred, kPayloadSize);
    EXPECT_EQ(r->attempts, 1);
    EXPECT_EQ(r->resumed_from, 0u);
    EXPECT_EQ(test::read_file(target), *payload_);
    expect_no_leftovers(target);
}

TEST_F(Download, VerifiedByTheServersLinkedEtag) {
    const fs::path target = dir_ / "model.gguf";
    const auto r = download_file(url("/hf"), target, fast());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(r->hash_source, HashSource::server_linked_etag);
    EXPECT_EQ(test::read_file(target), *payload_);
    expect_no_leftovers(target);
}

TEST_F(Download, VerifiedByAnEtagThatIsASha256) {
    const fs::path target = dir_ / "model.gguf";
    const auto r = download_file(url("/etag-hash"), target, fast());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(r->hash_source, HashSource::server_etag);
    EXPECT_EQ(test::read_file(target), *payload_);
}

TEST_F(Download, WithoutAnyHashTheFileIsKeptAndMarkedUnverified) {
    const fs::path target = dir_ / "model.gguf";
    const auto r = download_file(url("/ok"), target, fast());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_FALSE(r->verified);
    EXPECT_EQ(r->hash_source, HashSource::none);
    EXPECT_EQ(r->sha256, *payload_sha256_);  // computed, for the caller to show or record
    EXPECT_EQ(test::read_file(target), *payload_);
}

TEST_F(Download, ResumesAfterDropsAtRandomOffsets) {
    std::mt19937 rng(20261203);
    std::uniform_int_distribution<size_t> offset(1, kPayloadSize - 1);
    std::vector<size_t> drops(4);
    for (size_t& d : drops) d = offset(rng);
    std::sort(drops.begin(), drops.end());
    std::string at;
    for (size_t d : drops) at += (at.empty() ? "" : ",") + std::to_string(d);

    const fs::path target = dir_ / "model.gguf";
    DownloadOptions o = fast();
    o.max_attempts = 2;  // every drop adds bytes, which resets the count
    const auto r = download_file(url("/drop", "hash=linked&at=" + at), target, o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(test::read_file(target), *payload_);
    EXPECT_EQ(r->attempts, 5);
    EXPECT_EQ(r->restarts, 0);
    EXPECT_EQ(r->bytes_transferred, kPayloadSize);

    // Each retry asked for exactly the bytes it did not have, with If-Range, and no byte
    // crossed the wire twice.
    const nlohmann::json s = stats();
    ASSERT_EQ(s["requests"], 5) << s.dump();
    EXPECT_EQ(s["range_requests"], 4);
    EXPECT_TRUE(s["ranges"][0].is_null());
    for (size_t k = 0; k < drops.size(); ++k) {
        EXPECT_EQ(s["ranges"][k + 1], drops[k]) << "retry " << k + 1;
        EXPECT_EQ(s["if_range"][k + 1], "\"v1\"");
    }
    EXPECT_EQ(s["bytes_sent"], kPayloadSize);
    expect_no_leftovers(target);
}

TEST_F(Download, AStalledConnectionIsDroppedAndResumed) {
    const fs::path target = dir_ / "model.gguf";
    const size_t stall_at = 1234567;
    const auto start = std::chrono::steady_clock::now();
    const auto r = download_file(url("/stall", "hash=linked&at=" + std::to_string(stall_at)), target, fast());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(test::read_file(target), *payload_);
    EXPECT_EQ(r->attempts, 2);
    const nlohmann::json s = stats();
    EXPECT_EQ(s["ranges"][1], stall_at) << s.dump();
    // The stall was detected by the 1 s speed limit, not by the server's 20 s sleep ending.
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(Download, ARangeAnsweredWith200StartsOver) {
    const fs::path target = dir_ / "model.gguf";
    const auto r = download_file(url("/ignore-range", "hash=linked&drop=1000000"), target, fast());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(test::read_file(target), *payload_);
    EXPECT_EQ(r->restarts, 1);
    const nlohmann::json s = stats();
    EXPECT_EQ(s["range_requests"], 1) << s.dump();
    EXPECT_EQ(s["statuses"], nlohmann::json::parse("[200, 200]"));
    expect_no_leftovers(target);
}

TEST_F(Download, A416WithTheWholeFileInThePartIsVerifiedAndKept) {
    const fs::path target = dir_ / "model.gguf";
    test::write_file(part_path(target), *payload_);  // say, the program died before renaming
    DownloadOptions o = fast();
    o.expected_sha256 = *payload_sha256_;
    const auto r = download_file(url("/ok"), target, o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(r->resumed_from, kPayloadSize);
    EXPECT_EQ(r->bytes_transferred, 0u);
    EXPECT_EQ(stats()["statuses"], nlohmann::json::parse("[416]"));
    EXPECT_EQ(test::read_file(target), *payload_);
    expect_no_leftovers(target);
}

TEST_F(Download, A416ForAnIncompletePartStartsOver) {
    const fs::path target = dir_ / "model.gguf";
    const auto r = download_file(url("/416", "hash=linked&drop=2000000"), target, fast());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(test::read_file(target), *payload_);
    EXPECT_EQ(r->restarts, 1);
    EXPECT_EQ(stats()["statuses"], nlohmann::json::parse("[200, 416, 200]")) << stats().dump();
}

TEST_F(Download, APartLongerThanTheFileStartsOver) {
    const fs::path target = dir_ / "model.gguf";
    test::write_file(part_path(target), *payload_ + "trailing garbage");
    DownloadOptions o = fast();
    o.expected_sha256 = *payload_sha256_;
    const auto r = download_file(url("/ok"), target, o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(test::read_file(target), *payload_);
    EXPECT_EQ(stats()["statuses"], nlohmann::json::parse("[416, 200]"));
}

TEST_F(Download, AFileChangedBetweenAttemptsStartsOverWithTheNewVersion) {
    const fs::path target = dir_ / "model.gguf";
    const auto r = download_file(url("/etag-changes", "hash=linked&drop=1500000"), target, fast());
    ASSERT_TRUE(r) << r.error().message;
    const std::string second = test::test_payload(2);
    EXPECT_TRUE(r->verified);  // against the new version's X-Linked-Etag
    EXPECT_EQ(r->restarts, 1);
    const std::string got = test::read_file(target);
    EXPECT_TRUE(got == second) << "not version 2 of the file";
    EXPECT_NE(got.substr(0, 1500000), payload_->substr(0, 1500000));
    const nlohmann::json s = stats();
    EXPECT_EQ(s["if_range"][1], "\"v1\"") << s.dump();
    EXPECT_EQ(s["statuses"], nlohmann::json::parse("[200, 200]"));
}

TEST_F(Download, CorruptedBytesAreDeletedAndBothHashesNamed) {
    const fs::path target = dir_ / "model.gguf";
    const auto r = download_file(url("/corrupt"), target, fast());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::format);
    const std::string& m = r.error().message;
    EXPECT_NE(m.find("sha256 mismatch"), std::string::npos) << m;
    EXPECT_NE(m.find(*payload_sha256_), std::string::npos) << m;
    EXPECT_NE(m.find(sha256_hex(test::corrupted_payload())), std::string::npos) << m;
    EXPECT_NE(m.find("X-Linked-Etag"), std::string::npos) << m;
    EXPECT_FALSE(fs::exists(target));
    expect_no_leftovers(target);
    EXPECT_EQ(stats()["requests"], 2);  // one fresh try after the first mismatch
}

TEST_F(Download, AGivenHashThatDoesNotMatchLeavesNothing) {
    const fs::path target = dir_ / "model.gguf";
    DownloadOptions o = fast();
    o.expected_sha256 = std::string(64, 'a');
    o.retry_after_hash_mismatch = false;
    const auto r = download_file(url("/ok"), target, o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::format);
    EXPECT_NE(r.error().message.find("(given)"), std::string::npos) << r.error().message;
    EXPECT_FALSE(fs::exists(target));
    expect_no_leftovers(target);
    EXPECT_EQ(stats()["requests"], 1);
}

TEST_F(Download, NotFoundFailsAtOnceWithTheStatusAndUrl) {
    const fs::path target = dir_ / "model.gguf";
    const std::string u = url("/404");
    const auto r = download_file(u, target, fast());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(r.error().message.find("HTTP 404 (Not Found)"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(u), std::string::npos) << r.error().message;
    EXPECT_EQ(stats()["requests"], 1);
    EXPECT_FALSE(fs::exists(target));
    expect_no_leftovers(target);
}

TEST_F(Download, ServerErrorsAreRetriedThenReported) {
    const fs::path target = dir_ / "model.gguf";
    const auto r = download_file(url("/500"), target, fast());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::io);
    EXPECT_NE(r.error().message.find("HTTP 500"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("after 3 attempts"), std::string::npos) << r.error().message;
    EXPECT_EQ(stats()["requests"], 3);
    EXPECT_FALSE(fs::exists(target));
    expect_no_leftovers(target);
}

TEST_F(Download, ASuccessOtherThan200Or206IsNotTakenForTheFile) {
    const fs::path target = dir_ / "model.gguf";
    const auto r = download_file(url("/203"), target, fast());
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("unexpected HTTP 203"), std::string::npos) << r.error().message;
    EXPECT_FALSE(fs::exists(target));
    expect_no_leftovers(target);
}

TEST_F(Download, TemporaryServerErrorsAreRidden) {
    const fs::path target = dir_ / "model.gguf";
    const auto r = download_file(url("/flaky", "fail=2"), target, fast());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(r->attempts, 3);
    EXPECT_EQ(test::read_file(target), *payload_);
}

TEST_F(Download, RedirectsAreFollowedKeepingTheRedirectsHash) {
    const fs::path target = dir_ / "model.gguf";
    // As on Hugging Face: the hash is on the redirect, the bytes come from elsewhere.
    const auto r = download_file(url("/redirect", "to=/ok&linked=1"), target, fast());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(r->hash_source, HashSource::server_linked_etag);
    EXPECT_NE(r->effective_url.find("/ok?"), std::string::npos) << r->effective_url;
    EXPECT_EQ(test::read_file(target), *payload_);
}

TEST_F(Download, ResumesAfterARestartOfTheProgram) {
    const fs::path target = dir_ / "model.gguf";
    const std::string u = url("/hf");
    // The first run ends (cancelled here, as a quit or a crash would) a third of the way in.
    DownloadOptions first = fast();
    std::vector<DownloadProgress> seen;
    first.on_progress = [&](const DownloadProgress& p) {
        seen.push_back(p);
        return p.bytes_done < kPayloadSize / 3;
    };
    const auto stopped = download_file(u, target, first);
    ASSERT_FALSE(stopped);
    EXPECT_EQ(stopped.error().code, ErrorCode::cancelled);
    EXPECT_NE(stopped.error().message.find(".part"), std::string::npos) << stopped.error().message;
    EXPECT_FALSE(fs::exists(target));
    ASSERT_TRUE(fs::exists(part_info_path(target)));
    const uint64_t kept = fs::file_size(part_path(target));
    EXPECT_GE(kept, kPayloadSize / 3);
    EXPECT_LT(kept, kPayloadSize);
    ASSERT_FALSE(seen.empty());
    EXPECT_EQ(seen.back().total, kPayloadSize);
    EXPECT_EQ(seen.back().bytes_done, kept);

    // The second run, a new call as after a restart, continues from the .part.
    const auto r = download_file(u, target, fast());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(r->resumed_from, kept);
    EXPECT_EQ(r->bytes_transferred, kPayloadSize - kept);
    EXPECT_EQ(test::read_file(target), *payload_);
    EXPECT_EQ(stats()["ranges"][1], kept);
    expect_no_leftovers(target);
}

TEST_F(Download, TheCancelFlagStopsAndKeepsThePart) {
    const fs::path target = dir_ / "model.gguf";
    std::atomic<bool> cancel{false};
    DownloadOptions o = fast();
    o.cancel = &cancel;
    o.on_progress = [&](const DownloadProgress& p) {
        if (p.bytes_done > 1000000) cancel = true;  // as a Pause button on another thread would
        return true;
    };
    const auto r = download_file(url("/hf"), target, o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::cancelled);
    EXPECT_FALSE(fs::exists(target));
    EXPECT_GT(fs::file_size(part_path(target)), 1000000u);
}

TEST_F(Download, ProgressReportsSpeedAndTimeLeft) {
    const fs::path target = dir_ / "model.gguf";
    DownloadOptions o = fast();
    std::vector<DownloadProgress> seen;
    o.on_progress = [&](const DownloadProgress& p) {
        seen.push_back(p);
        return true;
    };
    const auto r = download_file(url("/hf"), target, o);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_GE(seen.size(), 2u);
    for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i].bytes_done, seen[i - 1].bytes_done);
    EXPECT_EQ(seen.back().bytes_done, kPayloadSize);
    EXPECT_EQ(seen.back().total, kPayloadSize);
    EXPECT_EQ(seen.back().seconds_left, 0.0);
    const bool some_speed = std::any_of(seen.begin(), seen.end(), [](const DownloadProgress& p) {
        return p.bytes_per_second > 0 && p.seconds_left.has_value();
    });
    EXPECT_TRUE(some_speed);
}

TEST_F(Download, ASecondDownloadOfTheSameTargetFailsWhileTheFirstRuns) {
    const fs::path target = dir_ / "model.gguf";
    std::optional<Result<DownloadResult>> second;
    DownloadOptions o = fast();
    o.on_progress = [&](const DownloadProgress& p) {
        // In the middle of the first download (which holds the .part), start another.
        if (!second && p.bytes_done > 0) second = download_file(url("/hf"), target, fast());
        return true;
    };
    const auto first = download_file(url("/hf"), target, o);
    ASSERT_TRUE(first) << first.error().message;
    ASSERT_TRUE(second.has_value());
    ASSERT_FALSE(*second);
    EXPECT_EQ(second->error().code, ErrorCode::io);
    EXPECT_NE(second->error().message.find("already being downloaded"), std::string::npos) << second->error().message;
    EXPECT_EQ(test::read_file(target), *payload_);
    EXPECT_EQ(stats()["requests"], 1);  // the second never reached the server
}

TEST_F(Download, TwoThreadsDownloadingOneTargetLeaveOneCorrectFile) {
    const fs::path target = dir_ / "model.gguf";
    std::vector<std::optional<Result<DownloadResult>>> results(2);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
        threads.emplace_back([&, i] {
            ++ready;
            while (ready < 2) std::this_thread::yield();
            results[static_cast<size_t>(i)] = download_file(url("/hf"), target, fast());
        });
    }
    for (auto& t : threads) t.join();
    int succeeded = 0;
    for (const auto& r : results) {
        if (*r) {
            ++succeeded;
        } else {
            // The only acceptable failure: the other one held the .part.
            EXPECT_NE(r->error().message.find("already being downloaded"), std::string::npos) << r->error().message;
        }
    }
    EXPECT_GE(succeeded, 1);
    EXPECT_EQ(test::read_file(target), *payload_);
    expect_no_leftovers(target);
}

TEST_F(Download, AFullDiskStopsCleanlyAndTheDownloadResumesLater) {
    const fs::path target = dir_ / "model.gguf";
    const std::string u = url("/hf");
    constexpr rlim_t kLimit = 1 << 20;
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        // A file size limit makes write() fail with EFBIG past 1 MiB, as ENOSPC would on a
        // full disk (both take the same path); ignoring SIGXFSZ lets write() report it.
        ::close(fds[0]);
        ::signal(SIGXFSZ, SIG_IGN);
        const rlimit limit{kLimit, kLimit};
        ::setrlimit(RLIMIT_FSIZE, &limit);
        const auto r = download_file(u, target, fast());
        const std::string report =
            r ? std::string("ok") : std::string(error_code_name(r.error().code)) + "\n" + r.error().message;
        ssize_t ignored = ::write(fds[1], report.data(), report.size());
        (void)ignored;
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string report;
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buffer, sizeof buffer)) > 0) report.append(buffer, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "the child died instead of reporting: " << status;
    EXPECT_EQ(report.substr(0, report.find('\n')), error_code_name(ErrorCode::io)) << report;
    EXPECT_NE(report.find("file size limit"), std::string::npos) << report;
    EXPECT_NE(report.find("model.gguf.part"), std::string::npos) << report;
    EXPECT_FALSE(fs::exists(target));
    ASSERT_TRUE(fs::exists(part_path(target)));
    EXPECT_EQ(fs::file_size(part_path(target)), kLimit);

    // With room again, the download continues where the disk filled up.
    const auto r = download_file(u, target, fast());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->resumed_from, kLimit);
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(test::read_file(target), *payload_);
}

TEST_F(Download, FreeSpaceIsCheckedBeforeWriting) {
    const fs::path target = dir_ / "model.gguf";
    DownloadOptions o = fast();
    o.keep_free_bytes = uint64_t{1} << 60;  // more than any disk: the check must refuse
    const auto r = download_file(url("/hf"), target, o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::io);
    EXPECT_NE(r.error().message.find("not enough disk space"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("4.01 MiB still to download"), std::string::npos) << r.error().message;
    EXPECT_FALSE(fs::exists(target));
    expect_no_leftovers(target);  // nothing was written, so nothing is kept
}

TEST_F(Download, BadRequestsAreRefusedBeforeAnyTraffic) {
    const fs::path target = dir_ / "model.gguf";
    auto r = download_file("ftp://127.0.0.1/x", target, fast());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
    DownloadOptions o = fast();
    o.expected_sha256 = "abc";
    r = download_file(url("/ok"), target, o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(r.error().message.find("not a sha256"), std::string::npos);
    r = download_file(url("/ok"), dir_ / "missing" / "model.gguf", fast());
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("does not exist"), std::string::npos) << r.error().message;
    EXPECT_TRUE(stats().is_object() && stats()["requests"] == 0);
}

TEST_F(Download, AnExistingTargetIsReplacedOnlyByAVerifiedFile) {
    const fs::path target = dir_ / "model.gguf";
    test::write_file(target, "an older file");
    const auto bad = download_file(url("/corrupt"), target, fast());
    ASSERT_FALSE(bad);
    EXPECT_EQ(test::read_file(target), "an older file");
    const auto good = download_file(url("/hf"), target, fast());
    ASSERT_TRUE(good) << good.error().message;
    EXPECT_EQ(test::read_file(target), *payload_);
}

// A code host's page about a file (GitHub's .../blob/... link) answers 200 with HTML. With
// no hash to check, it was kept under the model's name, for the CLI and the desktop alike.
TEST_F(Download, AWebPageAnsweredForTheFileIsRefusedAndNothingKept) {
    const fs::path target = dir_ / "model-Q4_K_M.gguf";
    const auto r = download_file(url("/blob/model-Q4_K_M.gguf"), target, fast());
    ASSERT_FALSE(r) << "kept: " << test::read_file(target);
    EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(r.error().message.find("answered with a web page, not the file (nothing kept)"), std::string::npos)
        << r.error().message;
    EXPECT_TRUE(fs::is_empty(dir_.path()));
    EXPECT_EQ(stats()["requests"], 1) << "refused, not retried";
}

// A folder under the file's name: the CLI took it for a finished download and the desktop
// said "Already in the library". A download can never replace it, so it is refused at once.
TEST_F(Download, ANameTakenByAFolderOrADeviceIsRefusedBeforeAnyTraffic) {
    const fs::path target = dir_ / "model.gguf";
    const auto missing = target_file_exists(target);
    ASSERT_TRUE(missing) << missing.error().message;
    EXPECT_FALSE(*missing);
    test::write_file(target, "a model");
    const auto present = target_file_exists(target);
    ASSERT_TRUE(present) << present.error().message;
    EXPECT_TRUE(*present);
    fs::remove(target);
    fs::create_directory(target);
    const auto folder = target_file_exists(target);
    ASSERT_FALSE(folder);
    EXPECT_EQ(folder.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(folder.error().message.find(target.string() + " already exists and is a folder"), std::string::npos)
        << folder.error().message;
    const auto r = download_file(url("/hf"), target, fast());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, folder.error().message);
    EXPECT_TRUE(fs::is_empty(target));
    expect_no_leftovers(target);

    const auto device = target_file_exists("/dev/null");
    ASSERT_FALSE(device);
    EXPECT_NE(device.error().message.find("/dev/null already exists and is not a regular file"), std::string::npos)
        << device.error().message;
    EXPECT_TRUE(stats().is_object() && stats()["requests"] == 0);
}

TEST_F(Download, ProbeNamesTheFileAndItsHash) {
    const auto named = probe_remote_file(url("/named"), fast());
    ASSERT_TRUE(named) << named.error().message;
    EXPECT_EQ(named->file_name, "named-model.gguf");
    EXPECT_EQ(named->size, kPayloadSize);
    EXPECT_EQ(named->sha256, *payload_sha256_);
    EXPECT_EQ(named->hash_source, HashSource::server_linked_etag);

    const auto plain = probe_remote_file(server_->url("/org/repo/resolve/main/sub/tiny%20model.gguf"), fast());
    ASSERT_TRUE(plain) << plain.error().message;
    EXPECT_EQ(plain->file_name, "tiny model.gguf");

    const auto missing = probe_remote_file(url("/404"), fast());
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("HTTP 404"), std::string::npos);
}

TEST_F(Download, FetchTextReadsSmallDocuments) {
    const auto listing = fetch_text(server_->url("/api/models/org/repo/tree/main?recursive=true"), fast());
    ASSERT_TRUE(listing) << listing.error().message;
    EXPECT_EQ(nlohmann::json::parse(listing->body).size(), 7u);
    const auto limited = fetch_text(server_->url("/api/models/org/repo/tree/main"), fast(), 100);
    ASSERT_FALSE(limited);
    EXPECT_NE(limited.error().message.find("more than"), std::string::npos) << limited.error().message;
}

}  // namespace
}  // namespace powerhouse::library
