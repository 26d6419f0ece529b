// One HTTP request to a remote engine through libcurl (internal to powerhouse_remote): the
// options every request shares (http/https only, no redirects, TLS verified, an optional CA
// file, the API key as a bearer token), the timeouts, cancellation, and the response's status,
// headers and body.
//
// Timeouts are measured here rather than left to libcurl's stall detection, because the three
// waits of a streamed answer differ by orders of magnitude: connecting takes milliseconds, the
// first event may wait for a queue and a long prompt, and after that a healthy server sends
// something every fraction of a second. Each is checked from curl's progress callback, which
// curl calls several times a second while a transfer runs, also when no byte moves.
//
// Thread-safety: each call uses its own curl handle; the callbacks run on the calling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "remote/remote_engine.h"

namespace powerhouse::remote::detail {

struct HttpRequest {
    std::string url;
    std::string post_body;  // empty: GET; else POST with Content-Type: application/json
    std::string accept = "application/json";
    // A small request (the model list, metrics): its first byte is waited for
    // ConnectionOptions::metadata_timeout at most, not a generation's first_byte_timeout.
    bool metadata = false;
};

// Why the transfer was stopped by this side.
enum class Stop {
    none,
    cancelled,           // the caller's cancel callback said so
    first_byte_timeout,  // no body byte within HttpOutcome::first_byte_timeout
    idle_timeout,        // no byte for ConnectionOptions::idle_timeout after the first
    sink,                // the body sink asked to stop (the stream ended, or it was garbage)
    too_large,           // a body past the limit for its kind
};

struct HttpOutcome {
    int curl_code = 0;         // CURLcode
    std::string curl_message;  // libcurl's words for it, "" when curl_code is 0
    Stop stop = Stop::none;
    long status = 0;
    bool head_complete = false;  // the final response's headers were all read
    std::string content_type;    // lower case, parameters cut: "text/event-stream"
    std::optional<double> retry_after_seconds;
    std::string location;    // a redirect's Location, as the server wrote it
    std::string error_body;  // the body of a non-2xx answer, at most 64 KiB
    uint64_t body_bytes = 0;
    double seconds = 0;  // from the start of the call to its end
    // The wait for the first byte that applied, and whether it was a small request's.
    std::chrono::milliseconds first_byte_timeout{0};
    bool metadata = false;
};

// Performs the request. `on_body` gets the bytes of a 2xx answer as they arrive, with the
// outcome so far (status and headers are complete by then); false stops the transfer
// (Stop::sink). `cancelled` is polled several times a second (true: Stop::cancelled).
using BodySink = std::function<bool(std::string_view bytes, const HttpOutcome& head)>;
HttpOutcome perform(const HttpRequest& request, const ConnectionOptions& options, const BodySink& on_body,
                    const std::function<bool()>& cancelled);

// An Error for a transfer that failed before an HTTP answer, or that stopped on its own
// (timeouts; not cancellation, nor the sink): what happened, to which server, and what to
// do. `what` names the request ("listing the models of http://..."), never with a key.
Error transport_error(const HttpOutcome& outcome, const ConnectionOptions& options, std::string_view what);

// "HTTP 503 (Service Unavailable)".
std::string status_text(long status);

// A server's words for its failure from an error body: an OpenAI error object's message,
// vLLM's and FastAPI's shapes, or the first line of plain text; "" when none (an HTML page).
// Truncated; `secret` (the API key) is blanked wherever the server echoed it.
std::string server_message(std::string_view body, std::string_view secret);

// `text` with every occurrence of `secret` (the API key) replaced by "[the key]", both as
// written and as JSON escapes it (a raw body is quoted as it came). Servers echo the key they
// were given (in an error, a URL, a page), so every piece of a server's text that reaches a
// message goes through this, or through quoted() or server_message(), which use it.
std::string blank_secret(std::string_view text, std::string_view secret);

// A server's text (a body, an event, a header) fit to quote in a message: the key blanked,
// then printable().
std::string quoted(std::string_view text, std::string_view secret, size_t limit = 200);

// A piece of untrusted text fit for a message and a terminal: valid UTF-8 kept as it is
// ("café"), control characters (C0, DEL and C1) and bytes that are not UTF-8 (a binary
// body) escaped as \n, \xNN or \uNNNN; about `limit` bytes, cut between characters with
// "..." added.
std::string printable(std::string_view text, size_t limit = 200);

}  // namespace powerhouse::remote::detail
