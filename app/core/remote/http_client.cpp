#include "remote/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "http_curl.h"
#include "remote/http_date.h"
#include "remote/remote_url.h"

namespace powerhouse::remote::detail {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxErrorBody = 64 * 1024;

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

// What the curl callbacks share during one transfer.
struct Transfer {
    const ConnectionOptions* options = nullptr;
    const BodySink* on_body = nullptr;
    const std::function<bool()>* cancelled = nullptr;
    HttpOutcome* outcome = nullptr;
    CURL* handle = nullptr;
    Clock::time_point start;
    Clock::time_point last_byte;
    bool any_byte = false;
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t bytes = size * count;
    const http::HeaderLine line = http::parse_header_line(std::string_view(data, bytes));
    HttpOutcome& o = *t->outcome;
    switch (line.kind) {
        case http::HeaderLine::Kind::status:
            // A new response (after "100 Continue"): its own headers start from nothing.
            o.status = line.status;
            o.content_type.clear();
            o.retry_after_seconds.reset();
            o.location.clear();
            o.head_complete = false;
            break;
        case http::HeaderLine::Kind::end:
            if (o.status >= 200) o.head_complete = true;
            break;
        case http::HeaderLine::Kind::field:
            if (iequals(line.name, "Content-Type")) {
                std::string type(http::trim_space(line.value.substr(0, line.value.find(';'))));
                std::transform(type.begin(), type.end(), type.begin(),
                               [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
                o.content_type = std::move(type);
            } else if (iequals(line.name, "Retry-After")) {
                o.retry_after_seconds = parse_retry_after(
                    line.value, std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
            } else if (iequals(line.name, "Location")) {
                o.location = std::string(http::trim_space(line.value));
            }
            break;
        case http::HeaderLine::Kind::other:
            break;
    }
    return bytes;
}

size_t on_body_bytes(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t bytes = size * count;
    HttpOutcome& o = *t->outcome;
    t->any_byte = true;
    t->last_byte = Clock::now();
    o.body_bytes += bytes;
    if (o.status < 200 || o.status >= 300) {
        // An error's body: kept (bounded) for the server's message.
        const size_t room = kMaxErrorBody - std::min(kMaxErrorBody, o.error_body.size());
        o.error_body.append(data, std::min(room, bytes));
        return bytes;
    }
    if (*t->on_body && !(*t->on_body)(std::string_view(data, bytes), o)) {
        if (o.stop == Stop::none) o.stop = Stop::sink;
        return 0;  // CURLE_WRITE_ERROR
    }
    return bytes;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* t = static_cast<Transfer*>(user);
    HttpOutcome& o = *t->outcome;
    if (*t->cancelled && (*t->cancelled)()) {
        o.stop = Stop::cancelled;
        return 1;  // CURLE_ABORTED_BY_CALLBACK
    }
    const Clock::time_point now = Clock::now();
    if (!t->any_byte) {
        // Connecting has curl's own timeout; this one starts once the request can go out
        // (connected, TLS done): PRETRANSFER stays 0 until then.
        curl_off_t pretransfer_us = 0;
        curl_easy_getinfo(t->handle, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us);
        if (pretransfer_us > 0 && now - t->start > std::chrono::microseconds(pretransfer_us) + o.first_byte_timeout) {
            o.stop = Stop::first_byte_timeout;
            return 1;
        }
    } else if (now - t->last_byte > t->options->idle_timeout) {
        o.stop = Stop::idle_timeout;
        return 1;
    }
    return 0;
}

std::string seconds_text(std::chrono::milliseconds ms) {
    const double s = static_cast<double>(ms.count()) / 1000.0;
    return s == static_cast<double>(static_cast<int64_t>(s)) ? fmt::format("{} s", static_cast<int64_t>(s))
                                                             : fmt::format("{:.1f} s", s);
}

}  // namespace

HttpOutcome perform(const HttpRequest& request, const ConnectionOptions& options, const BodySink& on_body,
                    const std::function<bool()>& cancelled) {
    HttpOutcome outcome;
    outcome.metadata = request.metadata;
    outcome.first_byte_timeout =
        request.metadata ? std::min(options.metadata_timeout, options.first_byte_timeout) : options.first_byte_timeout;
    http::CurlGlobal global;
    http::EasyHandle handle(global.ok() ? curl_easy_init() : nullptr);
    if (!handle) {
        outcome.curl_code = CURLE_FAILED_INIT;
        outcome.curl_message = http::kInitFailed;
        return outcome;
    }
    CURL* h = handle.get();
    Transfer transfer;
    transfer.options = &options;
    transfer.on_body = &on_body;
    transfer.cancelled = &cancelled;
    transfer.outcome = &outcome;
    transfer.handle = h;
    transfer.start = Clock::now();

    curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
    http::allow_only_http(h, false);
    // No redirects: a POST must not turn into a GET elsewhere, nor the key reach another host.
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM-based timeouts
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout.count()));
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, options.user_agent.c_str());
    // TLS: verification stays on (curl's default, set anyway so no default can change it).
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    const std::string ca_file = options.ca_file.string();
    if (!ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, ca_file.c_str());
    // Small reads: a streamed answer's events should reach the caller as they come.
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 16L * 1024);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");  // whatever curl can decode (metrics compress well)

    http::HeaderList headers;
    auto add_header = [&](const std::string& line) {
        headers.reset(curl_slist_append(headers.release(), line.c_str()));
    };
    add_header("Accept: " + request.accept);
    if (!options.api_key.empty()) {
        // Through curl's bearer option rather than a header line of ours: libcurl sends it to
        // this host only, and no list of ours that might be printed ever holds it.
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BEARER));
        curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, options.api_key.c_str());
    }
    if (!request.post_body.empty()) {
        add_header("Content-Type: application/json");
        add_header("Expect:");  // no "100 Continue" round trip
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.post_body.c_str());
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.post_body.size()));
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());

    http::TransferResult result = http::run_transfer(h, {on_header, on_body_bytes, on_progress, &transfer});
    outcome.curl_code = result.code;
    outcome.curl_message = std::move(result.message);
    if (outcome.status == 0) outcome.status = http::response_code(h);
    outcome.seconds = std::chrono::duration<double>(Clock::now() - transfer.start).count();
    return outcome;
}

