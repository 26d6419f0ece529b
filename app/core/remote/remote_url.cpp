#include "remote/remote_url.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace powerhouse::remote {
namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string join(const UrlParts& p, std::string_view path) {
    const bool ipv6 = p.host.find(':') != std::string::npos;
    std::string out = p.scheme + "://" + (ipv6 ? "[" + p.host + "]" : p.host);
    if (!p.port.empty()) out += ":" + p.port;
    out += path;
    return out;
}

}  // namespace

Result<UrlParts> split_url(std::string_view url) {
    url = trim(url);
    const size_t scheme_end = url.find("://");
    if (scheme_end == std::string_view::npos) {
        if (url.find('@') != std::string_view::npos) {
            // Not echoed: "user:password@host" without its scheme holds a secret too.
            return make_error(ErrorCode::invalid_argument,
                              "the URL has no http:// or https:// and holds credentials (user:password@host): "
                              "write it with http:// or https://, without them, and give the API key separately, "
                              "where it is never shown");
        }
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("'{}' is not a URL: write it with http:// or https://, e.g. "
                                      "http://127.0.0.1:8000/v1",
                                      url));
    }
    UrlParts parts;
    parts.scheme = lower(url.substr(0, scheme_end));
    if (parts.scheme != "http" && parts.scheme != "https") {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("'{}' is not an http:// or https:// URL", url.substr(0, scheme_end + 3)));
    }
    std::string_view rest = url.substr(scheme_end + 3);
    if (rest.find_first_of("?#") != std::string_view::npos) {
        return make_error(ErrorCode::invalid_argument,
                          "the URL has a query or a fragment ('?' or '#'): give the server's address and path only");
    }
    const size_t path_start = rest.find('/');
    const std::string_view authority = rest.substr(0, path_start);
    parts.path = path_start == std::string_view::npos ? std::string() : std::string(rest.substr(path_start));
    if (authority.find('@') != std::string_view::npos) {
        // Not echoed: the part before '@' is a secret.
        return make_error(ErrorCode::invalid_argument,
                          "the URL holds credentials (user:password@host): remove them and give the API key "
                          "separately, where it is never shown");
    }
    std::string_view host = authority;
    if (!host.empty() && host.front() == '[') {
        const size_t close = host.find(']');
        if (close == std::string_view::npos) {
            return make_error(ErrorCode::invalid_argument, fmt::format("'{}': an IPv6 address lacks its ']'", url));
        }
        parts.host = std::string(host.substr(1, close - 1));
        std::string_view after = host.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':')
                return make_error(ErrorCode::invalid_argument, fmt::format("'{}' is not a URL", url));
            parts.port = std::string(after.substr(1));
        }
    } else {
        const size_t colon = host.rfind(':');
        if (colon != std::string_view::npos) {
            parts.port = std::string(host.substr(colon + 1));
            host = host.substr(0, colon);
        }
        parts.host = lower(host);
    }
    if (parts.host.empty()) return make_error(ErrorCode::invalid_argument, fmt::format("'{}' names no host", url));
    if (!parts.port.empty()) {
        if (!std::all_of(parts.port.begin(), parts.port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
            return make_error(ErrorCode::invalid_argument, fmt::format("'{}': the port must be a number", url));
        }
        // By value, not by its digits: "70000" has five.
        unsigned long port = 0;
        const char* end = parts.port.data() + parts.port.size();
        const auto [stop, failure] = std::from_chars(parts.port.data(), end, port);
        if (failure != std::errc() || stop != end || port == 0 || port > 65535) {
            return make_error(ErrorCode::invalid_argument,
                              fmt::format("'{}': the port {} does not exist: a port is a number from 1 to 65535 "
                                          "(vLLM and SGLang listen on 8000 by default, llama.cpp's server on 8080)",
                                          url, parts.port));
        }
    }
    return parts;
}

Result<std::string> normalize_base_url(std::string_view url) {
    Result<UrlParts> parts = split_url(url);
    if (!parts) return parts.error();
    std::string path = parts->path;
    while (!path.empty() && path.back() == '/') path.pop_back();
    for (std::string_view endpoint : {"/chat/completions", "/completions", "/models"}) {
        if (ends_with(path, endpoint)) {
            path.resize(path.size() - endpoint.size());
            break;
        }
    }
    while (!path.empty() && path.back() == '/') path.pop_back();
    // A bare host gets the prefix every OpenAI-compatible server serves; a path is the user's
    // (or the provider's documented base URL: Gemini's ".../v1beta/openai") and is kept.
    if (path.empty()) path = "/v1";
    return join(*parts, path);
}

Result<std::string> normalize_metrics_url(std::string_view url) {
    Result<UrlParts> parts = split_url(url);
    if (!parts) return parts.error();
    std::string path = parts->path;
    if (path.empty() || path == "/") path = "/metrics";
    return join(*parts, path);
}

bool same_origin(std::string_view a, std::string_view b) {
    Result<UrlParts> x = split_url(a);
    Result<UrlParts> y = split_url(b);
    if (!x || !y) return false;
    const auto port = [](const UrlParts& p) { return p.port.empty() ? (p.scheme == "https" ? "443" : "80") : p.port; };
    return x->scheme == y->scheme && lower(x->host) == lower(y->host) && port(*x) == port(*y);
}

bool is_loopback_host(std::string_view host) {
    return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0 || ends_with(host, ".localhost");
}

std::optional<std::string> plain_http_warning(std::string_view url) {
    Result<UrlParts> parts = split_url(url);
    if (!parts || parts->scheme != "http" || is_loopback_host(parts->host)) return std::nullopt;
    return fmt::format(
        "{} is plain http to another machine: prompts, answers and the API key cross the network "
        "unencrypted; use https:// (or a tunnel) unless this network is private",
        url);
}

}  // namespace powerhouse::remote
