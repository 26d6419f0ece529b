// probe_remote_file() and fetch_text(): single requests (a HEAD, a small GET) with the
// downloads' retry rules, for what is decided before a download starts.
#include <algorithm>

#include <fmt/format.h>

#include "library/download.h"
#include "library/file_names.h"
#include "library/http_transfer.h"

namespace powerhouse::library {

using detail::classify;
using detail::CurlGlobal;
using detail::describe_failure;
using detail::format_size;
using detail::is_http_url;
using detail::perform_transfer;
using detail::ResponseHead;
using detail::server_hash;
using detail::sleep_unless_cancelled;
using detail::TransferOutcome;
using detail::TransferRequest;
using detail::TransferSink;
using detail::Verdict;

namespace {

// Runs `attempt` (one transfer) until it succeeds or fails for good, with the download's
// backoff. The result is the last outcome; an error when retrying ran out or was cancelled.
template <class Attempt>
Result<TransferOutcome> with_retries(const std::string& url, const DownloadOptions& options, Attempt&& attempt) {
    auto backoff = options.initial_backoff;
    bool reached_server = false;
    for (int tries = 1;; ++tries) {
        TransferOutcome outcome = attempt();
        if (options.cancel != nullptr && options.cancel->load()) {
            return make_error(ErrorCode::cancelled, fmt::format("cancelled ({})", url));
        }
        if (outcome.head.status > 0) reached_server = true;
        const Verdict verdict = classify(outcome, reached_server);
        if (verdict == Verdict::success) return outcome;
        const long status = outcome.head.status;
        if (verdict == Verdict::fail) {
            if (outcome.curl_code == 0 && (status == 405 || status == 501)) return outcome;  // for the caller
            const bool client_error = outcome.curl_code == 0 && status >= 400 && status < 500;
            return make_error(client_error ? ErrorCode::invalid_argument : ErrorCode::io,
                              describe_failure(outcome, url));
        }
        if (tries >= options.max_attempts) {
            return make_error(ErrorCode::io,
                              fmt::format("failed after {} attempts: {}", tries, describe_failure(outcome, url)));
        }
        if (options.on_retry) options.on_retry(RetryNotice{describe_failure(outcome, url), backoff, tries});
        if (!sleep_unless_cancelled(backoff, options.cancel)) {
            return make_error(ErrorCode::cancelled, fmt::format("cancelled ({})", url));
        }
        backoff = std::min(backoff * 2, options.max_backoff);
    }
}

}  // namespace

Result<RemoteFile> probe_remote_file(const std::string& url, const DownloadOptions& options) {
    if (!is_http_url(url)) {
        return make_error(ErrorCode::invalid_argument, fmt::format("not an http(s) URL: '{}'", url));
    }
    const CurlGlobal curl;
    if (!curl.ok()) return make_error(ErrorCode::internal, "libcurl could not be initialised");
    Result<TransferOutcome> outcome = with_retries(url, options, [&] {
        TransferRequest request;
        request.url = url;
        request.head_only = true;
        TransferSink sink;
        sink.keep_going = [&] { return options.cancel == nullptr || !options.cancel->load(); };
        return perform_transfer(request, options, sink);
    });
    if (!outcome) return std::move(outcome).error();
    RemoteFile file;
    file.effective_url = outcome->effective_url;
    const ResponseHead& head = outcome->head;
    file.file_name = safe_file_name(file_name_from_content_disposition(head.content_disposition));
    if (file.file_name.empty()) file.file_name = safe_file_name(file_name_from_url(url));
    if (file.file_name.empty()) file.file_name = safe_file_name(file_name_from_url(file.effective_url));
    if (head.status == 405 || head.status == 501) {
        file.head_supported = false;
        return file;
    }
    file.size = head.content_length;
    if (head.linked_size) file.size = head.linked_size;
    const auto [hash, source] = server_hash(head);
    if (!hash.empty()) {
        file.sha256 = hash;
        file.hash_source = source;
    }
    return file;
}

Result<TextResponse> fetch_text(const std::string& url, const DownloadOptions& options, size_t max_bytes) {
    if (!is_http_url(url)) {
        return make_error(ErrorCode::invalid_argument, fmt::format("not an http(s) URL: '{}'", url));
    }
    const CurlGlobal curl;
    if (!curl.ok()) return make_error(ErrorCode::internal, "libcurl could not be initialised");
    std::string body;
    bool too_large = false;
    Result<TransferOutcome> outcome = with_retries(url, options, [&] {
        body.clear();
        TransferRequest request;
        request.url = url;
        TransferSink sink;
        sink.on_body = [&](const char* data, size_t size) {
            if (body.size() + size > max_bytes) {
                too_large = true;
                return false;
            }
            body.append(data, size);
            return true;
        };
        sink.keep_going = [&] { return options.cancel == nullptr || !options.cancel->load(); };
        return perform_transfer(request, options, sink);
    });
    if (too_large) {
        return make_error(ErrorCode::io, fmt::format("{} sent more than {}", url, format_size(max_bytes)));
    }
    if (!outcome) return std::move(outcome).error();
    if (outcome->head.status < 200 || outcome->head.status >= 300) {
        return make_error(ErrorCode::io, describe_failure(*outcome, url));
    }
    return TextResponse{std::move(body), outcome->head.link, outcome->effective_url};
}

Result<RangeResponse> fetch_range(const std::string& url, uint64_t first, uint64_t length,
                                  const DownloadOptions& options) {
    if (!is_http_url(url)) {
        return make_error(ErrorCode::invalid_argument, fmt::format("not an http(s) URL: '{}'", url));
    }
    if (length == 0) return RangeResponse{};
    const CurlGlobal curl;
    if (!curl.ok()) return make_error(ErrorCode::internal, "libcurl could not be initialised");
    RangeResponse response;
    bool enough = false;
    Result<TransferOutcome> outcome = with_retries(url, options, [&] {
        response = RangeResponse{};
        enough = false;
        uint64_t skip = 0;  // of a 200 answer: the bytes before `first`
        TransferRequest request;
        request.url = url;
        request.range_from = first;
        request.range_to = first + length - 1;
        TransferSink sink;
        sink.on_head = [&](const ResponseHead& head) {
            if (head.status == 206) {
                const auto range = detail::parse_content_range(head.content_range);
                if (!range || range->first != first) return false;  // not the bytes asked for
                response.file_size = range->complete_length;
            } else if (head.status == 200) {
                response.range_ignored = true;
                response.file_size = head.content_length;
                skip = first;
            }
            return true;
        };
        sink.on_body = [&](const char* data, size_t size) {
            if (skip > 0) {
                const size_t dropped = static_cast<size_t>(std::min<uint64_t>(skip, size));
                skip -= dropped;
                data += dropped;
                size -= dropped;
            }
            const size_t wanted = static_cast<size_t>(std::min<uint64_t>(size, length - response.bytes.size()));
            response.bytes.append(data, wanted);
            if (response.bytes.size() == length) {
                enough = true;
                return false;  // stop here, whatever the server still means to send
            }
            return true;
        };
        sink.keep_going = [&] { return options.cancel == nullptr || !options.cancel->load(); };
        TransferOutcome done = perform_transfer(request, options, sink);
        if (enough) done.curl_code = 0;  // stopped on purpose, with every byte asked for
        return done;
    });
    if (!outcome) return std::move(outcome).error();
    if (outcome->head.status != 200 && outcome->head.status != 206) {
        return make_error(ErrorCode::io, describe_failure(*outcome, url));
    }
    return response;
}

std::optional<long> http_status_of(const Error& error) {
    // describe_failure's "HTTP 401 (Unauthorized) from <url>", alone or after a prefix
    // ("download failed: ", "failed after N attempts: "): the first "HTTP NNN " says it.
    const std::string_view text = error.message;
    for (size_t at = text.find("HTTP "); at != std::string_view::npos; at = text.find("HTTP ", at + 1)) {
        const std::string_view rest = text.substr(at + 5);
        if (rest.size() < 4 || rest[3] != ' ') continue;
        long status = 0;
        bool digits = true;
        for (size_t i = 0; i < 3; ++i) {
            digits = digits && rest[i] >= '0' && rest[i] <= '9';
            status = status * 10 + (rest[i] - '0');
        }
        if (digits) return status;
    }
    return std::nullopt;
}

}  // namespace powerhouse::library
