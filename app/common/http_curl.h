// The libcurl plumbing that both HTTP clients share: the downloads' (app/core/library,
// http_transfer) and the remote engines' (app/core/remote, http_client). curl's global state
// for the length of a call, easy handles and header lists that free themselves, the rule that
// only http and https are spoken, running a transfer with its three callbacks and libcurl's
// words for a failure, and splitting the lines of a response's head. What each client asks of
// its requests (redirects, timeouts, buffers, credentials) and keeps of the headers stays its
// own.
//
// Built only where libcurl is found (powerhouse_http, app/common/CMakeLists.txt), like both
// clients. Thread-safety: no state of its own; each transfer runs on its own handle, on the
// calling thread, and so do its callbacks.
#pragma once

#include <curl/curl.h>

#include <memory>
#include <string>
#include <string_view>

namespace powerhouse::http {

// curl_global_init / curl_global_cleanup for the lifetime of one call: reference-counted and
// thread-safe in libcurl >= 7.84, so no global object of ours is needed.
class CurlGlobal {
public:
    CurlGlobal();
    ~CurlGlobal();
    CurlGlobal(const CurlGlobal&) = delete;
    CurlGlobal& operator=(const CurlGlobal&) = delete;
    bool ok() const { return ok_; }

private:
    bool ok_ = false;
};

struct EasyHandleDeleter {
    void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
using EasyHandle = std::unique_ptr<CURL, EasyHandleDeleter>;

struct HeaderListDeleter {
    void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using HeaderList = std::unique_ptr<curl_slist, HeaderListDeleter>;

// What libcurl says when curl_easy_init fails.
inline constexpr const char* kInitFailed = "libcurl could not be initialised";

// Only http and https, never file:// or the others; with `redirects_too`, for where a
// redirect leads as well.
void allow_only_http(CURL* handle, bool redirects_too);

// The callbacks of one transfer, each called with `user`.
struct TransferCallbacks {
    curl_write_callback on_header = nullptr;  // each line of each response's head
    curl_write_callback on_body = nullptr;
    curl_xferinfo_callback on_progress = nullptr;  // several times a second, also when no byte moves
    void* user = nullptr;
};

struct TransferResult {
    CURLcode code = CURLE_OK;
    std::string message;  // libcurl's words for `code`, "" when it is CURLE_OK
};

// Sets the callbacks (progress reports on) and runs the transfer the handle is set up for.
TransferResult run_transfer(CURL* handle, const TransferCallbacks& callbacks);

// The status code libcurl read last; 0 when none.
long response_code(CURL* handle);

// One line of a response's head as a header callback gets it (line end included).
struct HeaderLine {
    enum class Kind {
        status,  // "HTTP/1.1 200 OK": a new response (after a redirect, or "100 Continue")
        end,     // the blank line that ends a response's head
        field,   // "Name: value"
        other,   // anything else (no colon)
    };
    Kind kind = Kind::other;
    long status = 0;         // status: its code (0 when unreadable)
    std::string_view name;   // field: trimmed
    std::string_view value;  // field: trimmed
};
HeaderLine parse_header_line(std::string_view line);

// `s` without the white space (std::isspace) at either end.
std::string_view trim_space(std::string_view s);

}  // namespace powerhouse::http
