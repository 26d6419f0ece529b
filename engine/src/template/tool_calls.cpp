// Which tool-call format a template teaches, the generic format's instructions, and
// reading calls out of whole answers in the marker formats (all but harmony and none); the
// XML formats' blocks are read in tool_call_xml.cpp, gpt-oss's harmony in
// tool_call_harmony.cpp, streaming in tool_call_stream.cpp.
#include "powerhouse/tool_calls.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>

#include "template/tool_call_reading.h"

namespace powerhouse {

namespace tool_reading {

namespace {

constexpr std::array<std::string_view, 1> kTagMarkers = {"<tool_call>"};
// Llama 3: <|python_tag|> opens calls; the end-of-message tokens are only ever seen with
// render_special and are no content.
constexpr std::array<std::string_view, 3> kLlamaMarkers = {"<|python_tag|>", "<|eom_id|>", "<|eot_id|>"};
constexpr std::array<std::string_view, 3> kMistralMarkers = {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"};
// The XML formats: the call block's opening tag, and the reasoning block's.
constexpr std::array<std::string_view, 1> kQwenCoderMarkers = {"<tool_call>"};
constexpr std::array<std::string_view, 2> kSeedMarkers = {"<seed:tool_call>", "<seed:think>"};
constexpr std::array<std::string_view, 2> kGlmMarkers = {"<tool_call>", "<think>"};

constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";

// Deeper JSON than this is no tool call; the bound keeps nlohmann's recursive printing
// and destruction of a hostile answer's `[[[[...` off the stack's limit.
constexpr int kMaxJsonDepth = 128;

// Patterns for opens_with_call: ' ' stands for any whitespace, other characters for themselves.
constexpr std::array<std::string_view, 2> kLlamaOpenings = {"{ \"name\"", "{ \"type\""};
constexpr std::array<std::string_view, 1> kMistralOpenings = {"[ { \"name\""};

Opening match_opening(std::string_view text, std::string_view pattern) {
    size_t t = 0;
    for (const char p : pattern) {
        if (p == ' ') {
            while (t < text.size() && is_space(text[t])) ++t;
            continue;
        }
        if (t == text.size()) return Opening::maybe;
        if (text[t] != p) return Opening::no;
        ++t;
    }
    return Opening::yes;
}

bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.' || c == ':';
}

// {"name": ..., "arguments"|"parameters": ...} (or the same inside {"type": "function",
// "function": {...}}) as a call. Without require_arguments a missing argument list means
// none ({}): inside <tool_call> tags nothing else is meant, while a bare object may be
// JSON the user asked for.
std::optional<ToolCall> call_from_object(const nlohmann::ordered_json& value, bool require_arguments) {
    if (!value.is_object()) return std::nullopt;
    const nlohmann::ordered_json* object = &value;
    if (auto function = value.find("function");
        function != value.end() && function->is_object() && !value.contains("name")) {
        object = &*function;
    }
    auto name = object->find("name");
    if (name == object->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
        return std::nullopt;
    }
    ToolCall call;
    call.name = name->get<std::string>();
    auto arguments = object->find("arguments");
    if (arguments == object->end()) arguments = object->find("parameters");
    if (arguments == object->end()) {
        if (require_arguments) return std::nullopt;
        call.arguments = "{}";
    } else {
        std::optional<std::string> text = arguments_text(*arguments);
        if (!text) return std::nullopt;
        call.arguments = std::move(*text);
    }
    if (auto id = object->find("id"); id != object->end() && id->is_string()) call.id = id->get<std::string>();
    return call;
}

// Bare call objects from `pos`, separated by whitespace or ';' (Llama 3.x writes both).
// Returns where the calls end (past trailing separators), or `pos` when there is none.
size_t read_object_calls(std::string_view text, size_t pos, std::vector<ToolCall>& calls) {
    size_t end = pos;
    size_t p = pos;
    bool any = false;
    for (;;) {
        while (p < text.size() && (is_space(text[p]) || (any && text[p] == ';'))) ++p;
        if (p >= text.size() || text[p] != '{') break;
        const size_t object_end = json_extent(text, p);
        if (object_end == std::string_view::npos) break;
        const std::optional<nlohmann::ordered_json> value = parse_json(text.substr(p, object_end - p));
        if (!value) break;
        std::optional<ToolCall> call = call_from_object(*value, true);
        if (!call) break;
        calls.push_back(std::move(*call));
        any = true;
        p = end = object_end;
    }
    if (!any) return pos;
    while (end < text.size() && (is_space(text[end]) || text[end] == ';')) ++end;
    return end;
}

// Mistral's [{"name": ..., "arguments": {...}, "id": ...}, ...] at text[pos] == '['. All
// the calls or none: returns the array's end, or `pos`.
size_t read_call_array(std::string_view text, size_t pos, std::vector<ToolCall>& calls) {
    const size_t end = json_extent(text, pos);
    if (end == std::string_view::npos) return pos;
    const std::optional<nlohmann::ordered_json> value = parse_json(text.substr(pos, end - pos));
    if (!value || !value->is_array() || value->empty()) return pos;
    std::vector<ToolCall> found;
    for (const auto& item : *value) {
        std::optional<ToolCall> call = call_from_object(item, true);
        if (!call) return pos;
        found.push_back(std::move(*call));
    }
    calls.insert(calls.end(), found.begin(), found.end());
    return end;
}

// What follows [TOOL_CALLS]: an array of calls, or name[ARGS]{...} (name[CALL_ID]id[ARGS]{...}).
size_t read_mistral_calls(std::string_view text, size_t pos, std::vector<ToolCall>& calls) {
    const size_t p = skip_space(text, pos);
    if (p < text.size() && text[p] == '[') {
        const size_t end = read_call_array(text, p, calls);
        return end == p ? pos : end;
    }
    size_t q = p;
    while (q < text.size() && is_name_char(text[q])) ++q;
    if (q == p) return pos;
    ToolCall call;
    call.name = std::string(text.substr(p, q - p));
    constexpr std::string_view kCallId = "[CALL_ID]";
    constexpr std::string_view kArgs = "[ARGS]";
    if (text.substr(q).starts_with(kCallId)) {
        q += kCallId.size();
        const size_t id_begin = q;
        while (q < text.size() && std::isalnum(static_cast<unsigned char>(text[q])) != 0) ++q;
        call.id = std::string(text.substr(id_begin, q - id_begin));
    }
    if (!text.substr(q).starts_with(kArgs)) return pos;
    q = skip_space(text, q + kArgs.size());
    if (q >= text.size() || text[q] != '{') return pos;
    const size_t end = json_extent(text, q);
    if (end == std::string_view::npos) return pos;
    const std::optional<nlohmann::ordered_json> arguments = parse_json(text.substr(q, end - q));
    if (!arguments || !arguments->is_object()) return pos;
    call.arguments = compact_json(*arguments);
    calls.push_back(std::move(call));
    return end;
}

// After a marker found at `found`: reads what it opens and returns where reading goes on.
size_t read_after_marker(ToolCallFormat format, std::string_view text, const FoundMarker& found,
                         const AnswerOptions& options, ContentJoiner& content, ContentJoiner& reasoning,
                         std::vector<ToolCall>& calls) {
    const size_t after = found.pos + found.marker.size();
    if (!options.calls && opens_call(found.marker)) {
        if (is_text_tag(found.marker)) content.add(found.marker);
        return after;
    }
    const nlohmann::ordered_json& tools = options.tools;
    if (is_xml_format(format)) {
        const TagPair think = think_tags(format);
        if (found.marker == think.open) {
            // Reasoning to its closing tag, or to the end of an answer cut off while thinking.
            const size_t close = text.find(think.close, after);
            reasoning.begin_piece();
            reasoning.add(text.substr(after, close == std::string_view::npos ? std::string_view::npos : close - after));
            reasoning.end_piece();
            return close == std::string_view::npos ? text.size() : close + think.close.size();
        }
        const size_t end = read_xml_calls(format, text, found.pos, tools, calls);
        if (end != std::string_view::npos) return end;
        content.add(found.marker);  // a block that does not read as calls is text
        return after;
    }
    if (found.marker == kToolCallOpen) {
        // The call's object ends where its brackets close (a string inside it may hold
        // "</tool_call>"). A block cut off before its closing tag still counts when the
        // object is whole (the answer may end at a stop string or an end token).
        const size_t open = skip_space(text, after);
        const size_t end = open < text.size() && text[open] == '{' ? json_extent(text, open) : std::string_view::npos;
        if (end != std::string_view::npos) {
            const size_t close = skip_space(text, end);
            const bool closed = text.substr(close).starts_with(kToolCallClose);
            if (closed || close == text.size()) {
                if (const std::optional<nlohmann::ordered_json> value = parse_json(text.substr(open, end - open))) {
                    if (std::optional<ToolCall> call = call_from_object(*value, false)) {
                        calls.push_back(std::move(*call));
                        return closed ? close + kToolCallClose.size() : text.size();
                    }
                }
            }
        }
        content.add(found.marker);  // a tag (an ordinary token) that opens no call is text
        return after;
    }
    if (found.marker == "<|python_tag|>") return read_object_calls(text, after, calls);
    if (found.marker == "[TOOL_CALLS]") return read_mistral_calls(text, after, calls);
    return after;  // a control token alone: not content
}

}  // namespace

size_t skip_space(std::string_view text, size_t pos) {
    while (pos < text.size() && is_space(text[pos])) ++pos;
    return pos;
}

bool opens_call(std::string_view marker) {
    return marker == kToolCallOpen || marker == "<seed:tool_call>" || marker == "<|python_tag|>" ||
           marker == "[TOOL_CALLS]";
}

bool is_text_tag(std::string_view marker) {
    return marker == kToolCallOpen || marker == "<seed:tool_call>";
}

TagPair reasoning_tags(ToolCallFormat format) {
    switch (format) {
        case ToolCallFormat::seed_oss:
        case ToolCallFormat::glm45:
            return think_tags(format);
        case ToolCallFormat::mistral:
            return {"[THINK]", "[/THINK]"};
        case ToolCallFormat::generic:
        case ToolCallFormat::hermes:
        case ToolCallFormat::llama3:
        case ToolCallFormat::qwen3_coder:
            return {"<think>", "</think>"};
        case ToolCallFormat::none:
        case ToolCallFormat::harmony:
            break;
    }
    return {};
}

size_t read_leading_reasoning(ToolCallFormat format, std::string_view text, bool in_reasoning,
                              ContentJoiner& reasoning) {
    const TagPair tags = reasoning_tags(format);
    if (tags.open.empty()) return 0;
    size_t begin = 0;
    if (!in_reasoning) {
        begin = skip_space(text, 0);
        if (!text.substr(begin).starts_with(tags.open)) return 0;
        begin += tags.open.size();
    }
    // To its closing tag, or to the end of an answer cut off while thinking.
    const size_t close = text.find(tags.close, begin);
    reasoning.begin_piece();
    reasoning.add(text.substr(begin, close == std::string_view::npos ? std::string_view::npos : close - begin));
    reasoning.end_piece();
    return close == std::string_view::npos ? text.size() : close + tags.close.size();
}

void ContentJoiner::begin_piece() {
    piece_has_text_ = false;
    pending_.clear();
}

void ContentJoiner::add(std::string_view text) {
    size_t pos = 0;
    while (pos < text.size()) {
        size_t visible = pos;
        while (visible < text.size() && is_space(text[visible])) ++visible;
        if (piece_has_text_) pending_.append(text.substr(pos, visible - pos));
        if (visible == text.size()) return;
        size_t end = visible;
        while (end < text.size() && !is_space(text[end])) ++end;
        if (!piece_has_text_) {
            if (!out_.empty()) out_ += "\n\n";
            piece_has_text_ = true;
        }
        out_ += pending_;
        pending_.clear();
        out_.append(text.substr(visible, end - visible));
        pos = end;
    }
}

void ContentJoiner::end_piece() {
    piece_has_text_ = false;
    pending_.clear();
}

Opening opens_with_call(ToolCallFormat format, std::string_view text) {
    std::span<const std::string_view> patterns;
    if (format == ToolCallFormat::llama3) patterns = kLlamaOpenings;
    if (format == ToolCallFormat::mistral) patterns = kMistralOpenings;
    Opening best = Opening::no;
    for (const std::string_view pattern : patterns) {
        const Opening o = match_opening(text.substr(skip_space(text, 0)), pattern);
        if (o == Opening::yes) return o;
        if (o == Opening::maybe) best = o;
    }
    return best;
}

std::span<const std::string_view> markers(ToolCallFormat format) {
    switch (format) {
        case ToolCallFormat::generic:
        case ToolCallFormat::hermes:
            return kTagMarkers;
        case ToolCallFormat::llama3:
            return kLlamaMarkers;
        case ToolCallFormat::mistral:
            return kMistralMarkers;
        case ToolCallFormat::qwen3_coder:
            return kQwenCoderMarkers;
        case ToolCallFormat::seed_oss:
            return kSeedMarkers;
        case ToolCallFormat::glm45:
            return kGlmMarkers;
        case ToolCallFormat::none:
        case ToolCallFormat::harmony:
            break;
    }
    return {};
}

FoundMarker find_marker(std::string_view text, size_t from, std::span<const std::string_view> list) {
    FoundMarker found;
    for (const std::string_view marker : list) {
        const size_t pos = text.find(marker, from);
        if (pos < found.pos) found = {pos, marker};
    }
    return found;
}

size_t partial_marker(std::string_view text, size_t from, std::span<const std::string_view> list) {
    const std::string_view tail = text.substr(std::min(from, text.size()));
    size_t best = 0;
    for (const std::string_view marker : list) {
        for (size_t k = std::min(marker.size() - 1, tail.size()); k > best; --k) {
            if (tail.ends_with(marker.substr(0, k))) {
                best = k;
                break;
            }
        }
    }
    return best;
}

size_t json_extent(std::string_view text, size_t pos) {
    int depth = 0;
    for (size_t i = pos; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '"') {
            for (++i; i < text.size() && text[i] != '"'; ++i) {
                if (text[i] == '\\') ++i;
            }
            if (i >= text.size()) return std::string_view::npos;
        } else if (c == '{' || c == '[') {
            if (++depth > kMaxJsonDepth) return std::string_view::npos;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return i + 1;
        }
    }
    return std::string_view::npos;
}

std::optional<nlohmann::ordered_json> parse_json(std::string_view text) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;
            if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            if (++depth > kMaxJsonDepth) return std::nullopt;
        } else if (c == '}' || c == ']') {
            --depth;
        }
    }
    nlohmann::ordered_json value = nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, false);
    if (value.is_discarded()) return std::nullopt;
    return value;
}

