// The XML tool-call formats (powerhouse/tool_calls.h): Qwen3-Coder's and Seed-OSS's
// <function=NAME><parameter=ARG>VALUE</parameter></function> blocks, GLM-4.5's
// NAME<arg_key>ARG</arg_key><arg_value>VALUE</arg_value>, and the values' types from the
// tools' schemas (with Python literals, which the templates write with str()).
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>

#include "template/tool_call_reading.h"
#include "tokenizer/utf8.h"

namespace powerhouse::tool_reading {

namespace {

constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";
constexpr std::string_view kArgKeyOpen = "<arg_key>";
constexpr std::string_view kArgKeyClose = "</arg_key>";
constexpr std::string_view kArgValueOpen = "<arg_value>";
constexpr std::string_view kArgValueClose = "</arg_value>";

// anyOf inside anyOf deeper than this says nothing more about a value's type.
constexpr int kMaxSchemaDepth = 16;
// Python literals nested deeper than this are no value (as JSON's kMaxJsonDepth).
constexpr int kMaxLiteralDepth = 128;

size_t skip_blanks(std::string_view text, size_t pos) {
    while (pos < text.size() && is_space(text[pos])) ++pos;
    return pos;
}

std::string_view trim_blanks(std::string_view text) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    return text;
}

// A name written between tags: not empty, on one line, no tag characters.
bool plain_name(std::string_view name) {
    return !name.empty() && name.find_first_of("<>\n\r") == std::string_view::npos;
}

unsigned kind_of_name(std::string_view type) {
    if (type == "string") return kind_bit(JsonKind::string);
    if (type == "number") return kind_bit(JsonKind::number);
    if (type == "integer") return kind_bit(JsonKind::integer);
    if (type == "boolean") return kind_bit(JsonKind::boolean);
    if (type == "null") return kind_bit(JsonKind::null);
    if (type == "object") return kind_bit(JsonKind::object);
    if (type == "array") return kind_bit(JsonKind::array);
    return 0;
}

unsigned kind_of_value(const nlohmann::ordered_json& value) {
    if (value.is_string()) return kind_bit(JsonKind::string);
    if (value.is_number_integer()) return kind_bit(JsonKind::integer) | kind_bit(JsonKind::number);
    if (value.is_number()) return kind_bit(JsonKind::number);
    if (value.is_boolean()) return kind_bit(JsonKind::boolean);
    if (value.is_null()) return kind_bit(JsonKind::null);
    if (value.is_object()) return kind_bit(JsonKind::object);
    return kind_bit(JsonKind::array);
}

unsigned kinds_at(const nlohmann::ordered_json& schema, int depth) {
    if (!schema.is_object() || depth > kMaxSchemaDepth) return 0;
    unsigned kinds = 0;
    if (auto type = schema.find("type"); type != schema.end()) {
        if (type->is_string()) kinds |= kind_of_name(type->get_ref<const std::string&>());
        if (type->is_array()) {
            for (const auto& t : *type) {
                if (t.is_string()) kinds |= kind_of_name(t.get_ref<const std::string&>());
            }
        }
        return kinds;
    }
    if (auto values = schema.find("enum"); values != schema.end() && values->is_array()) {
        for (const auto& v : *values) kinds |= kind_of_value(v);
        return kinds;
    }
    if (auto value = schema.find("const"); value != schema.end()) return kind_of_value(*value);
    for (const char* key : {"anyOf", "oneOf"}) {
        if (auto list = schema.find(key); list != schema.end() && list->is_array()) {
            for (const auto& member : *list) {
                const unsigned k = kinds_at(member, depth + 1);
                if (k == 0) return 0;  // a member that allows anything
                kinds |= k;
            }
        }
    }
    return kinds;
}

// A code point from an escape; lone surrogates and values past Unicode become U+FFFD.
void append_code_point(std::string& out, uint32_t cp) {
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
    append_utf8(out, cp);
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Python's repr() of str, int, float, bool, None, list, tuple and dict, read back as JSON.
class PythonLiteral {
public:
    explicit PythonLiteral(std::string_view text) : text_(text) {}

    std::optional<nlohmann::ordered_json> read() {
        std::optional<nlohmann::ordered_json> value = next(0);
        if (!value || skip() != text_.size()) return std::nullopt;
        return value;
    }

private:
    size_t skip() { return pos_ = skip_blanks(text_, pos_); }

    bool take(char c) {
        if (skip() < text_.size() && text_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }

    std::optional<nlohmann::ordered_json> next(int depth) {
        if (depth > kMaxLiteralDepth || skip() >= text_.size()) return std::nullopt;
        const char c = text_[pos_];
        if (c == '\'' || c == '"') {
            std::optional<std::string> s = string();
            if (!s) return std::nullopt;
            return nlohmann::ordered_json(std::move(*s));
        }
        if (c == '[' || c == '(') return sequence(c == '[' ? ']' : ')', depth);
        if (c == '{') return mapping(depth);
        size_t end = pos_;
        while (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) != 0 || text_[end] == '.' ||
                                      text_[end] == '-' || text_[end] == '+')) {
            ++end;
        }
        const std::string_view word = text_.substr(pos_, end - pos_);
        pos_ = end;
        if (word == "None") return nlohmann::ordered_json(nullptr);
        if (word == "True") return nlohmann::ordered_json(true);
        if (word == "False") return nlohmann::ordered_json(false);
        std::optional<nlohmann::ordered_json> number = parse_json(word);
        if (!number || !number->is_number()) return std::nullopt;
        return number;
    }

    std::optional<std::string> string() {
        const char quote = text_[pos_++];
        std::string out;
        while (pos_ < text_.size() && text_[pos_] != quote) {
            const char c = text_[pos_++];
            if (c == '\n') return std::nullopt;
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= text_.size()) return std::nullopt;
            const char e = text_[pos_++];
            size_t digits = 0;
            switch (e) {
                case 'n':
                    out += '\n';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case '0':
                    out += '\0';
                    break;
                case '\\':
                case '\'':
                case '"':
                    out += e;
                    break;
                case 'x':
                    digits = 2;
                    break;
                case 'u':
                    digits = 4;
                    break;
                case 'U':
                    digits = 8;
                    break;
                default:
                    out += '\\';
                    out += e;
                    break;
            }
            if (digits == 0) continue;
            uint32_t cp = 0;
            for (size_t i = 0; i < digits; ++i) {
                const int h = pos_ < text_.size() ? hex_value(text_[pos_]) : -1;
                if (h < 0) return std::nullopt;
                cp = cp * 16 + static_cast<uint32_t>(h);
                ++pos_;
            }
            append_code_point(out, cp);
        }
        if (pos_ >= text_.size()) return std::nullopt;
        ++pos_;
        return out;
    }

