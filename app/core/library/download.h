// Resumable, verified downloads of model files over http(s) (libcurl).
//
// The promise: the target's name never holds a partial or unverified file. Bytes go to
// "<target>.part" beside it, with "<target>.part.json" recording where they came from (URL,
// the server's validator, size and sha256). A later call for the same target, after a
// failure, a cancel (pause) or a restart of the program, continues the .part with an HTTP
// Range request, guarded by If-Range so that a file changed on the server starts over
// instead of being spliced. When complete, the .part is checked against the expected
// sha256 (the caller's, else the server's: Hugging Face's X-Linked-Etag or an ETag that is
// a quoted sha256), fsynced, renamed onto the target in one step, and the folder fsynced.
// A mismatch deletes the bytes and names both hashes. Without any expected hash the file
// is kept and the result says it was not verified.
//
// Failures: a dropped or stalled connection and HTTP 5xx/408/429 are retried with
// exponential backoff (the count of attempts in a row that added no bytes is limited);
// other HTTP 4xx fail at once, naming the status and the URL. Before writing, the free
// disk space is compared with what is still to come; a full disk (ENOSPC, EDQUOT, EFBIG)
// during the download stops it cleanly and keeps the .part for later.
//
// Error codes: invalid_argument (a bad URL or hash, HTTP 4xx), io (network after the
// retries, HTTP 5xx, disk, the target being downloaded by someone else), format (sha256
// mismatch), cancelled.
//
// Concurrency: a download holds an exclusive flock on its .part, so two downloads of the
// same target (threads or processes) never write the same file: the second fails at once
// with "already being downloaded" rather than waiting (a caller that wants a queue keeps
// one). Downloads of different targets run in parallel freely.
//
// Thread-safety: every function may be called from any thread; the callbacks are called on
// the calling thread. libcurl's global initialisation is reference-counted per call (safe
// from several threads with libcurl >= 7.84), so nothing needs to be set up first.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "powerhouse/result.h"

namespace powerhouse::library {

struct DownloadProgress {
    uint64_t bytes_done = 0;             // of the file, resumed bytes included
    std::optional<uint64_t> total;       // the file's size, once the server has said it
    uint64_t bytes_transferred = 0;      // received by this call
    double bytes_per_second = 0;         // over the last few seconds
    std::optional<double> seconds_left;  // at that speed; nullopt while unknown
    int attempt = 1;                     // which HTTP request of this call
};

// Called at most every `progress_interval` (and once when the file is complete); returning
// false stops the download like `cancel` does.
using ProgressCallback = std::function<bool(const DownloadProgress&)>;

// A failed attempt about to be retried, after `wait`: what went wrong (with the URL), and how
// many HTTP requests this call has made. Without it a server that keeps failing means minutes
// of backoff in silence.
struct RetryNotice {
    std::string reason;
    std::chrono::milliseconds wait{0};
    int attempt = 1;
};
using RetryCallback = std::function<void(const RetryNotice&)>;

struct DownloadOptions {
    // The file's sha256 (64 hex digits, any case, quotes or a "sha256:" prefix allowed).
    // Empty: the server's hash when it sends one.
    std::string expected_sha256;

    // Attempts in a row that fail without adding bytes before giving up; an attempt that
    // makes progress resets the count (and the backoff).
    int max_attempts = 8;
    std::chrono::milliseconds initial_backoff{1000};  // doubled after each failed attempt
    std::chrono::milliseconds max_backoff{60000};
    // A connection slower than this many bytes/s for `stall_seconds` is dropped and retried.
    long stall_bytes_per_second = 1024;
    long stall_seconds = 30;
    long connect_timeout_seconds = 30;
    long max_redirects = 10;
    // After a sha256 mismatch, download once more from scratch before reporting it (a
    // corrupted transfer is rarer than a wrong hash, but costs only time to rule out).
    bool retry_after_hash_mismatch = true;
    // Refuse to start (or continue) when the disk would have less than this left.
    uint64_t keep_free_bytes = 0;

