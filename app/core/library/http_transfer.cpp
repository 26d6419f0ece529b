#include "library/http_transfer.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "http_curl.h"
#include "library/file_names.h"
#include "library/sha256.h"

namespace powerhouse::library::detail {
namespace {

std::optional<uint64_t> parse_u64(std::string_view s) {
    s = http::trim_space(s);
    uint64_t value = 0;
    const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (error != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
    return value;
}

const char* reason_phrase(long status) {
    switch (status) {
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 410:
            return "Gone";
        case 416:
            return "Range Not Satisfiable";
        case 429:
            return "Too Many Requests";
        case 500:
            return "Internal Server Error";
        case 501:
            return "Not Implemented";
        case 502:
            return "Bad Gateway";
        case 503:
            return "Service Unavailable";
        case 504:
            return "Gateway Timeout";
        default:
            return nullptr;
    }
}

// What the curl callbacks share during one transfer.
struct Transfer {
    TransferSink* sink = nullptr;
    TransferOutcome* outcome = nullptr;
    bool head_complete = false;
    bool aborted = false;
};

bool is_redirect(const ResponseHead& head) {
    return head.status >= 300 && head.status < 400 && !head.location.empty();
}

size_t on_header_line(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t bytes = size * count;
    const http::HeaderLine line = http::parse_header_line(std::string_view(data, bytes));
    ResponseHead& head = t->outcome->head;
    if (line.kind == http::HeaderLine::Kind::status) {
        // A new response of the chain (a redirect's target, or after "100 Continue"): its
        // own headers start from nothing, except what Hugging Face put on the redirect.
        ResponseHead next;
        next.linked_etag = std::move(head.linked_etag);
        next.linked_size = head.linked_size;
        next.status = line.status;
        head = std::move(next);
        t->head_complete = false;
        return bytes;
    }
    if (line.kind == http::HeaderLine::Kind::end) {
        // The end of one response's headers: the final one unless it is a redirect that
        // libcurl follows, or an informational 1xx.
        if (!t->head_complete && head.status >= 200 && !is_redirect(head)) {
            t->head_complete = true;
            t->outcome->head_seen = true;
            if (t->sink->on_head && !t->sink->on_head(head)) {
                t->aborted = true;
                return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
            }
        }
        return bytes;
    }
    if (line.kind != http::HeaderLine::Kind::field) return bytes;
    const std::string_view name = line.name;
    const std::string_view value = line.value;
    if (iequals(name, "Content-Length")) {
        head.content_length = parse_u64(value);
    } else if (iequals(name, "Content-Range")) {
        head.content_range = value;
    } else if (iequals(name, "ETag")) {
        head.etag = value;
    } else if (iequals(name, "Last-Modified")) {
        head.last_modified = value;
    } else if (iequals(name, "Content-Disposition")) {
        head.content_disposition = value;
    } else if (iequals(name, "Link")) {
        head.link = value;
    } else if (iequals(name, "Location")) {
        head.location = value;
    } else if (iequals(name, "X-Linked-Etag")) {
        head.linked_etag = value;
    } else if (iequals(name, "X-Linked-Size")) {
        head.linked_size = parse_u64(value);
    }
    return bytes;
}

size_t on_body_bytes(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t bytes = size * count;
    const long status = t->outcome->head.status;
    // Error pages and redirect bodies are not the file.
    if (!t->head_complete || status < 200 || status >= 300) return bytes;
    if (t->sink->on_body && !t->sink->on_body(data, bytes)) {
        t->aborted = true;
        return 0;  // CURLE_WRITE_ERROR
    }
    return bytes;
}

int on_transfer_info(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* t = static_cast<Transfer*>(user);
    if (t->sink->keep_going && !t->sink->keep_going()) {
        t->aborted = true;
        return 1;  // CURLE_ABORTED_BY_CALLBACK
    }
    return 0;
}

}  // namespace

std::optional<ContentRange> parse_content_range(const std::string& value) {
    std::string_view v = http::trim_space(value);
    if (v.substr(0, 6) != "bytes ") return std::nullopt;
    v.remove_prefix(6);
    const size_t slash = v.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    ContentRange range;
    const std::string_view length = http::trim_space(v.substr(slash + 1));
    if (length != "*") {
        range.complete_length = parse_u64(length);
        if (!range.complete_length) return std::nullopt;
    }
    const std::string_view span = http::trim_space(v.substr(0, slash));
    if (span != "*") {
        const size_t dash = span.find('-');
        if (dash == std::string_view::npos) return std::nullopt;
        range.first = parse_u64(span.substr(0, dash));
        range.last = parse_u64(span.substr(dash + 1));
        if (!range.first || !range.last || *range.last < *range.first) return std::nullopt;
    }
    return range;
}

TransferOutcome perform_transfer(const TransferRequest& request, const DownloadOptions& options, TransferSink& sink) {
    TransferOutcome outcome;
    http::EasyHandle handle(curl_easy_init());
    if (!handle) {
        outcome.curl_code = CURLE_FAILED_INIT;
        outcome.curl_message = http::kInitFailed;
        return outcome;
    }
    CURL* h = handle.get();
    Transfer transfer;
    transfer.sink = &sink;
    transfer.outcome = &outcome;

    curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
    // Only http(s), also after redirects: a redirect must not reach file:// or others.
    http::allow_only_http(h, true);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, options.max_redirects);
    // Threads: no SIGALRM-based timeouts.
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, options.connect_timeout_seconds);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, options.stall_bytes_per_second);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, options.stall_seconds);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    // Larger reads than the 16 KiB default: fewer callbacks and writes for multi-GB files.
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 256L * 1024);
    curl_easy_setopt(h, CURLOPT_USERAGENT, options.user_agent.c_str());
    // No Accept-Encoding: ranges and lengths must count the file's own bytes.
    if (!options.bearer_token.empty()) {
        // libcurl sends it to the first host only, never after a redirect elsewhere.
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BEARER));
        curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, options.bearer_token.c_str());
    }
    if (request.head_only) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);

    std::string range;
    http::HeaderList headers;
    if (request.range_from) {
        range = std::to_string(*request.range_from) + "-";
        if (request.range_to) range += std::to_string(*request.range_to);
        curl_easy_setopt(h, CURLOPT_RANGE, range.c_str());
        if (!request.if_range.empty()) {
            const std::string line = "If-Range: " + request.if_range;
            headers.reset(curl_slist_append(nullptr, line.c_str()));
            curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
        }
    }

    http::TransferResult result = http::run_transfer(h, {on_header_line, on_body_bytes, on_transfer_info, &transfer});
    outcome.curl_code = result.code;
    outcome.curl_message = std::move(result.message);
    char* effective = nullptr;
    if (curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &effective) == CURLE_OK && effective != nullptr) {
        outcome.effective_url = effective;
    }
    // An empty body (a HEAD, a 0-byte file) may end without the blank-line callback having
    // seen a final status; libcurl knows it.
    if (outcome.head.status == 0) outcome.head.status = http::response_code(h);
    return outcome;
}

