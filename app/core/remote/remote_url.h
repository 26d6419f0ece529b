// The URLs of remote engines and metrics endpoints: checked, normalised, and judged for
// transport safety before anything is sent.
//
// A base URL is the prefix that "/models" and "/chat/completions" follow. People write a
// bare host, a provider's documented base URL, or paste a whole endpoint, so it is normalised
// once, when the engine is made, rather than guessed at each request.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "powerhouse/result.h"

namespace powerhouse::remote {

// The parts of an http(s) URL this library looks at.
struct UrlParts {
    std::string scheme;  // "http" or "https", lower case
    std::string host;    // "10.0.0.5", "gpu-node", "::1" (IPv6 without its brackets)
    std::string port;    // "" when the URL names none
    std::string path;    // "" or "/..." (no query, no fragment)
};

// Splits an http:// or https:// URL. Refused: other schemes, no host, credentials in the URL
// (user:password@: a key belongs in the key option, where it is never shown), and queries or
// fragments (a base URL takes paths only).
Result<UrlParts> split_url(std::string_view url);

// "http://host:8000", "http://host:8000/", "http://host:8000/v1/",
// "http://host:8000/v1/chat/completions" -> "http://host:8000/v1". A pasted endpoint
// ("/chat/completions", "/completions", "/models") and trailing slashes are cut off; a URL
// with no path left gets "/v1", the prefix every OpenAI-compatible server serves; any other
// path is used as given, as OpenAI's clients use a base URL ("/api/v2",
// "https://generativelanguage.googleapis.com/v1beta/openai", a proxy's "/openai": write
// ".../openai/v1" if the server behind it answers there). Normalising twice changes nothing.
Result<std::string> normalize_base_url(std::string_view url);

// A metrics URL as given, with "/metrics" added when it has no path ("http://host:9400").
Result<std::string> normalize_metrics_url(std::string_view url);

// Whether two URLs reach the same server: the same scheme, host (case-insensitive) and port
// (the scheme's default when none is written). False when either is not a URL. An endpoint's
// API key goes to its metrics URL only when they share the origin: a key is never sent to
// another server (a DCGM exporter on another port) than the one it was given for.
bool same_origin(std::string_view a, std::string_view b);

// localhost, 127.0.0.0/8 and ::1.
bool is_loopback_host(std::string_view host);

// A warning when the URL is plain http to another machine: prompts, answers and the API key
// would cross the network readable by anyone on the way. nullopt for https and loopback.
std::optional<std::string> plain_http_warning(std::string_view url);

}  // namespace powerhouse::remote
