#include "remote/sse_parser.h"

namespace powerhouse::remote {

bool SseParser::feed(std::string_view bytes, std::vector<SseEvent>& out) {
    if (garbage_) return false;
    size_t start = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
        const char c = bytes[i];
        if (skip_lf_) {
            skip_lf_ = false;
            if (c == '\n') {
                start = i + 1;
                continue;
            }
        }
        if (c != '\n' && c != '\r') continue;
        line_.append(bytes.substr(start, i - start));
        start = i + 1;
        skip_lf_ = c == '\r';
        if (!take_line(line_, out)) return false;
        line_.clear();
    }
    line_.append(bytes.substr(start));
    if (line_.size() > kMaxLine) {
        garbage_ = line_.substr(0, 256);
        return false;
    }
    return true;
}

bool SseParser::finish() {
    if (garbage_) return false;
    if (line_.empty()) return true;
    std::vector<SseEvent> ignored;
    const std::string line = std::move(line_);
    line_.clear();
    const bool ok = take_line(line, ignored);
    line_ = line;  // still pending: the caller's message may mention it
    return ok;
}

bool SseParser::take_line(std::string_view line, std::vector<SseEvent>& out) {
    if (first_line_) {
        first_line_ = false;
        if (line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
    }
    if (line.empty()) {
        if (has_data_) {
            out.push_back({event_, data_, id_});
            data_.clear();
            has_data_ = false;
        }
        event_.clear();
        return true;
    }
    if (line.front() == ':') return true;  // a comment: a keep-alive
    const size_t colon = line.find(':');
    const std::string_view field = line.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (field == "data") {
        if (has_data_) data_ += '\n';
        data_.append(value);
        has_data_ = true;
    } else if (field == "error") {
        // llama.cpp's server: the answer's failure as "error: {...}" (see the header).
        event_ = "error";
        if (has_data_) data_ += '\n';
        data_.append(value);
        has_data_ = true;
    } else if (field == "event") {
        event_ = std::string(value);
    } else if (field == "id") {
        if (value.find('\0') == std::string_view::npos) id_ = std::string(value);
    } else if (field == "retry") {
        // Reconnection delay: this client never reconnects on its own.
    } else {
        garbage_ = std::string(line);
        return false;
    }
    return true;
}

}  // namespace powerhouse::remote