Verdict classify(const TransferOutcome& outcome, bool reached_server) {
    switch (static_cast<CURLcode>(outcome.curl_code)) {
        case CURLE_OK:
            break;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
        case CURLE_COULDNT_CONNECT:
            return reached_server ? Verdict::retry : Verdict::fail;
        case CURLE_OPERATION_TIMEDOUT:  // includes the stall limit
        case CURLE_PARTIAL_FILE:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_SSL_CONNECT_ERROR:
            return Verdict::retry;
        default:
            return Verdict::fail;
    }
    const long status = outcome.head.status;
    if (status >= 200 && status < 300) return Verdict::success;
    if (status >= 500 || status == 408 || status == 425 || status == 429) return Verdict::retry;
    return Verdict::fail;
}

std::string describe_failure(const TransferOutcome& outcome, const std::string& url) {
    if (outcome.curl_code != CURLE_OK) {
        if (outcome.curl_code == CURLE_OPERATION_TIMEDOUT) {
            return fmt::format("the connection stalled or timed out ({}) for {}", outcome.curl_message, url);
        }
        return fmt::format("{} ({})", outcome.curl_message, url);
    }
    const long status = outcome.head.status;
    const char* phrase = reason_phrase(status);
    return phrase != nullptr ? fmt::format("HTTP {} ({}) from {}", status, phrase, url)
                             : fmt::format("HTTP {} from {}", status, url);
}

bool is_http_url(std::string_view url) {
    const auto starts = [&](std::string_view prefix) {
        if (url.size() <= prefix.size()) return false;
        for (size_t i = 0; i < prefix.size(); ++i) {
            if (std::tolower(static_cast<unsigned char>(url[i])) != prefix[i]) return false;
        }
        return true;
    };
    return starts("http://") || starts("https://");
}

std::pair<std::string, HashSource> server_hash(const ResponseHead& head) {
    if (auto linked = normalize_sha256(head.linked_etag)) return {*linked, HashSource::server_linked_etag};
    if (auto tag = normalize_sha256(head.etag)) return {*tag, HashSource::server_etag};
    return {"", HashSource::none};
}

bool sleep_unless_cancelled(std::chrono::milliseconds duration, const std::atomic<bool>* cancel) {
    using Clock = std::chrono::steady_clock;
    const auto until = Clock::now() + duration;
    while (Clock::now() < until) {
        if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return false;
        std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(20), until - Clock::now()));
    }
    return cancel == nullptr || !cancel->load(std::memory_order_relaxed);
}

std::string format_size(uint64_t bytes) {
    static constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) return fmt::format("{} bytes", bytes);
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1024 && unit < 4) {
        value /= 1024;
        ++unit;
    }
    return fmt::format("{:.2f} {}", value, kUnits[unit]);
}

}  // namespace powerhouse::library::detail
