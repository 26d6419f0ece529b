// ToolCallStream: the content of an answer as it streams, read by the same code as a whole
// answer (tool_call_reading.h), stopping wherever more text could still change what it is.
#include "powerhouse/tool_calls.h"

#include <algorithm>

#include "template/tool_call_reading.h"

namespace powerhouse {

using tool_reading::ContentJoiner;
using tool_reading::Opening;

struct ToolCallStream::State {
    ToolCallFormat format = ToolCallFormat::none;
    std::string id_salt;
    nlohmann::ordered_json tools;
    std::string text;  // everything fed
    size_t shown = 0;  // bytes of content returned by feed()
    // Marker formats: `content` holds the content of text[0, read); nothing is read before
    // it is known whether the answer opens with a bare call, nor after a call's marker
    // (held), nor past a reasoning block that has not closed yet.
    ContentJoiner content;
    size_t read = 0;
    bool opening_known = false;
    bool held = false;
    size_t think_scanned = 0;  // where to look on for an open reasoning block's closing tag
    tool_reading::HarmonyReader harmony;

    void read_marked();
    const std::string& content_so_far() const {
        return format == ToolCallFormat::harmony ? harmony.content.text() : content.text();
    }
};

void ToolCallStream::State::read_marked() {
    if (held) return;
    if (!opening_known) {
        const Opening opening = tool_reading::opens_with_call(format, text);
        if (opening == Opening::maybe) return;
        if (opening == Opening::yes) {
            held = true;
            return;
        }
        opening_known = true;
        content.begin_piece();
    }
    const std::span<const std::string_view> list = tool_reading::markers(format);
    const tool_reading::TagPair think = tool_reading::think_tags(format);
    const std::string_view all = text;
    for (;;) {
        const tool_reading::FoundMarker found = tool_reading::find_marker(text, read, list);
        if (found.pos == std::string_view::npos) break;
        content.add(all.substr(read, found.pos - read));
        read = found.pos;
        if (think.open.empty() || found.marker != think.open) {
            held = true;
            return;
        }
        // Reasoning is not content: skip the block once it has closed, wait until then.
        const size_t close = all.find(think.close, std::max(found.pos + think.open.size(), think_scanned));
        if (close == std::string_view::npos) {
            think_scanned = all.size() - std::min(all.size(), think.close.size() - 1);
            return;
        }
        read = close + think.close.size();
    }
    const size_t end = text.size() - tool_reading::partial_marker(text, read, list);
    content.add(all.substr(read, end - read));
    read = end;
}

ToolCallStream::ToolCallStream(ToolCallFormat format, std::string id_salt, nlohmann::ordered_json tools)
    : state_(std::make_unique<State>()) {
    state_->format = format;
    state_->id_salt = std::move(id_salt);
    state_->tools = std::move(tools);
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
    const std::string& content = s.content_so_far();
    std::string fresh = content.substr(std::min(s.shown, content.size()));
    s.shown = content.size();
    return fresh;
}

ParsedAnswer ToolCallStream::finish() {
    State& s = *state_;
    ParsedAnswer answer = parse_answer(s.format, s.text, s.id_salt, s.tools);
    // What feed() returned is a prefix of the whole answer's content by construction (the
    // same readers, stopped early); only the rest is new.
    if (s.format == ToolCallFormat::none || answer.content.compare(0, s.shown, s.content_so_far(), 0, s.shown) == 0) {
        answer.content.erase(0, s.shown);
    }
    return answer;
}

}  // namespace powerhouse
