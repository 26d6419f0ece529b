// Reading gpt-oss's harmony answers: the text after the prompt's `<|start|>assistant` is a
// run of messages, each a header (`<|channel|>NAME`, maybe ` to=RECIPIENT` before or
// after it, maybe `<|constrain|>json`) then `<|message|>` and a body that ends at
// <|end|>, <|call|> or <|return|> (the last two end the generation and are usually
// hidden, so the end of the text ends a message too), and the next begins with
// `<|start|>assistant`.
#include <array>

#include "template/tool_call_reading.h"

namespace powerhouse::tool_reading {

namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kConstrain = "<|constrain|>";
constexpr std::array<std::string_view, 7> kTokens = {kStart,    kChannel,   kMessage,    kConstrain,
                                                     "<|end|>", "<|call|>", "<|return|>"};
constexpr std::string_view kFunctions = "functions.";

// The word at `pos`: up to whitespace or the next control token.
std::string word_at(std::string_view text, size_t pos) {
    while (pos < text.size() && text[pos] == ' ') ++pos;
    size_t end = pos;
    while (end < text.size() && !is_space(text[end]) && text[end] != '<') ++end;
    return std::string(text.substr(pos, end - pos));
}

// The recipient in a header: the word after "to=" standing on its own.
std::string recipient_of(std::string_view header) {
    for (size_t pos = header.find("to="); pos != std::string_view::npos; pos = header.find("to=", pos + 1)) {
        if (pos == 0 || is_space(header[pos - 1]) || header[pos - 1] == '>') return word_at(header, pos + 3);
    }
    return {};
}

}  // namespace

void HarmonyReader::read(std::string_view text, bool at_end) {
    while (pos_ < text.size() && (at_end || !held_)) {
        if (state_ == State::body && kind_ == Kind::call && body_.empty()) {
            // The arguments end where their brackets close: a string in them may spell a
            // control token. (Only a whole answer gets here: a stream holds at a call.)
            size_t open = pos_;
            while (open < text.size() && is_space(text[open])) ++open;
            const size_t end =
                open < text.size() && text[open] == '{' ? json_extent(text, open) : std::string_view::npos;
            if (end != std::string_view::npos) {
                body_.assign(text.substr(pos_, end - pos_));
                pos_ = end;
                continue;
            }
        }
        const size_t open = text.find("<|", pos_);
        if (open == std::string_view::npos) {
            size_t end = text.size();
            if (!at_end && text.back() == '<') --end;  // may become "<|"
            text_run(text.substr(pos_, end - pos_));
            pos_ = end;
            break;
        }
        text_run(text.substr(pos_, open - pos_));
        pos_ = open;
        const std::string_view rest = text.substr(open);
        std::string_view token;
        bool partial = false;
        for (const std::string_view t : kTokens) {
            if (rest.starts_with(t)) {
                token = t;
                break;
            }
            if (t.starts_with(rest)) partial = true;
        }
        if (!token.empty()) {
            control(token);
            pos_ += token.size();
            continue;
        }
        if (partial && !at_end) break;  // wait for the rest of the token
        text_run("<|");                 // not harmony's: text
        pos_ += 2;
    }
    if (!at_end) return;
    if (state_ == State::body) end_message();  // a header cut off is dropped: it says nothing
    if (loose_open_) content.end_piece();
    loose_open_ = false;
    state_ = State::loose;
}

void HarmonyReader::text_run(std::string_view run) {
    if (run.empty()) return;
    switch (state_) {
        case State::loose:
            // Text outside any message (a model that ignores the format) is content.
            if (!loose_open_) content.begin_piece();
            loose_open_ = true;
            content.add(run);
            break;
        case State::header:
            header_.append(run);
            break;
        case State::body:
            if (kind_ == Kind::content) content.add(run);
            if (kind_ == Kind::reasoning) reasoning.add(run);
            if (kind_ == Kind::call) body_.append(run);
            break;
    }
}

void HarmonyReader::control(std::string_view token) {
    if (loose_open_) {
        content.end_piece();
        loose_open_ = false;
    }
    if (token == kStart) {
        if (state_ == State::body) end_message();
        state_ = State::header;
        header_.clear();
    } else if (token == kChannel) {
        // The answer's first message has no <|start|> (the prompt wrote it); a message
        // that was never ended ends here.
        if (state_ != State::header) {
            if (state_ == State::body) end_message();
            state_ = State::header;
            header_.clear();
        }
        header_.append(token);
    } else if (token == kConstrain) {
        if (state_ == State::header) header_.append(token);
    } else if (token == kMessage) {
        if (state_ == State::header) begin_body();
    } else {  // <|end|>, <|call|>, <|return|>
        if (state_ == State::body) end_message();
        state_ = State::loose;
        header_.clear();
    }
}

void HarmonyReader::begin_body() {
    std::string channel;
    if (const size_t c = header_.rfind(kChannel); c != std::string::npos) {
        channel = word_at(header_, c + kChannel.size());
    }
    const std::string recipient = recipient_of(header_);
    if (recipient.starts_with(kFunctions) && recipient.size() > kFunctions.size()) {
        kind_ = Kind::call;
        function_ = recipient.substr(kFunctions.size());
        body_.clear();
        held_ = true;
    } else if (!recipient.empty() || channel == "analysis") {
        // Built-in tools (browser, python) are the model's own business: reasoning.
        kind_ = Kind::reasoning;
        reasoning.begin_piece();
    } else {
        // final, and commentary without a recipient (a preamble meant for the user).
        kind_ = Kind::content;
        content.begin_piece();
    }
    state_ = State::body;
}

void HarmonyReader::end_message() {
    switch (kind_) {
        case Kind::content:
            content.end_piece();
            break;
        case Kind::reasoning:
            reasoning.end_piece();
            break;
        case Kind::call: {
            const std::optional<nlohmann::ordered_json> arguments = parse_json(body_);
            if (arguments && arguments->is_object()) {
                calls.push_back(ToolCall{{}, function_, compact_json(*arguments)});
            } else {
                content.begin_piece();  // a call that does not parse is shown as it is
                content.add(body_);
                content.end_piece();
            }
            break;
        }
    }
    state_ = State::loose;
}

}  // namespace powerhouse::tool_reading
