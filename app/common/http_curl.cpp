#include "http_curl.h"

#include <cctype>
#include <charconv>

namespace powerhouse::http {

std::string_view trim_space(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

CurlGlobal::CurlGlobal() : ok_(curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK) {}

CurlGlobal::~CurlGlobal() {
    if (ok_) curl_global_cleanup();
}

void allow_only_http(CURL* handle, bool redirects_too) {
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
    if (redirects_too) curl_easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(handle, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    if (redirects_too) {
        curl_easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    }
#endif
}

TransferResult run_transfer(CURL* handle, const TransferCallbacks& callbacks) {
    char error_buffer[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, callbacks.on_header);
    curl_easy_setopt(handle, CURLOPT_HEADERDATA, callbacks.user);
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callbacks.on_body);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, callbacks.user);
    curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callbacks.on_progress);
    curl_easy_setopt(handle, CURLOPT_XFERINFODATA, callbacks.user);
    curl_easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);

    TransferResult result;
    result.code = curl_easy_perform(handle);
    if (result.code != CURLE_OK) {
        result.message = error_buffer[0] != 0 ? error_buffer : curl_easy_strerror(result.code);
    }
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, static_cast<char*>(nullptr));  // the buffer ends here
    return result;
}

long response_code(CURL* handle) {
    long status = 0;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

HeaderLine parse_header_line(std::string_view raw) {
    const std::string_view line = trim_space(raw);
    HeaderLine out;
    if (line.substr(0, 5) == "HTTP/") {
        out.kind = HeaderLine::Kind::status;
        const size_t space = line.find(' ');
        if (space != std::string_view::npos) {
            const std::string_view code = line.substr(space + 1, 3);
            std::from_chars(code.data(), code.data() + code.size(), out.status);
        }
        return out;
    }
    if (line.empty()) {
        out.kind = HeaderLine::Kind::end;
        return out;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return out;
    out.kind = HeaderLine::Kind::field;
    out.name = trim_space(line.substr(0, colon));
    out.value = trim_space(line.substr(colon + 1));
    return out;
}

}  // namespace powerhouse::http