Error transport_error(const HttpOutcome& o, const ConnectionOptions& options, std::string_view what) {
    switch (o.stop) {
        case Stop::cancelled:
            return make_error(ErrorCode::cancelled, fmt::format("{}: cancelled", what));
        case Stop::first_byte_timeout:
            if (o.metadata) {
                return make_error(
                    ErrorCode::io,
                    fmt::format("{}: no answer came for {} after the request was sent, though the server accepted "
                                "the connection: a healthy server answers this at once. Check that the server is "
                                "running and not stuck or overloaded (its log), and that the URL is its address "
                                "and port, not another program's",
                                what, seconds_text(o.first_byte_timeout)));
            }
            return make_error(ErrorCode::io,
                              fmt::format("{}: no answer came for {} after the request was sent (the server may "
                                          "be overloaded, or stuck): try again later, or check the server",
                                          what, seconds_text(o.first_byte_timeout)));
        case Stop::idle_timeout:
            return make_error(ErrorCode::io, fmt::format("{}: the server went silent for {} in the middle of its "
                                                         "answer: it may be overloaded or stuck; check the server",
                                                         what, seconds_text(options.idle_timeout)));
        case Stop::too_large:
            return make_error(ErrorCode::format,
                              fmt::format("{}: the answer is larger than any such answer should be", what));
        case Stop::sink:
        case Stop::none:
            break;
    }
    const std::string detail = printable(o.curl_message, 300);
    // Most failures read "WHAT: CAUSE (libcurl's words): REMEDY".
    const auto failed = [&](ErrorCode code, std::string_view cause, std::string_view remedy) {
        return make_error(code, fmt::format("{}: {} ({}): {}", what, cause, detail, remedy));
    };
    switch (static_cast<CURLcode>(o.curl_code)) {
        case CURLE_OK:
            return make_error(ErrorCode::internal, fmt::format("{}: no failure to describe", what));
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
            return failed(ErrorCode::io, "the host name does not resolve",
                          "check the URL's host, and this machine's DNS");
        case CURLE_COULDNT_CONNECT:
            return failed(ErrorCode::io, "cannot connect",
                          "is the server running, and listening on that address and port?");
        case CURLE_OPERATION_TIMEDOUT:
            return failed(ErrorCode::io,
                          fmt::format("connecting timed out after {}", seconds_text(options.connect_timeout)),
                          "the host may be down, or a firewall drops the connection");
        case CURLE_PEER_FAILED_VERIFICATION:
#if LIBCURL_VERSION_NUM < 0x073e00
        case CURLE_SSL_CACERT:
#endif
            return make_error(ErrorCode::io,
                              fmt::format("{}: TLS error: the server's certificate cannot be trusted ({}). If the "
                                          "server uses a private CA or a self-signed certificate, give that "
                                          "certificate as the CA file; if the name does not match, use the name "
                                          "the certificate was made for",
                                          what, detail));
        case CURLE_SSL_CACERT_BADFILE:
            return failed(ErrorCode::io,
                          fmt::format("TLS error: the CA file {} cannot be read", options.ca_file.string()),
                          "give a file of PEM certificates");
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
        case CURLE_USE_SSL_FAILED:
            if (o.curl_message.find("wrong version number") != std::string::npos ||
                o.curl_message.find("packet length too long") != std::string::npos) {
                return failed(ErrorCode::io, "TLS error",
                              "the server does not speak TLS on that port; is it a plain http:// server?");
            }
            return failed(ErrorCode::io, "TLS error",
                          "the secure connection could not be set up; check the URL and the server's TLS setup");
        case CURLE_UNSUPPORTED_PROTOCOL:
        case CURLE_WEIRD_SERVER_REPLY:
            return failed(ErrorCode::format, "the server's answer is not HTTP",
                          "is it an https:// server, or not a web server at all?");
        case CURLE_GOT_NOTHING:
            return failed(ErrorCode::io, "the server closed the connection without answering",
                          "check the server's log");
        case CURLE_PARTIAL_FILE:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
            return failed(ErrorCode::io, "the connection broke", "the server or the network dropped it");
        default:
            return make_error(ErrorCode::io, fmt::format("{}: {}", what, detail));
    }
}

