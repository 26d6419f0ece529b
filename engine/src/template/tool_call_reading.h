// The parts of reading tool calls that parse_answer() and ToolCallStream share, so that a
// streamed answer is read by the same code as a whole one (powerhouse/tool_calls.h).
//
// Thread-safety: plain values, one thread at a time.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/tool_calls.h"

namespace powerhouse::tool_reading {

inline bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Text built as it arrives, in pieces: each piece has its ends trimmed, and non-empty
// pieces are joined by a blank line. Whitespace at the end of a piece is held back until
// text follows it, so what text() holds only ever grows: a prefix shown while streaming
// stays a prefix of the whole.
class ContentJoiner {
public:
    void begin_piece();
    void add(std::string_view text);
    void end_piece();
    const std::string& text() const { return out_; }

private:
    std::string out_;
    std::string pending_;  // whitespace after the piece's last visible character
    bool piece_has_text_ = false;
};

// Whether an answer (its leading whitespace removed) opens with a bare call: Llama 3's
// {"name": ... object, or Mistral's [{"name": ... array (the [TOOL_CALLS] token hidden).
// `maybe`: the text so far is too short to tell.
enum class Opening { no, maybe, yes };
Opening opens_with_call(ToolCallFormat format, std::string_view text);

// The control tokens and tags that start a call or a reasoning block, or must not reach the
// content, per marker format (all but none and harmony).
std::span<const std::string_view> markers(ToolCallFormat format);

struct FoundMarker {
    size_t pos = std::string_view::npos;  // npos: none
    std::string_view marker;
};
// The earliest marker at or after `from`.
FoundMarker find_marker(std::string_view text, size_t from, std::span<const std::string_view> markers);
// The length of the longest end of text[from..] that is the start of a marker (0 if none).
size_t partial_marker(std::string_view text, size_t from, std::span<const std::string_view> markers);

// The end of the JSON object or array that opens at text[pos] ('{' or '['), by brackets
// outside strings; npos when it does not close or nests deeper than a sane document.
size_t json_extent(std::string_view text, size_t pos);
// The JSON text, or nullopt when it is not JSON (never throws).
std::optional<nlohmann::ordered_json> parse_json(std::string_view text);
// Compact JSON text (invalid UTF-8 replaced, never throws).
std::string compact_json(const nlohmann::ordered_json& value);
// A call's arguments: an object, or a string holding a JSON object, as compact text.
std::optional<std::string> arguments_text(const nlohmann::ordered_json& value);

size_t skip_space(std::string_view text, size_t pos);

// Reads a whole answer in a marker format into content (one piece), reasoning (a piece
// per think block) and calls.
void read_marked(ToolCallFormat format, std::string_view text, const AnswerOptions& options, ContentJoiner& content,
                 ContentJoiner& reasoning, std::vector<ToolCall>& calls);

// A marker that opens a call (rather than a control token alone or a reasoning block), and
// whether it is ordinary text when no calls are read (Qwen's <tool_call> is an ordinary token).
bool opens_call(std::string_view marker);
bool is_text_tag(std::string_view marker);

// ---- the XML formats (qwen3_coder, seed_oss, glm45): tool_call_xml.cpp ----

struct TagPair {
    std::string_view open;
    std::string_view close;
};
// The tags around a format's call block, and around its reasoning (both empty when the
// format has none).
TagPair call_tags(ToolCallFormat format);
TagPair think_tags(ToolCallFormat format);
// The reasoning block an answer in a marker format may open with, or its prompt open:
// think_tags() for seed_oss and glm45, [THINK] for mistral, <think> for the other marker
// formats; none for harmony and none.
TagPair reasoning_tags(ToolCallFormat format);
// Where the answer goes on after the reasoning block it opens with, read into `reasoning`
// (0 when there is none).
size_t read_leading_reasoning(ToolCallFormat format, std::string_view text, bool in_reasoning,
                              ContentJoiner& reasoning);
bool is_xml_format(ToolCallFormat format);

// The call block whose opening tag starts at text[pos]: appends its calls and returns where
// the block ends (its closing tag, or the end of the text when only that is missing), or
// npos, appending nothing, when the block does not read as a whole.
size_t read_xml_calls(ToolCallFormat format, std::string_view text, size_t pos, const nlohmann::ordered_json& tools,
                      std::vector<ToolCall>& calls);

// The JSON types a schema allows, as bits (kind_bit); 0 when it says nothing of them.
enum class JsonKind : unsigned { string, number, integer, boolean, null, object, array };
constexpr unsigned kind_bit(JsonKind kind) {
    return 1u << static_cast<unsigned>(kind);
}
unsigned schema_kinds(const nlohmann::ordered_json& schema);
// The schema of parameter `parameter` of function `function` in `tools`, or nullptr.
const nlohmann::ordered_json* parameter_schema(const nlohmann::ordered_json& tools, std::string_view function,
                                               std::string_view parameter);
// A parameter's text as the value its schema (nullptr: unknown) makes it (tool_calls.h).
nlohmann::ordered_json typed_value(std::string_view text, const nlohmann::ordered_json* schema);
// A Python literal (None, True, 1.5, 'text', [..], (..), {..}) as JSON, or nullopt.
std::optional<nlohmann::ordered_json> python_literal(std::string_view text);

// gpt-oss's harmony messages, read as far as the text allows.
class HarmonyReader {
public:
    // Reads `text` (all of the answer so far; it only grows between calls) from where the
    // last call stopped. Unless at_end, stops before a possible partial control token, and
    // for good once a message to a tool begins (held()).
    void read(std::string_view text, bool at_end);
    bool held() const { return held_; }

    ContentJoiner content;
    ContentJoiner reasoning;
    std::vector<ToolCall> calls;

private:
    enum class State { loose, header, body };
    enum class Kind { content, reasoning, call };
    void text_run(std::string_view run);
    void control(std::string_view token);
    void begin_body();
    void end_message();

    State state_ = State::loose;
    Kind kind_ = Kind::content;
    bool loose_open_ = false;  // loose text (outside any message) forms a content piece
    size_t pos_ = 0;
    std::string header_;
    std::string function_;  // a call's function name
    std::string body_;      // a call's arguments
    bool held_ = false;
};

// Gives each call without an id one (see powerhouse/tool_calls.h).
void assign_ids(ToolCallFormat format, std::string_view salt, std::vector<ToolCall>& calls);

}  // namespace powerhouse::tool_reading