std::string compact_json(const nlohmann::ordered_json& value) {
    return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::optional<std::string> arguments_text(const nlohmann::ordered_json& value) {
    if (value.is_object()) return compact_json(value);
    if (value.is_string()) {
        std::optional<nlohmann::ordered_json> inner = parse_json(value.get_ref<const std::string&>());
        if (inner && inner->is_object()) return compact_json(*inner);
    }
    return std::nullopt;
}

void read_marked(ToolCallFormat format, std::string_view text, const AnswerOptions& options, ContentJoiner& content,
                 ContentJoiner& reasoning, std::vector<ToolCall>& calls) {
    const std::span<const std::string_view> list = markers(format);
    size_t pos = read_leading_reasoning(format, text, options.in_reasoning, reasoning);
    content.begin_piece();
    if (options.calls && opens_with_call(format, text.substr(pos)) == Opening::yes) {
        const size_t start = skip_space(text, pos);
        const size_t end = format == ToolCallFormat::llama3 ? read_object_calls(text, start, calls)
                                                            : read_call_array(text, start, calls);
        if (end != start) pos = end;
    }
    while (pos < text.size()) {
        const FoundMarker found = find_marker(text, pos, list);
        if (found.pos == std::string_view::npos) {
            content.add(text.substr(pos));
            break;
        }
        content.add(text.substr(pos, found.pos - pos));
        pos = read_after_marker(format, text, found, options, content, reasoning, calls);
    }
    content.end_piece();
}

namespace {

uint64_t fnv1a(std::string_view data, uint64_t hash) {
    for (const char c : data) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 0x100000001b3ull;
    }
    // splitmix64's finaliser: FNV alone mixes the last bytes poorly.
    hash ^= hash >> 30;
    hash *= 0xbf58476d1ce4e5b9ull;
    hash ^= hash >> 27;
    hash *= 0x94d049bb133111ebull;
    return hash ^ (hash >> 31);
}

std::string base62(uint64_t value, size_t digits) {
    static constexpr std::string_view kDigits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    std::string out(digits, '0');
    for (size_t i = 0; i < digits; ++i) {
        out[i] = kDigits[value % 62];
        value /= 62;
    }
    return out;
}

}  // namespace