    std::optional<nlohmann::ordered_json> sequence(char close, int depth) {
        ++pos_;
        nlohmann::ordered_json list = nlohmann::ordered_json::array();
        while (!take(close)) {
            std::optional<nlohmann::ordered_json> item = next(depth + 1);
            if (!item) return std::nullopt;
            list.push_back(std::move(*item));
            if (!take(',') && !(skip() < text_.size() && text_[pos_] == close)) return std::nullopt;
        }
        return list;
    }

    std::optional<nlohmann::ordered_json> mapping(int depth) {
        ++pos_;
        nlohmann::ordered_json object = nlohmann::ordered_json::object();
        while (!take('}')) {
            std::optional<nlohmann::ordered_json> key = next(depth + 1);
            if (!key || key->is_array() || key->is_object() || !take(':')) return std::nullopt;
            std::optional<nlohmann::ordered_json> value = next(depth + 1);
            if (!value) return std::nullopt;
            object[key->is_string() ? key->get<std::string>() : compact_json(*key)] = std::move(*value);
            if (!take(',') && !(skip() < text_.size() && text_[pos_] == '}')) return std::nullopt;
        }
        return object;
    }

    std::string_view text_;
    size_t pos_ = 0;
};

// Qwen3-Coder's template writes "\nVALUE\n" between the parameter's tags.
std::string_view strip_newlines(std::string_view value) {
    if (value.starts_with("\r\n")) {
        value.remove_prefix(2);
    } else if (value.starts_with('\n')) {
        value.remove_prefix(1);
    }
    if (value.ends_with("\r\n")) {
        value.remove_suffix(2);
    } else if (value.ends_with('\n')) {
        value.remove_suffix(1);
    }
    return value;
}