std::string status_text(long status) {
    const char* phrase = nullptr;
    switch (status) {
        case 301:
            phrase = "Moved Permanently";
            break;
        case 302:
            phrase = "Found";
            break;
        case 303:
            phrase = "See Other";
            break;
        case 307:
            phrase = "Temporary Redirect";
            break;
        case 308:
            phrase = "Permanent Redirect";
            break;
        case 400:
            phrase = "Bad Request";
            break;
        case 401:
            phrase = "Unauthorized";
            break;
        case 403:
            phrase = "Forbidden";
            break;
        case 404:
            phrase = "Not Found";
            break;
        case 405:
            phrase = "Method Not Allowed";
            break;
        case 408:
            phrase = "Request Timeout";
            break;
        case 413:
            phrase = "Payload Too Large";
            break;
        case 422:
            phrase = "Unprocessable Entity";
            break;
        case 429:
            phrase = "Too Many Requests";
            break;
        case 500:
            phrase = "Internal Server Error";
            break;
        case 501:
            phrase = "Not Implemented";
            break;
        case 502:
            phrase = "Bad Gateway";
            break;
        case 503:
            phrase = "Service Unavailable";
            break;
        case 504:
            phrase = "Gateway Timeout";
            break;
        default:
            break;
    }
    return phrase != nullptr ? fmt::format("HTTP {} ({})", status, phrase) : fmt::format("HTTP {}", status);
}