void assign_ids(ToolCallFormat format, std::string_view salt, std::vector<ToolCall>& calls) {
    for (size_t i = 0; i < calls.size(); ++i) {
        ToolCall& call = calls[i];
        if (!call.id.empty()) continue;
        std::string key(salt);
        key += '\0';
        key += std::to_string(i);
        key += '\0';
        key += call.name;
        key += '\0';
        key += call.arguments;
        const uint64_t a = fnv1a(key, 0xcbf29ce484222325ull);
        const uint64_t b = fnv1a(key, a ^ 0x9e3779b97f4a7c15ull);
        // Mistral's template refuses ids that are not 9 letters and digits.
        call.id = format == ToolCallFormat::mistral ? base62(a, 9) : "call_" + base62(a, 8) + base62(b, 8);
    }
}

}  // namespace tool_reading

using tool_reading::ContentJoiner;

std::string_view tool_call_format_name(ToolCallFormat format) {
    switch (format) {
        case ToolCallFormat::none:
            return "none";
        case ToolCallFormat::generic:
            return "generic";
        case ToolCallFormat::hermes:
            return "hermes";
        case ToolCallFormat::llama3:
            return "llama3";
        case ToolCallFormat::mistral:
            return "mistral";
        case ToolCallFormat::harmony:
            return "harmony";
        case ToolCallFormat::qwen3_coder:
            return "qwen3_coder";
        case ToolCallFormat::seed_oss:
            return "seed_oss";
        case ToolCallFormat::glm45:
            return "glm45";
    }
    return "unknown";
}