// Where the value from text[begin] ends: at the first `close` tag, or, for a parameter that
// may be other than a string, past a JSON object or array whose strings hold the tag (as a
// grammar's JSON may) when the tag follows it. npos when it does not close.
size_t value_end(std::string_view text, size_t begin, std::string_view close, const nlohmann::ordered_json* schema) {
    const size_t first = text.find(close, begin);
    if (first == std::string_view::npos) return first;
    if (schema && schema_kinds(*schema) == kind_bit(JsonKind::string)) return first;
    const size_t open = skip_blanks(text, begin);
    if (open >= first || (text[open] != '{' && text[open] != '[')) return first;
    const size_t end = json_extent(text, open);
    if (end == std::string_view::npos || end <= first) return first;
    const size_t after = skip_blanks(text, end);
    return text.substr(after).starts_with(close) ? after : first;
}

// <function=NAME> <parameter=ARG>VALUE</parameter>... </function> at text[pos]; npos if not whole.
size_t read_function(std::string_view text, size_t pos, const nlohmann::ordered_json& tools, bool strip,
                     std::vector<ToolCall>& calls) {
    if (!text.substr(pos).starts_with(kFunctionOpen)) return std::string_view::npos;
    pos += kFunctionOpen.size();
    const size_t name_end = text.find('>', pos);
    if (name_end == std::string_view::npos) return std::string_view::npos;
    const std::string_view name = trim_blanks(text.substr(pos, name_end - pos));
    if (!plain_name(name)) return std::string_view::npos;
    nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
    pos = name_end + 1;
    for (;;) {
        pos = skip_blanks(text, pos);
        const std::string_view rest = text.substr(pos);
        if (rest.starts_with(kFunctionClose)) break;
        if (!rest.starts_with(kParameterOpen)) return std::string_view::npos;
        const size_t key_begin = pos + kParameterOpen.size();
        const size_t key_end = text.find('>', key_begin);
        if (key_end == std::string_view::npos) return std::string_view::npos;
        const std::string_view key = trim_blanks(text.substr(key_begin, key_end - key_begin));
        if (!plain_name(key)) return std::string_view::npos;
        const nlohmann::ordered_json* schema = parameter_schema(tools, name, key);
        const size_t close = value_end(text, key_end + 1, kParameterClose, schema);
        if (close == std::string_view::npos) return std::string_view::npos;
        std::string_view value = text.substr(key_end + 1, close - key_end - 1);
        if (strip) value = strip_newlines(value);
        arguments[std::string(key)] = typed_value(value, schema);
        pos = close + kParameterClose.size();
    }
    calls.push_back({"", std::string(name), compact_json(arguments)});
    return pos + kFunctionClose.size();
}

// GLM: NAME <arg_key>ARG</arg_key> <arg_value>VALUE</arg_value>... from text[pos] (after
// <tool_call>) to where </tool_call> (or the end of the text) may follow; npos if not whole.
size_t read_glm_call(std::string_view text, size_t pos, const nlohmann::ordered_json& tools,
                     std::vector<ToolCall>& calls) {
    const std::string_view close_tag = call_tags(ToolCallFormat::glm45).close;
    const size_t name_end = std::min(text.find(kArgKeyOpen, pos), text.find(close_tag, pos));
    const std::string_view name = trim_blanks(text.substr(pos, name_end - pos));
    if (name.empty() || name.find_first_of(" \t\n\r<>{}\"") != std::string_view::npos) return std::string_view::npos;
    // Cut off after the name: only when the name's line ended.
    if (name_end == std::string_view::npos && text.substr(pos).find('\n') == std::string_view::npos) {
        return std::string_view::npos;
    }
    nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
    pos = std::min(name_end, text.size());
    while (text.substr(pos).starts_with(kArgKeyOpen)) {
        const size_t key_begin = pos + kArgKeyOpen.size();
        const size_t key_end = text.find(kArgKeyClose, key_begin);
        if (key_end == std::string_view::npos) return std::string_view::npos;
        const std::string_view key = trim_blanks(text.substr(key_begin, key_end - key_begin));
        pos = skip_blanks(text, key_end + kArgKeyClose.size());
        if (key.empty() || !text.substr(pos).starts_with(kArgValueOpen)) return std::string_view::npos;
        const size_t value_begin = pos + kArgValueOpen.size();
        const nlohmann::ordered_json* schema = parameter_schema(tools, name, key);
        const size_t close = value_end(text, value_begin, kArgValueClose, schema);
        if (close == std::string_view::npos) return std::string_view::npos;
        arguments[std::string(key)] = typed_value(text.substr(value_begin, close - value_begin), schema);
        pos = skip_blanks(text, close + kArgValueClose.size());
    }
    if (pos != text.size() && !text.substr(pos).starts_with(close_tag)) return std::string_view::npos;
    calls.push_back({"", std::string(name), compact_json(arguments)});
    return pos;
}

}  // namespace

