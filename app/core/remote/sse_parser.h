// An incremental parser of server-sent events (the HTML standard's "text/event-stream"), the
// framing of every OpenAI-compatible streamed answer.
//
// Bytes arrive as the network hands them over: an event, a line, even a UTF-8 character may be
// split across reads, so the parser keeps what it has not yet seen the end of. Lines end with
// "\n", "\r\n" or "\r" (sse-starlette, behind llama-cpp-python and vLLM, writes "\r\n").
// "data:" lines are joined with "\n" into the event's data; "event:", "id:" and "retry:" are
// kept or ignored as the standard says; lines starting with ':' are comments (keep-alives). A
// blank line dispatches the event.
//
// Two departures from the standard, on purpose. A line whose field is none of data, event, id,
// retry and error is reported as garbage instead of being ignored: a stream that carries such
// lines is not an SSE stream (an HTML error page from a proxy, a plain-text log), and saying so
// beats waiting for an answer that will never parse. And an "error:" line, which llama.cpp's
// server writes when an answer fails after its 200 was sent ("error: {...}", a blank line),
// makes its event an "error" event with that line as its data, as "event: error" and
// "data: {...}" would: the caller reads the server's message instead of garbage.
//
// Thread-safety: one parser per stream, used by one thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace powerhouse::remote {

struct SseEvent {
    std::string event;  // "" unless the server named it ("message" is the default type), or "error"
    std::string data;   // the data lines joined with "\n"
    std::string id;
};

class SseParser {
public:
    // Longest line kept whole: beyond it the stream is garbage (a line longer than any answer
    // chunk), and memory stays bounded whatever the server sends.
    static constexpr size_t kMaxLine = 4 * 1024 * 1024;

    // Feeds bytes; complete events are appended to `out`. Returns false, with garbage() set,
    // when a line is not SSE (then the rest is not parsed).
    bool feed(std::string_view bytes, std::vector<SseEvent>& out);
    // The end of the stream: an event whose blank line never came is not dispatched (the
    // standard's rule), but is reported through pending_data() for the caller's message.
    bool has_pending() const { return !line_.empty() || !data_.empty(); }
    // The end of the stream, for a last line without its line end (an HTML page, a text
    // that is not SSE): false, with garbage() set, when that line is not SSE. Dispatches
    // nothing.
    bool finish();
    const std::string& pending_data() const { return data_; }

    // The offending line when feed() returned false.
    const std::optional<std::string>& garbage() const { return garbage_; }

private:
    bool take_line(std::string_view line, std::vector<SseEvent>& out);

    std::string line_;      // the current line so far
    bool skip_lf_ = false;  // the last line ended with '\r': a '\n' right after belongs to it
    bool has_data_ = false;
    bool first_line_ = true;  // a UTF-8 byte-order mark may open the stream
    std::string data_;
    std::string event_;
    std::string id_;
    std::optional<std::string> garbage_;
};

}  // namespace powerhouse::remote