// The length of the well-formed UTF-8 character at the start of `text` (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF), or 0 when it starts with none.
size_t utf8_character(std::string_view text, char32_t& code) {
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = byte(0);
    size_t length = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
        code = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        code = lead & 0x0F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        code = lead & 0x07;
    } else {
        return 0;
    }
    if (text.size() < length) return 0;
    for (size_t i = 1; i < length; ++i) {
        if ((byte(i) & 0xC0) != 0x80) return 0;
        code = (code << 6) | (byte(i) & 0x3F);
    }
    const char32_t least = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
    if (code < least || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
    return length;
}

std::string printable(std::string_view text, size_t limit) {
    std::string out;
    size_t i = 0;
    while (i < text.size() && out.size() < limit) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (c < 0x80) {
            if (c == '\n') {
                out += "\\n";
            } else if (c == '\r') {
                out += "\\r";
            } else if (c == '\t') {
                out += ' ';
            } else if (c < 0x20 || c == 0x7f) {
                out += fmt::format("\\x{:02x}", c);
            } else {
                out += static_cast<char>(c);
            }
            ++i;
            continue;
        }
        // Text is kept as it is; a byte that starts no UTF-8 character (a binary body) is
        // escaped, and so are the C1 controls (U+0080 to U+009F), which terminals obey.
        char32_t code = 0;
        const size_t length = utf8_character(text.substr(i), code);
        if (length == 0) {
            out += fmt::format("\\x{:02x}", c);
            ++i;
        } else if (code <= 0x9F) {
            out += fmt::format("\\u{:04x}", static_cast<uint32_t>(code));
            i += length;
        } else {
            out.append(text.substr(i, length));
            i += length;
        }
    }
    if (i < text.size()) out += "...";
    return out;
}

std::string server_message(std::string_view body, std::string_view secret) {
    std::string message;
    const nlohmann::json json = nlohmann::json::parse(body, nullptr, false);
    if (!json.is_discarded() && json.is_object()) {
        auto text_of = [](const nlohmann::json& v) -> std::string {
            if (v.is_string()) return v.get<std::string>();
            if (v.is_object() && v.contains("message") && v["message"].is_string())
                return v["message"].get<std::string>();
            if (v.is_array()) {  // FastAPI's validation errors: [{"loc": [...], "msg": "..."}]
                std::string all;
                for (const auto& item : v) {
                    if (item.is_object() && item.contains("msg") && item["msg"].is_string()) {
                        all += (all.empty() ? "" : "; ") + item["msg"].get<std::string>();
                    }
                }
                return all;
            }
            return {};
        };
        for (const char* key : {"error", "message", "detail"}) {
            if (json.contains(key)) message = text_of(json[key]);
            if (!message.empty()) break;
        }
    } else {
        const std::string_view text = http::trim_space(body);
        if (!text.empty() && text.front() != '<') message = std::string(text.substr(0, text.find('\n')));
    }
    return quoted(http::trim_space(message), secret, 400);
}

std::string blank_secret(std::string_view text, std::string_view secret) {
    std::string out(text);
    if (secret.empty()) return out;
    static constexpr std::string_view kBlank = "[the key]";
    // The key as written, as JSON escapes it ('"', '\\' and controls), and with '/' escaped
    // too, as some JSON writers do.
    const std::string dumped =
        nlohmann::json(std::string(secret)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    const std::string escaped = dumped.substr(1, dumped.size() - 2);
    std::string slashed;
    for (const char c : escaped) slashed += c == '/' ? std::string("\\/") : std::string(1, c);
    std::vector<std::string> forms{std::string(secret)};
    for (std::string form : {escaped, slashed}) {
        if (std::find(forms.begin(), forms.end(), form) == forms.end()) forms.push_back(std::move(form));
    }
    for (const std::string& form : forms) {
        for (size_t at = out.find(form); at != std::string::npos; at = out.find(form, at + kBlank.size())) {
            out.replace(at, form.size(), kBlank);
        }
    }
    return out;
}

std::string quoted(std::string_view text, std::string_view secret, size_t limit) {
    return printable(blank_secret(text, secret), limit);
}

}  // namespace powerhouse::remote::detail