TagPair call_tags(ToolCallFormat format) {
    if (format == ToolCallFormat::seed_oss) return {"<seed:tool_call>", "</seed:tool_call>"};
    if (format == ToolCallFormat::qwen3_coder || format == ToolCallFormat::glm45)
        return {"<tool_call>", "</tool_call>"};
    return {};
}

TagPair think_tags(ToolCallFormat format) {
    if (format == ToolCallFormat::seed_oss) return {"<seed:think>", "</seed:think>"};
    if (format == ToolCallFormat::glm45) return {"<think>", "</think>"};
    return {};
}

bool is_xml_format(ToolCallFormat format) {
    return format == ToolCallFormat::qwen3_coder || format == ToolCallFormat::seed_oss ||
           format == ToolCallFormat::glm45;
}

size_t read_xml_calls(ToolCallFormat format, std::string_view text, size_t pos, const nlohmann::ordered_json& tools,
                      std::vector<ToolCall>& calls) {
    const TagPair tags = call_tags(format);
    std::vector<ToolCall> found;
    pos += tags.open.size();
    if (format == ToolCallFormat::glm45) {
        pos = read_glm_call(text, pos, tools, found);
        if (pos == std::string_view::npos) return pos;
    } else {
        // One block may hold several functions.
        do {
            pos = read_function(text, skip_blanks(text, pos), tools, format == ToolCallFormat::qwen3_coder, found);
            if (pos == std::string_view::npos) return pos;
            pos = skip_blanks(text, pos);
        } while (text.substr(pos).starts_with(kFunctionOpen));
        if (pos != text.size() && !text.substr(pos).starts_with(tags.close)) return std::string_view::npos;
    }
    calls.insert(calls.end(), found.begin(), found.end());
    return pos == text.size() ? pos : pos + tags.close.size();
}

unsigned schema_kinds(const nlohmann::ordered_json& schema) {
    return kinds_at(schema, 0);
}

const nlohmann::ordered_json* parameter_schema(const nlohmann::ordered_json& tools, std::string_view function,
                                               std::string_view parameter) {
    if (!tools.is_array()) return nullptr;
    for (const auto& tool : tools) {
        const nlohmann::ordered_json* f = &tool;
        if (tool.is_object() && tool.contains("function")) f = &tool["function"];
        if (!f->is_object()) continue;
        auto name = f->find("name");
        if (name == f->end() || !name->is_string() || name->get_ref<const std::string&>() != function) continue;
        auto parameters = f->find("parameters");
        if (parameters == f->end() || !parameters->is_object()) return nullptr;
        auto properties = parameters->find("properties");
        if (properties == parameters->end() || !properties->is_object()) return nullptr;
        auto schema = properties->find(std::string(parameter));
        return schema == properties->end() ? nullptr : &*schema;
    }
    return nullptr;
}

nlohmann::ordered_json typed_value(std::string_view text, const nlohmann::ordered_json* schema) {
    const unsigned string_bit = kind_bit(JsonKind::string);
    const unsigned kinds = schema ? schema_kinds(*schema) : 0;
    if (kinds == string_bit) return std::string(text);
    const std::string_view trimmed = trim_blanks(text);
    std::optional<nlohmann::ordered_json> value = parse_json(trimmed);
    if (!value && schema) value = python_literal(trimmed);
    if (!value || value->is_string()) return std::string(text);
    if (kinds == 0 || (kinds & string_bit) == 0) return *value;
    // May be a string or something else: the other kind only when the text is one.
    return (kind_of_value(*value) & kinds & ~string_bit) != 0 ? *value : nlohmann::ordered_json(std::string(text));
}

std::optional<nlohmann::ordered_json> python_literal(std::string_view text) {
    return PythonLiteral(text).read();
}

}  // namespace powerhouse::tool_reading