bool template_mentions_tools(std::string_view source) {
    return template_uses_variable(source, "tools");
}

ToolCallFormat detect_tool_call_format(std::string_view source) {
    if (!template_mentions_tools(source)) return ToolCallFormat::generic;
    auto has = [&](std::string_view text) { return source.find(text) != std::string_view::npos; };
    if (has("<|channel|>") && has("<|message|>")) return ToolCallFormat::harmony;
    if (has("[TOOL_CALLS]")) return ToolCallFormat::mistral;
    if (has("<seed:tool_call>")) return ToolCallFormat::seed_oss;
    // Before Llama 3's headers: Hermes 2 Pro/3 are Llama fine-tunes with <tool_call> blocks.
    // The XML formats open their blocks with the same tag.
    if (has(tool_reading::kToolCallOpen)) {
        if (has("<function=") && has("<parameter=")) return ToolCallFormat::qwen3_coder;
        if (has("<arg_key>") && has("<arg_value>")) return ToolCallFormat::glm45;
        return ToolCallFormat::hermes;
    }
    if (has("<|start_header_id|>") || has("<|python_tag|>")) return ToolCallFormat::llama3;
    return ToolCallFormat::none;
}

bool prompt_opens_reasoning(ToolCallFormat format, std::string_view prompt_end) {
    const std::string_view open = tool_reading::reasoning_tags(format).open;
    while (!prompt_end.empty() && tool_reading::is_space(prompt_end.back())) prompt_end.remove_suffix(1);
    return !open.empty() && prompt_end.ends_with(open);
}

