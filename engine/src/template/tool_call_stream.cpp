// ToolCallStream: the content and reasoning of an answer as it streams, read by the same
// code as a whole answer (tool_call_reading.h), stopping wherever more text could still
// change what it is.
#include "powerhouse/tool_calls.h"

#include <algorithm>
#include <array>

#include "template/tool_call_reading.h"

namespace powerhouse {

using tool_reading::ContentJoiner;
using tool_reading::Opening;

namespace {

// What of `joined` (a ContentJoiner's text, which only grows) has not been returned yet.
std::string fresh_part(const std::string& joined, size_t& shown) {
    std::string fresh = joined.substr(std::min(shown, joined.size()));
    shown = joined.size();
    return fresh;
}

// Drops the first `shown` bytes of `whole` when they are what was returned while streaming.
void drop_shown(std::string& whole, size_t shown, const std::string& streamed) {
    if (whole.compare(0, shown, streamed, 0, shown) == 0) whole.erase(0, shown);
}

}  // namespace

struct ToolCallStream::State {
    ToolCallFormat format = ToolCallFormat::none;
    AnswerOptions options;
    std::string text;  // everything fed
    size_t shown = 0;  // bytes of content returned by feed()
    size_t reasoning_shown = 0;  // bytes of reasoning returned by take_reasoning()
    // Marker formats, read as far as is certain: the answer's start (which may open a
    // reasoning block), a reasoning block (to its closing tag), the opening (which may be a
    // bare call), then content with markers. Nothing is read after a call's marker (held).
    enum class Phase { start, thinking, opening, content };
    Phase phase = Phase::start;
    Phase after_thinking = Phase::opening;
    std::string_view closing_tag;  // of the reasoning block being read
    ContentJoiner content;         // the content of text[0, read)
    ContentJoiner reasoning;
    size_t read = 0;
    bool held = false;
    tool_reading::HarmonyReader harmony;

    void read_marked();
    void begin_thinking(size_t from, std::string_view closing, Phase then);
    bool read_content();  // false: wait for more text
    const ContentJoiner& content_so_far() const {
        return format == ToolCallFormat::harmony ? harmony.content : content;
    }
    const ContentJoiner& reasoning_so_far() const {
        return format == ToolCallFormat::harmony ? harmony.reasoning : reasoning;
    }
};

void ToolCallStream::State::begin_thinking(size_t from, std::string_view closing, Phase then) {
    reasoning.begin_piece();
    read = from;
    closing_tag = closing;
    after_thinking = then;
    phase = Phase::thinking;
}

void ToolCallStream::State::read_marked() {
    const std::string_view all = text;
    while (!held) {
        switch (phase) {
            case Phase::start: {
                const tool_reading::TagPair tags = tool_reading::reasoning_tags(format);
                if (tags.open.empty()) {
                    phase = Phase::opening;
                } else if (options.in_reasoning) {
                    begin_thinking(0, tags.close, Phase::opening);
                } else {
                    const size_t first = tool_reading::skip_space(all, 0);
                    const std::string_view rest = all.substr(first);
                    if (rest.starts_with(tags.open)) {
                        begin_thinking(first + tags.open.size(), tags.close, Phase::opening);
                    } else if (tags.open.starts_with(rest)) {
                        return;  // may still open a block
                    } else {
                        phase = Phase::opening;
                    }
                }
                break;
            }
            case Phase::thinking: {
                const size_t close = all.find(closing_tag, read);
                if (close == std::string_view::npos) {
                    const std::array<std::string_view, 1> tag = {closing_tag};
                    const size_t end = all.size() - tool_reading::partial_marker(all, read, tag);
                    reasoning.add(all.substr(read, end - read));
                    read = end;
                    return;
                }
                reasoning.add(all.substr(read, close - read));
                reasoning.end_piece();
                read = close + closing_tag.size();
                phase = after_thinking;
                break;
            }
            case Phase::opening: {
                if (options.calls) {
                    const Opening opening = tool_reading::opens_with_call(format, all.substr(read));
                    if (opening == Opening::maybe) return;
                    if (opening == Opening::yes) {
                        held = true;
                        return;
                    }
                }
                content.begin_piece();
                phase = Phase::content;
                break;
            }
            case Phase::content:
                if (!read_content()) return;
                break;
        }
    }
}

bool ToolCallStream::State::read_content() {
    const std::span<const std::string_view> list = tool_reading::markers(format);
    const tool_reading::TagPair think = tool_reading::think_tags(format);
    const std::string_view all = text;
    for (;;) {
        const tool_reading::FoundMarker found = tool_reading::find_marker(text, read, list);
        if (found.pos == std::string_view::npos) break;
        content.add(all.substr(read, found.pos - read));
        read = found.pos;
        const size_t after = found.pos + found.marker.size();
        if (!think.open.empty() && found.marker == think.open) {
            begin_thinking(after, think.close, Phase::content);
            return true;
        }
        if (options.calls || !tool_reading::opens_call(found.marker)) {
            held = true;  // a call, or a control token that only ends the answer
            return false;
        }
        if (tool_reading::is_text_tag(found.marker)) content.add(found.marker);
        read = after;
    }
    const size_t end = text.size() - tool_reading::partial_marker(text, read, list);
    content.add(all.substr(read, end - read));
    read = end;
    return false;
}

ToolCallStream::ToolCallStream(ToolCallFormat format, AnswerOptions options) : state_(std::make_unique<State>()) {
    state_->format = format;
    state_->options = std::move(options);
}

ToolCallStream::ToolCallStream(ToolCallFormat format, std::string id_salt, nlohmann::ordered_json tools)
    : state_(std::make_unique<State>()) {
    state_->format = format;
    state_->options.id_salt = std::move(id_salt);
    state_->options.tools = std::move(tools);
}

ToolCallStream::~ToolCallStream() = default;
ToolCallStream::ToolCallStream(ToolCallStream&&) noexcept = default;
ToolCallStream& ToolCallStream::operator=(ToolCallStream&&) noexcept = default;

std::string ToolCallStream::feed(std::string_view text) {
    State& s = *state_;
    s.text.append(text);
    if (s.format == ToolCallFormat::none) {
        s.shown = s.text.size();
        return std::string(text);
    }
    if (s.format == ToolCallFormat::harmony) {
        s.harmony.read(s.text, false);
    } else {
        s.read_marked();
    }
    return fresh_part(s.content_so_far().text(), s.shown);
}

std::string ToolCallStream::take_reasoning() {
    State& s = *state_;
    if (s.format == ToolCallFormat::none) return {};
    return fresh_part(s.reasoning_so_far().text(), s.reasoning_shown);
}

ParsedAnswer ToolCallStream::finish() {
    State& s = *state_;
    ParsedAnswer answer = parse_answer(s.format, s.text, s.options);
    // What was returned is a prefix of the whole answer's by construction (the same readers,
    // stopped early); only the rest is new.
    if (s.format == ToolCallFormat::none) {
        answer.content.erase(0, s.shown);
    } else {
        drop_shown(answer.content, s.shown, s.content_so_far().text());
        drop_shown(answer.reasoning, s.reasoning_shown, s.reasoning_so_far().text());
    }
    return answer;
}

}  // namespace powerhouse