    ProgressCallback on_progress;
    std::chrono::milliseconds progress_interval{250};
    // Called before each wait between attempts (probes and fetches too).
    RetryCallback on_retry;
    // Set from any thread to stop: the .part is kept for a later call, the result is
    // ErrorCode::cancelled. Pausing is cancelling and calling again later.
    const std::atomic<bool>* cancel = nullptr;

    // Sent as "Authorization: Bearer ..." to the URL's own host only, never after a redirect
    // to another host (Hugging Face's gated repositories want the user's token).
    std::string bearer_token;
    std::string user_agent = "powerhouse";
};

// Where the expected sha256 came from.
enum class HashSource {
    none,                // nothing to check against
    caller,              // DownloadOptions::expected_sha256
    server_linked_etag,  // X-Linked-Etag (Hugging Face, files in Git LFS / Xet)
    server_etag,         // an ETag that is a quoted sha256
};
const char* hash_source_name(HashSource source);

struct DownloadResult {
    std::filesystem::path path;  // the target
    uint64_t size = 0;
    std::string sha256;     // of the bytes written, computed while downloading
    bool verified = false;  // sha256 matched the expected hash
    HashSource hash_source = HashSource::none;
    uint64_t resumed_from = 0;       // bytes of an earlier .part that were kept
    uint64_t bytes_transferred = 0;  // body bytes received by this call
    int attempts = 0;                // HTTP requests made
    int restarts = 0;                // times the .part was started over from byte 0
    std::string effective_url;       // the last URL, after redirects
};

// Downloads `url` (http or https) into `target`, whose folder must exist. An existing
// file at `target` is replaced, atomically, only by a complete file that passed the
// check (or, without an expected hash, a complete one that is not a web page: a code
// host's page about the file is refused and nothing is kept).
Result<DownloadResult> download_file(const std::string& url, const std::filesystem::path& target,
                                     const DownloadOptions& options = {});

// Whether a file is already at `target`. An error, naming what is there, when the name is
// taken by something a download cannot replace: a folder, a device, a link to one.
Result<bool> target_file_exists(const std::filesystem::path& target);

// "<target>.part" and "<target>.part.json".
std::filesystem::path part_path(const std::filesystem::path& target);
std::filesystem::path part_info_path(const std::filesystem::path& target);

// What a server says about a file before it is downloaded (an HTTP HEAD request, redirects
// followed): the name to save it under and what to expect.
struct RemoteFile {
    std::string effective_url;
    // Content-Disposition's file name, else the last segment of the URL's path (after
    // redirects only when the original has none), made safe (file_names.h); may be "".
    std::string file_name;
    std::optional<uint64_t> size;
    std::optional<std::string> sha256;
    HashSource hash_source = HashSource::none;
    bool head_supported = true;  // false: the server refused HEAD (405/501); nothing else is known
};
// Uses the retry, timeout, redirect, token and cancel fields of `options`.
Result<RemoteFile> probe_remote_file(const std::string& url, const DownloadOptions& options = {});

// A small document fetched into memory (an API's JSON), with retries like a download.
struct TextResponse {
    std::string body;
    std::string link_header;  // the "Link" header (pagination), "" without one
    std::string effective_url;
};
Result<TextResponse> fetch_text(const std::string& url, const DownloadOptions& options = {},
                                size_t max_bytes = size_t{64} << 20);

// Bytes [first, first + length) of a file, with an HTTP Range request and the retries of
// fetch_text; fewer only where the file ends first. A server that ignores Range and answers
// the whole file (200) is read only up to the range's end, then cut off: never more than
// first + length bytes cross. `file_size`: the whole file's size when the server says it.
struct RangeResponse {
    std::string bytes;
    std::optional<uint64_t> file_size;
    bool range_ignored = false;  // the server answered 200 with the file from its start
};
Result<RangeResponse> fetch_range(const std::string& url, uint64_t first, uint64_t length,
                                  const DownloadOptions& options = {});

// The HTTP status of a failure from this file's functions ("HTTP 401 (Unauthorized) from
// ..."); nullopt for a failure that had no HTTP answer (a refused connection, a timeout).
std::optional<long> http_status_of(const Error& error);

}  // namespace powerhouse::library
