#include "store/transfer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

namespace powerhouse::store {

namespace {

// Keys keep the order they were written in (the documented order on export), and settings
// read back keep theirs, so that a second export is byte for byte the first.
using Json = nlohmann::ordered_json;

// Nested settings deeper than this are refused: dumping JSON recurses, and no setting the app
// writes is more than two levels deep.
constexpr int kMaxSettingsDepth = 64;

int64_t clock_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// ---- choosing what to export ----

Result<std::vector<Conversation>> chosen(const Store& store, const std::vector<int64_t>& ids) {
    Result<std::vector<Conversation>> visible = store.conversations();
    if (!visible) return visible.error();
    if (ids.empty()) {
        std::vector<Conversation> all = std::move(visible).value();
        // Oldest first, as an archive reads; an import then gives them ids in the same order.
        std::sort(all.begin(), all.end(), [](const Conversation& a, const Conversation& b) {
            return a.created_ms != b.created_ms ? a.created_ms < b.created_ms : a.id < b.id;
        });
        return all;
    }
    std::map<int64_t, const Conversation*> by_id;
    for (const Conversation& c : *visible) by_id[c.id] = &c;
    std::vector<Conversation> out;
    std::set<int64_t> seen;
    for (const int64_t id : ids) {
        if (!seen.insert(id).second) continue;
        const auto found = by_id.find(id);
        // A deleted conversation is gone as far as the user can see: not exported either.
        if (found == by_id.end()) return make_error(ErrorCode::invalid_argument, fmt::format("no conversation {}", id));
        out.push_back(*found->second);
    }
    return out;
}

// ---- JSON out ----

bool has_stats(const MessageStats& s) {
    return !s.model.empty() || !s.engine.empty() || s.prompt_tokens != 0 || s.reused_tokens != 0 ||
           s.generated_tokens != 0 || s.ttft_ms != 0 || s.tokens_per_second != 0 || s.energy_joules.has_value() ||
           !s.recoveries.empty() || !s.throttle.empty() || s.drafted_tokens != 0 || s.accepted_tokens != 0;
}

Json stats_json(const MessageStats& s) {
    Json out = {{"model", s.model},
                {"engine", s.engine},
                {"prompt_tokens", s.prompt_tokens},
                {"reused_tokens", s.reused_tokens},
                {"generated_tokens", s.generated_tokens},
                {"ttft_ms", s.ttft_ms},
                {"tokens_per_second", s.tokens_per_second}};
    if (s.energy_joules) out["energy_joules"] = *s.energy_joules;
    // Only for an answer made with guesses, so that the others' exports read as before.
    if (s.drafted_tokens != 0 || s.accepted_tokens != 0) {
        out["drafted_tokens"] = s.drafted_tokens;
        out["accepted_tokens"] = s.accepted_tokens;
    }
    if (!s.throttle.empty()) out["throttle"] = s.throttle;
    if (!s.recoveries.empty()) {
        Json list = Json::array();
        for (const MessageRecovery& r : s.recoveries) {
            list.push_back(
                {{"at_token", r.at_token}, {"failed", r.failed}, {"cause", r.cause}, {"continued_on", r.continued_on}});
        }
        out["recoveries"] = std::move(list);
    }
    return out;
}

Json message_json(const Message& m) {
    Json out = {{"role", m.role}, {"content", m.content}};
    // Only where there is some, so that the exports of answers without any read as before.
    if (!m.reasoning.empty()) out["reasoning"] = m.reasoning;
    // The same for the tools an answer called (imported chats only). Stored as the import
    // read them; text that is not a JSON array (a hand edit) is left out rather than fail.
    if (!m.tool_calls.empty()) {
        Json calls = Json::parse(m.tool_calls, nullptr, /*allow_exceptions=*/false);
        if (calls.is_array()) out["tool_calls"] = std::move(calls);
    }
    out["state"] = message_state_name(m.state);
    if (!m.error.empty()) out["error"] = m.error;
    out["created_ms"] = m.created_ms;
    out["updated_ms"] = m.updated_ms;
    if (has_stats(m.stats)) out["stats"] = stats_json(m.stats);
    return out;
}

Json conversation_json(const Conversation& c, const std::vector<Message>& messages) {
    // The app writes settings as a JSON object; anything else it would ignore on reading
    // (conversation_settings.h), so it is exported as the empty object it stands for.
    Json settings = Json::parse(c.settings_json, nullptr, /*allow_exceptions=*/false);
    if (!settings.is_object()) settings = Json::object();
    Json list = Json::array();
    for (const Message& m : messages) list.push_back(message_json(m));
    Json out = Json::object();
    out["title"] = c.title;
    out["system_prompt"] = c.system_prompt;
    out["settings"] = std::move(settings);
    out["created_ms"] = c.created_ms;
    out["updated_ms"] = c.updated_ms;
    out["messages"] = std::move(list);
    return out;
}

// ---- Markdown out ----

// Text of the store's (a title, a model name, an error) inside Markdown written here: on one
// line, with the characters that would start emphasis, code, links, HTML or entities escaped.
std::string inline_text(std::string_view text) {
    std::string out;
    for (const char c : text) {
        if (c == '\n' || c == '\r' || c == '\t') {
            out += ' ';
            continue;
        }
        if (std::string_view("\\`*_[]<>&#~|").find(c) != std::string_view::npos) out += '\\';
        out += c;
    }
    const size_t first = out.find_first_not_of(' ');
    if (first == std::string::npos) return {};
    return out.substr(first, out.find_last_not_of(' ') - first + 1);
}

std::string format_date(int64_t ms, bool utc) {
    const auto seconds = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    std::tm parts{};
    const bool ok = utc ? gmtime_r(&seconds, &parts) != nullptr : localtime_r(&seconds, &parts) != nullptr;
    if (!ok) return "unknown date";
    char text[64];
    if (std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", &parts) == 0) return "unknown date";
    return utc ? std::string(text) + " UTC" : std::string(text);
}

// The fence that closes a fenced code block still open at the end of `text` (an answer
// stopped in the middle of one), or none. CommonMark's rules for top-level fences: up to
// three spaces, then three or more backticks or tildes; the closing fence is the same
// character at least as many times, with nothing but spaces after it.
std::optional<std::string> unclosed_fence(std::string_view text) {
    char open_char = 0;
    size_t open_length = 0;
    size_t start = 0;
    while (start <= text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(start, end - start);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        size_t indent = 0;
        while (indent < line.size() && indent < 4 && line[indent] == ' ') ++indent;
        if (indent < 4 && indent < line.size() && (line[indent] == '`' || line[indent] == '~')) {
            const char c = line[indent];
            size_t run = 0;
            while (indent + run < line.size() && line[indent + run] == c) ++run;
            const std::string_view rest = line.substr(indent + run);
            if (open_char == 0) {
                // A backtick fence's info string may not hold a backtick (that is inline code).
                if (run >= 3 && (c == '~' || rest.find('`') == std::string_view::npos)) {
                    open_char = c;
                    open_length = run;
                }
            } else if (c == open_char && run >= open_length &&
                       rest.find_first_not_of(" \t") == std::string_view::npos) {
                open_char = 0;
            }
        }
        start = end + 1;
    }
    if (open_char == 0) return std::nullopt;
    return std::string(open_length, open_char);
}

// A backtick fence longer than any run of backticks in `text`, so that the text cannot end it.
std::string fence_around(std::string_view text) {
    size_t longest = 0;
    size_t run = 0;
    for (const char c : text) {
        run = c == '`' ? run + 1 : 0;
        longest = std::max(longest, run);
    }
    return std::string(std::max<size_t>(3, longest + 1), '`');
}

// A message's own text, unchanged but for trailing line ends, and a fence it left open closed.
std::string message_body(const std::string& content) {
    std::string body = content;
    while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
    if (const std::optional<std::string> fence = unclosed_fence(body)) body += "\n" + *fence;
    return body;
}

std::string state_note(const Message& m) {
    switch (m.state) {
        case MessageState::complete:
            return {};
        case MessageState::streaming:
            return "*Still being written when exported.*";
        case MessageState::stopped:
            return "*Stopped before the end.*";
        case MessageState::interrupted:
            return "*Interrupted: Powerhouse ended while this answer was being written.*";
        case MessageState::failed: {
            const std::string error = inline_text(m.error);
            return error.empty() ? "*Failed.*" : fmt::format("*Failed: {}*", error);
        }
    }
    return {};
}

std::string stats_line(const MessageStats& s) {
    std::vector<std::string> parts;
    if (const std::string model = inline_text(s.model); !model.empty()) parts.push_back(model);
    if (!s.engine.empty() && s.engine != "local") parts.push_back("via " + inline_text(s.engine));
    if (s.generated_tokens > 0) {
        parts.push_back(s.generated_tokens == 1 ? std::string("1 token")
                                                : fmt::format("{} tokens", s.generated_tokens));
    }
    if (s.tokens_per_second > 0) parts.push_back(fmt::format("{:.1f} tokens/s", s.tokens_per_second));
    if (parts.empty()) return {};
    if (s.drafted_tokens > 0) parts.push_back(guesses_text(s));
    return fmt::format("*{}*", fmt::join(parts, " · "));
}

const char* role_heading(const std::string& role) {
    if (role == "user") return "**You**";
    if (role == "assistant") return "**Assistant**";
    return "**System**";
}

// ---- JSON in ----

Error bad(const std::string& place, const std::string& problem) {
    return make_error(ErrorCode::format, place.empty() ? problem : fmt::format("{}: {}", place, problem));
}

std::string member(const std::string& place, std::string_view key) {
    return place.empty() ? std::string(key) : fmt::format("{}.{}", place, key);
}

// A value as an error shows it: scalars as JSON (short), containers by their kind (dumping
// them would recurse as deep as they nest).
std::string shown(const Json& v) {
    if (v.is_object()) return "an object";
    if (v.is_array()) return "an array";
    std::string text = v.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (text.size() > 60) {
        size_t cut = 57;
        while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // whole characters
        text = text.substr(0, cut) + "...";
    }
    return text;
}

Error wrong_type(const std::string& place, const Json& v, const char* wanted) {
    return bad(place, fmt::format("{} is not {}", shown(v), wanted));
}

// Optional members: absent gives nothing, present with another type an error.
Result<std::optional<std::string>> optional_string(const Json& object, std::string_view key, const std::string& place) {
    const auto it = object.find(key);
    if (it == object.end()) return std::optional<std::string>{};
    if (!it->is_string()) return wrong_type(member(place, key), *it, "a string");
    return std::optional<std::string>(it->get<std::string>());
}

// optional_string, with null read as absent.
Result<std::optional<std::string>> optional_text(const Json& object, std::string_view key, const std::string& place) {
    if (const auto it = object.find(key); it != object.end() && it->is_null()) return std::optional<std::string>{};
    return optional_string(object, key, place);
}

Result<std::optional<int64_t>> optional_integer(const Json& object, std::string_view key, const std::string& place,
                                                bool count) {
    const auto it = object.find(key);
    if (it == object.end()) return std::optional<int64_t>{};
    if (!it->is_number_integer()) return wrong_type(member(place, key), *it, "a whole number");
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return bad(member(place, key), fmt::format("{} is too large", shown(*it)));
    }
    const auto value = it->get<int64_t>();
    if (count && value < 0) return bad(member(place, key), fmt::format("{} is negative", value));
    return std::optional<int64_t>(value);
}

Result<std::optional<double>> optional_number(const Json& object, std::string_view key, const std::string& place) {
    const auto it = object.find(key);
    if (it == object.end()) return std::optional<double>{};
    if (!it->is_number()) return wrong_type(member(place, key), *it, "a number");
    return std::optional<double>(it->get<double>());
}

// Whether a value nests deeper than `limit`, found without recursion.
bool nests_deeper_than(const Json& value, int limit) {
    std::vector<std::pair<const Json*, int>> stack = {{&value, 1}};
    while (!stack.empty()) {
        const auto [v, depth] = stack.back();
        stack.pop_back();
        if (!v->is_structured()) continue;
        if (depth > limit) return true;
        for (const Json& child : *v) stack.emplace_back(&child, depth + 1);
    }
    return false;
}

// Reads members one after another, keeping the first error.
#define PH_READ(target, expr)                              \
    do {                                                   \
        auto ph_read_ = (expr);                            \
        if (!ph_read_) return std::move(ph_read_).error(); \
        if (ph_read_->has_value()) target = **ph_read_;    \
    } while (0)

Result<MessageStats> read_stats(const Json& s, const std::string& place) {
    if (!s.is_object()) return wrong_type(place, s, "an object (an answer's statistics)");
    MessageStats stats;
    PH_READ(stats.model, optional_string(s, "model", place));
    PH_READ(stats.engine, optional_string(s, "engine", place));
    PH_READ(stats.prompt_tokens, optional_integer(s, "prompt_tokens", place, true));
    PH_READ(stats.reused_tokens, optional_integer(s, "reused_tokens", place, true));
    PH_READ(stats.generated_tokens, optional_integer(s, "generated_tokens", place, true));
    PH_READ(stats.ttft_ms, optional_number(s, "ttft_ms", place));
    PH_READ(stats.tokens_per_second, optional_number(s, "tokens_per_second", place));
    PH_READ(stats.drafted_tokens, optional_integer(s, "drafted_tokens", place, true));
    PH_READ(stats.accepted_tokens, optional_integer(s, "accepted_tokens", place, true));
    if (stats.accepted_tokens > stats.drafted_tokens) {
        return bad(member(place, "accepted_tokens"),
                   fmt::format("{} is more than the {} drafted_tokens: only guessed tokens can be kept",
                               stats.accepted_tokens, stats.drafted_tokens));
    }
    Result<std::optional<double>> energy = optional_number(s, "energy_joules", place);
    if (!energy) return std::move(energy).error();
    stats.energy_joules = *energy;
    PH_READ(stats.throttle, optional_string(s, "throttle", place));
    if (const auto list = s.find("recoveries"); list != s.end()) {
        const std::string where = member(place, "recoveries");
        if (!list->is_array()) return wrong_type(where, *list, "an array of recoveries");
        for (size_t i = 0; i < list->size(); ++i) {
            const Json& r = (*list)[i];
            const std::string at = fmt::format("{}[{}]", where, i);
            if (!r.is_object()) return wrong_type(at, r, "an object (a recovery)");
            MessageRecovery note;
            PH_READ(note.at_token, optional_integer(r, "at_token", at, true));
            PH_READ(note.failed, optional_string(r, "failed", at));
            PH_READ(note.cause, optional_string(r, "cause", at));
            PH_READ(note.continued_on, optional_string(r, "continued_on", at));
            stats.recoveries.push_back(std::move(note));
        }
    }
    return stats;
}

// A message's "tool_calls" (OpenAI's chat format) as the store keeps them: the array's JSON,
// or nothing when it has none (absent, null or empty). Only an assistant calls tools, and
// each call names its function.
Result<std::optional<std::string>> read_tool_calls(const Json& m, const std::string& role, const std::string& place) {
    const auto calls = m.find("tool_calls");
    if (calls == m.end() || calls->is_null()) return std::optional<std::string>{};
    const std::string where = member(place, "tool_calls");
    if (!calls->is_array()) return wrong_type(where, *calls, "an array of tool calls");
    if (calls->empty()) return std::optional<std::string>{};
    if (role != "assistant")
        return bad(where, fmt::format("a {} message calls no tools; only an assistant's does", role));
    if (nests_deeper_than(*calls, kMaxSettingsDepth)) {
        return bad(where, fmt::format("nested deeper than {} levels", kMaxSettingsDepth));
    }
    for (size_t i = 0; i < calls->size(); ++i) {
        const Json& call = (*calls)[i];
        const std::string at = fmt::format("{}[{}]", where, i);
        if (!call.is_object()) return wrong_type(at, call, "an object (a tool call)");
        const auto function = call.find("function");
        if (function == call.end()) return bad(at, "no \"function\"");
        if (!function->is_object()) return wrong_type(member(at, "function"), *function, "an object");
        const auto name = function->find("name");
        if (name == function->end()) return bad(member(at, "function"), "no \"name\"");
        if (!name->is_string()) return wrong_type(member(member(at, "function"), "name"), *name, "a string");
    }
    return std::optional<std::string>(calls->dump(-1, ' ', false, Json::error_handler_t::replace));
}

Result<MessageState> read_state(const std::string& text, const std::string& place) {
    for (const MessageState state : {MessageState::complete, MessageState::streaming, MessageState::stopped,
                                     MessageState::failed, MessageState::interrupted}) {
        if (text != message_state_name(state)) continue;
        // The answer cannot go on streaming here: it stopped where the export found it.
        return state == MessageState::streaming ? MessageState::interrupted : state;
    }
    return bad(place,
               fmt::format("{} is not one of complete, streaming, stopped, failed, interrupted", shown(Json(text))));
}

Result<Message> read_message(const Json& m, const std::string& place, int64_t now) {
    if (!m.is_object()) return wrong_type(place, m, "an object (a message)");
    Message message;
    const auto role = m.find("role");
    if (role == m.end()) return bad(place, "no \"role\"");
    if (!role->is_string()) return wrong_type(member(place, "role"), *role, "a string");
    message.role = role->get<std::string>();
    if (message.role != "system" && message.role != "user" && message.role != "assistant") {
        return bad(member(place, "role"), fmt::format("{} is not one of system, user, assistant", shown(*role)));
    }
    PH_READ(message.tool_calls, read_tool_calls(m, message.role, place));
    const auto content = m.find("content");
    if (content == m.end()) return bad(place, "no \"content\"");
    // OpenAI writes a turn that only calls tools with a null content: empty, with its calls.
    if (content->is_null() && !message.tool_calls.empty()) {
        message.content.clear();
    } else if (content->is_null()) {
        return bad(member(place, "content"),
                   "null, and the message calls no tools: only an assistant's message with \"tool_calls\" may have "
                   "no content; give its text as a string");
    } else if (!content->is_string()) {
        return wrong_type(member(place, "content"), *content, "a string");
    } else {
        message.content = content->get<std::string>();
    }
    // A reasoning model's thinking: ours and OpenRouter's "reasoning", or the
    // "reasoning_content" of DeepSeek's API, vLLM, SGLang and llama.cpp's server (what the
    // remote engines read too). Older exports and plain chats have none; a null one (servers
    // send it on messages without thinking) is none.
    PH_READ(message.reasoning, optional_text(m, "reasoning", place));
    if (message.reasoning.empty()) PH_READ(message.reasoning, optional_text(m, "reasoning_content", place));
    std::optional<std::string> state;
    PH_READ(state, optional_string(m, "state", place));
    if (state) {
        Result<MessageState> s = read_state(*state, member(place, "state"));
        if (!s) return std::move(s).error();
        message.state = *s;
    }
    PH_READ(message.error, optional_string(m, "error", place));
    message.created_ms = now;
    PH_READ(message.created_ms, optional_integer(m, "created_ms", place, false));
    message.updated_ms = message.created_ms;
    PH_READ(message.updated_ms, optional_integer(m, "updated_ms", place, false));
    if (const auto stats = m.find("stats"); stats != m.end()) {
        Result<MessageStats> s = read_stats(*stats, member(place, "stats"));
        if (!s) return std::move(s).error();
        message.stats = std::move(s).value();
    }
    return message;
}

Result<std::vector<Message>> read_messages(const Json& list, const std::string& place, int64_t now) {
    if (!list.is_array()) return wrong_type(place, list, "an array of messages");
    std::vector<Message> out;
    out.reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
        Result<Message> m = read_message(list[i], fmt::format("{}[{}]", place, i), now);
        if (!m) return std::move(m).error();
        out.push_back(std::move(m).value());
    }
    return out;
}

// The app's rule for a new conversation's title: the first line of the first user message,
// up to 60 characters.
std::string title_from(const std::vector<Message>& messages) {
    for (const Message& m : messages) {
        if (m.role != "user") continue;
        const size_t first = m.content.find_first_not_of(" \t\r\n");
        if (first == std::string::npos) continue;
        std::string line = m.content.substr(first, m.content.find_first_of("\r\n", first) - first);
        size_t characters = 0;
        for (size_t i = 0; i < line.size(); ++i) {
            if ((static_cast<unsigned char>(line[i]) & 0xC0) == 0x80) continue;
            if (++characters > 60) {
                line.resize(i);
                break;
            }
        }
        while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
        return line;
    }
    return "Imported conversation";
}

Result<ConversationRecord> read_conversation(const Json& c, const std::string& place, int64_t now) {
    if (!c.is_object()) return wrong_type(place, c, "an object (a conversation)");
    ConversationRecord record;
    const auto messages = c.find("messages");
    if (messages == c.end()) return bad(place, "no \"messages\"");
    Result<std::vector<Message>> list = read_messages(*messages, member(place, "messages"), now);
    if (!list) return std::move(list).error();
    record.messages = std::move(list).value();
    Conversation& conversation = record.conversation;
    std::optional<std::string> title;
    PH_READ(title, optional_string(c, "title", place));
    conversation.title = title ? *title : title_from(record.messages);
    PH_READ(conversation.system_prompt, optional_string(c, "system_prompt", place));
    conversation.settings_json = "{}";
    if (const auto settings = c.find("settings"); settings != c.end()) {
        if (!settings->is_object()) return wrong_type(member(place, "settings"), *settings, "an object");
        if (nests_deeper_than(*settings, kMaxSettingsDepth)) {
            return bad(member(place, "settings"), fmt::format("nested deeper than {} levels", kMaxSettingsDepth));
        }
        conversation.settings_json = settings->dump();
    }
    conversation.created_ms = now;
    PH_READ(conversation.created_ms, optional_integer(c, "created_ms", place, false));
    conversation.updated_ms = std::max(now, conversation.created_ms);
    PH_READ(conversation.updated_ms, optional_integer(c, "updated_ms", place, false));
    return record;
}

#undef PH_READ

Result<std::vector<ConversationRecord>> read_document(const Json& doc, int64_t now) {
    std::vector<ConversationRecord> out;
    if (doc.is_array()) {
        // A bare chat, as OpenAI's API takes it: one conversation.
        if (doc.empty()) return bad("", "the chat holds no messages");
        Result<std::vector<Message>> messages = read_messages(doc, "", now);
        if (!messages) return std::move(messages).error();
        ConversationRecord record;
        record.messages = std::move(messages).value();
        record.conversation.title = title_from(record.messages);
        record.conversation.settings_json = "{}";
        record.conversation.created_ms = record.conversation.updated_ms = now;
        out.push_back(std::move(record));
        return out;
    }
    if (!doc.is_object()) {
        return bad("",
                   fmt::format("the file holds {}, not a Powerhouse export or a list of chat messages", shown(doc)));
    }
    const auto format = doc.find("format");
    if (format == doc.end()) {
        // {"messages": [...], ...}: a chat request, or one conversation of ours on its own.
        if (!doc.contains("messages")) {
            return bad("", fmt::format("neither a Powerhouse export (no \"format\") nor a chat (no \"messages\")"));
        }
        Result<ConversationRecord> record = read_conversation(doc, "", now);
        if (!record) return std::move(record).error();
        out.push_back(std::move(record).value());
        return out;
    }
    if (!format->is_string() || format->get<std::string>() != kTransferFormat) {
        return bad("format", fmt::format("{} is not \"{}\"", shown(*format), kTransferFormat));
    }
    const auto version = doc.find("version");
    if (version == doc.end()) return bad("", "no \"version\"");
    if (!version->is_number_integer() || version->get<int64_t>() < 1) {
        return wrong_type("version", *version, "a version number (1 or more)");
    }
    if (version->get<int64_t>() > kTransferVersion) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("version: this file is {} version {}, from a newer Powerhouse; this one reads "
                                      "version {}: update Powerhouse to import it",
                                      kTransferFormat, version->dump(), kTransferVersion));
    }
    const auto conversations = doc.find("conversations");
    if (conversations == doc.end()) return bad("", "no \"conversations\"");
    if (!conversations->is_array()) return wrong_type("conversations", *conversations, "an array");
    out.reserve(conversations->size());
    for (size_t i = 0; i < conversations->size(); ++i) {
        Result<ConversationRecord> record =
            read_conversation((*conversations)[i], fmt::format("conversations[{}]", i), now);
        if (!record) return std::move(record).error();
        out.push_back(std::move(record).value());
    }
    return out;
}