ToolCallFormat detect_tool_call_format(const ModelTemplateInfo& info) {
    return detect_tool_call_format(resolve_chat_template(info).chat_template.source());
}

bool has_tools(const nlohmann::ordered_json& tools) {
    return tools.is_array() && !tools.empty();
}

std::string tool_instructions(const nlohmann::ordered_json& tools) {
    std::string text =
        "# Tools\n\nYou may call one or more functions to help with the request. Each function is described by "
        "a JSON object within <tools></tools> tags:\n<tools>\n";
    if (tools.is_array()) {
        for (const auto& tool : tools) text += tool_reading::compact_json(tool) + "\n";
    }
    text +=
        "</tools>\n\nTo call a function, answer with a JSON object holding its name and arguments within "
        "<tool_call></tool_call> tags, one block per call:\n<tool_call>\n{\"name\": <function-name>, "
        "\"arguments\": <arguments-json-object>}\n</tool_call>\nThe results come back within "
        "<tool_response></tool_response> tags.";
    return text;
}

std::vector<ChatMessage> add_tool_instructions(std::span<const ChatMessage> messages,
                                               const nlohmann::ordered_json& tools) {
    std::vector<ChatMessage> out;
    out.reserve(messages.size() + 1);
    size_t i = 0;
    if (has_tools(tools)) {
        const std::string text = tool_instructions(tools);
        if (!messages.empty() && messages[0].role == "system") {
            ChatMessage system{"system", messages[0].content};
            system.content = system.content.empty() ? text : system.content + "\n\n" + text;
            out.push_back(std::move(system));
            i = 1;
        } else {
            out.push_back({"system", text});
        }
    }
    bool after_tool = false;
    for (; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "tool") {
            const std::string block = "<tool_response>\n" + m.content + "\n</tool_response>";
            if (after_tool) {
                out.back().content += "\n" + block;
            } else {
                out.push_back({"user", block});
            }
            after_tool = true;
            continue;
        }
        after_tool = false;
        ChatMessage plain{m.role, m.content};
        for (const ToolCall& call : m.tool_calls) {
            const std::optional<nlohmann::ordered_json> arguments = tool_reading::parse_json(call.arguments);
            if (!plain.content.empty()) plain.content += "\n";
            plain.content +=
                "<tool_call>\n{\"name\": " + tool_reading::compact_json(call.name) + ", \"arguments\": " +
                tool_reading::compact_json(arguments ? *arguments : nlohmann::ordered_json(call.arguments)) +
                "}\n</tool_call>";
        }
        out.push_back(std::move(plain));
    }
    return out;
}

ParsedAnswer parse_answer(ToolCallFormat format, std::string_view text, std::string_view id_salt,
                          const nlohmann::ordered_json& tools) {
    AnswerOptions options;
    options.id_salt = std::string(id_salt);
    options.tools = tools;
    return parse_answer(format, text, options);
}

ParsedAnswer parse_answer(ToolCallFormat format, std::string_view text, const AnswerOptions& options) {
    ParsedAnswer answer;
    if (format == ToolCallFormat::none) {
        answer.content = std::string(text);
        return answer;
    }
    if (format == ToolCallFormat::harmony) {
        tool_reading::HarmonyReader reader;
        reader.read(text, true);
        answer.content = reader.content.text();
        answer.reasoning = reader.reasoning.text();
        answer.tool_calls = std::move(reader.calls);
    } else {
        ContentJoiner content;
        ContentJoiner reasoning;
        tool_reading::read_marked(format, text, options, content, reasoning, answer.tool_calls);
        answer.content = content.text();
        answer.reasoning = reasoning.text();
    }
    tool_reading::assign_ids(format, options.id_salt, answer.tool_calls);
    return answer;
}

}  // namespace powerhouse
