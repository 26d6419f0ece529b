// One HTTP request through libcurl, for the library's own use (download.cpp): the options
// every request shares (redirects, protocols, timeouts, stall detection, TLS verification
// left on), the response's headers parsed as they arrive, the body handed to a sink, and
// a verdict on whether a failure is worth retrying.
//
// Thread-safety: each call uses its own curl handle; callbacks run on the calling thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "http_curl.h"
#include "library/download.h"

namespace powerhouse::library::detail {

// curl_global_init / curl_global_cleanup for the lifetime of one call (http_curl.h).
using CurlGlobal = http::CurlGlobal;

// The headers of the final response (after redirects). X-Linked-* are kept from whichever
// response of the chain sent them: Hugging Face sends them on its redirect to the CDN.
struct ResponseHead {
    long status = 0;
    std::optional<uint64_t> content_length;
    std::string content_range;
    std::string etag;
    std::string last_modified;
    std::string content_disposition;
    std::string link;
    std::string location;
    std::string linked_etag;
    std::optional<uint64_t> linked_size;
};

// "bytes 100-199/1000" -> {100, 199, 1000}; "bytes */1000" -> {nullopt, nullopt, 1000}.
struct ContentRange {
    std::optional<uint64_t> first;
    std::optional<uint64_t> last;
    std::optional<uint64_t> complete_length;
};
std::optional<ContentRange> parse_content_range(const std::string& value);

struct TransferRequest {
    std::string url;
    bool head_only = false;
    std::optional<uint64_t> range_from;  // "Range: bytes=N-"
    std::optional<uint64_t> range_to;    // with range_from: "Range: bytes=N-M" (M inclusive)
    std::string if_range;                // an ETag or HTTP date, with range_from
};

struct TransferSink {
    // The final response's headers are complete (before its first body byte). Return
    // false to abort the transfer.
    std::function<bool(const ResponseHead&)> on_head;
    // Body bytes of a 2xx final response; bodies of other responses are dropped. Return
    // false to abort.
    std::function<bool(const char* data, size_t size)> on_body;
    // Polled about once a second at least, also when no data flows; false aborts.
    std::function<bool()> keep_going;
};

struct TransferOutcome {
    int curl_code = 0;         // CURLcode
    std::string curl_message;  // libcurl's words for it, "" when curl_code is 0
    ResponseHead head;
    bool head_seen = false;  // on_head was called
    std::string effective_url;
};

TransferOutcome perform_transfer(const TransferRequest& request, const DownloadOptions& options, TransferSink& sink);

enum class Verdict {
    success,  // a 2xx answer, the transfer completed
    retry,    // a dropped or stalled connection, 5xx, 408, 425, 429
    fail,     // 4xx, TLS verification, a bad URL, too many redirects
};
// `reached_server`: this call has had an HTTP answer before. A name that does not resolve
// or a refused connection is retried only then: before, it is far more likely a typo.
Verdict classify(const TransferOutcome& outcome, bool reached_server);

// "HTTP 404 (Not Found) from https://..." or "connection failed: <curl's message> (url)".
std::string describe_failure(const TransferOutcome& outcome, const std::string& url);

// "1.23 GiB" (binary units; for messages).
std::string format_size(uint64_t bytes);

// "http://..." or "https://..." (any case).
bool is_http_url(std::string_view url);

// The sha256 a response vouches for: Hugging Face's X-Linked-Etag (the LFS object id),
// else an ETag that is a quoted sha256 (some servers and CDNs use the content hash).
// {"", HashSource::none} without one.
std::pair<std::string, HashSource> server_hash(const ResponseHead& head);

// Sleeps, waking early when cancelled. Returns false when cancelled.
bool sleep_unless_cancelled(std::chrono::milliseconds duration, const std::atomic<bool>* cancel);

}  // namespace powerhouse::library::detail