// nlohmann's message without its exception prefix, with bytes that are not UTF-8 (it quotes
// what it last read, bad bytes included) written as \xNN so that the message itself is text.
std::string parse_problem(const char* what) {
    std::string_view text(what);
    if (const size_t at = text.find("parse error"); at != std::string_view::npos) text.remove_prefix(at);
    std::string out;
    for (size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        size_t length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        bool valid = length > 0 && i + length <= text.size();
        for (size_t k = 1; valid && k < length; ++k) {
            valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
        }
        if (!valid) {
            out += fmt::format("\\x{:02X}", c);
            ++i;
            continue;
        }
        out.append(text.substr(i, length));
        i += length;
    }
    return out;
}

}  // namespace

Result<std::string> export_json(const Store& store, const std::vector<int64_t>& ids, const ExportOptions& options) {
    Result<std::vector<Conversation>> list = chosen(store, ids);
    if (!list) return std::move(list).error();
    Json conversations = Json::array();
    for (const Conversation& c : *list) {
        Result<std::vector<Message>> messages = store.messages(c.id);
        if (!messages) return std::move(messages).error();
        conversations.push_back(conversation_json(c, *messages));
    }
    const Json doc = {{"format", std::string(kTransferFormat)},
                      {"version", kTransferVersion},
                      {"exported_ms", options.now_ms != 0 ? options.now_ms : clock_ms()},
                      {"conversations", std::move(conversations)}};
    // Never fails on text the store holds: bytes that are not UTF-8 become U+FFFD.
    return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

Result<std::string> export_markdown(const Store& store, const std::vector<int64_t>& ids, const ExportOptions& options) {
    Result<std::vector<Conversation>> list = chosen(store, ids);
    if (!list) return std::move(list).error();
    // Blocks, written with a blank line between each, so that none runs into the next.
    std::vector<std::string> blocks;
    for (const Conversation& c : *list) {
        Result<std::vector<Message>> messages = store.messages(c.id);
        if (!messages) return std::move(messages).error();
        if (!blocks.empty()) blocks.emplace_back("---");
        const std::string title = inline_text(c.title);
        blocks.push_back("# " + (title.empty() ? std::string("Untitled") : title));
        blocks.push_back(fmt::format("*{}*", format_date(c.created_ms, options.utc)));
        if (!c.system_prompt.empty()) {
            // Wrapped here, as it is, in a fence that no line of the prompt can close.
            std::string prompt = c.system_prompt;
            while (!prompt.empty() && (prompt.back() == '\n' || prompt.back() == '\r')) prompt.pop_back();
            const std::string fence = fence_around(prompt);
            blocks.emplace_back("**System prompt**");
            blocks.push_back(fmt::format("{}text\n{}\n{}", fence, prompt, fence));
        }
        for (const Message& m : *messages) {
            blocks.emplace_back(role_heading(m.role));
            if (std::string body = message_body(m.content); !body.empty()) blocks.push_back(std::move(body));
            if (std::string note = state_note(m); !note.empty()) blocks.push_back(std::move(note));
            if (options.stats && m.role == "assistant") {
                if (std::string line = stats_line(m.stats); !line.empty()) blocks.push_back(std::move(line));
                // "*Continued on CPU (8 threads) after GPU 1 failed at token 37: Xid 79, ...*"
                for (const MessageRecovery& r : m.stats.recoveries) {
                    blocks.push_back(fmt::format("*{}*", inline_text(recovery_text(r))));
                }
                // "*GPU 0 throttled (power cap) for 40% of the answer, 18% slower*"
                if (!m.stats.throttle.empty()) blocks.push_back(fmt::format("*{}*", inline_text(m.stats.throttle)));
            }
        }
    }
    if (blocks.empty()) return std::string();
    return fmt::format("{}\n", fmt::join(blocks, "\n\n"));
}

Result<void> check_import_size(uint64_t bytes, uint64_t max_bytes) {
    if (bytes <= max_bytes) return {};
    const auto size = [](uint64_t n) {
        return n < (uint64_t{1} << 20) ? fmt::format("{} bytes", n)
                                       : fmt::format("{:.1f} MiB", static_cast<double>(n) / (1 << 20));
    };
    return make_error(ErrorCode::invalid_argument, fmt::format("the file is {}; Powerhouse imports files of up to {}",
                                                               size(bytes), size(max_bytes)));
}

Result<std::vector<ConversationRecord>> read_import(std::string_view text, const ImportOptions& options) {
    PH_TRY(check_import_size(text.size(), options.max_bytes));
    Json doc;
    try {
        doc = Json::parse(text);
    } catch (const Json::parse_error& e) {
        return make_error(ErrorCode::format, "not valid JSON: " + parse_problem(e.what()));
    }
    const int64_t now = options.now_ms != 0 ? options.now_ms : clock_ms();
    return read_document(doc, now);
}

Result<ImportReport> import_records(Store& store, const std::vector<ConversationRecord>& records) {
    Result<std::vector<int64_t>> ids = store.insert_conversations(records);
    if (!ids) return std::move(ids).error();
    ImportReport report;
    report.conversations = static_cast<int>(records.size());
    for (const ConversationRecord& r : records) report.messages += static_cast<int>(r.messages.size());
    report.ids = std::move(ids).value();
    return report;
}

Result<ImportReport> import_json(Store& store, std::string_view text, const ImportOptions& options) {
    Result<std::vector<ConversationRecord>> records = read_import(text, options);
    if (!records) return std::move(records).error();
    return import_records(store, *records);
}

}  // namespace powerhouse::store
