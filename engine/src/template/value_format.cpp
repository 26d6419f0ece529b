#include "template/value_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "template/interpreter_objects.h"
#include "template/text.h"

namespace powerhouse::jinja {

std::string py_float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof(buffer), d, std::chars_format::scientific);
    const std::string_view sci(buffer, static_cast<size_t>(result.ptr - buffer));
    // sci is "[-]D[.DDD]e[+-]XX": split into sign, digits and exponent.
    const bool negative = sci.front() == '-';
    const size_t e = sci.find('e');
    std::string digits;
    for (char c : sci.substr(negative ? 1 : 0, e - (negative ? 1 : 0))) {
        if (c != '.') digits.push_back(c);
    }
    int exponent = 0;
    std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exponent);
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    const int decpt = exponent + 1;  // value = 0.DIGITS * 10^decpt
    const int n = static_cast<int>(digits.size());
    std::string out = negative ? "-" : "";
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
        } else if (decpt >= n) {
            out += digits + std::string(static_cast<size_t>(decpt - n), '0') + ".0";
        } else {
            out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
        }
        return out;
    }
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    const int exp10 = decpt - 1;
    out += fmt::format("e{}{:02d}", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return out;
}

namespace {

// Python's str.isprintable, for repr(): control, format, separator (but space) and
// private-use characters are escaped.
bool py_is_printable(char32_t cp) {
    if (cp < 0x20 || cp == 0x7F) return false;
    if (cp < 0x7F) return true;
    if (cp <= 0xA0 || cp == 0xAD) return false;
    if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
        (cp >= 0x205F && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF ||
        (cp >= 0xFFF9 && cp <= 0xFFFB) || cp == 0xFFFE || cp == 0xFFFF) {
        return false;
    }
    if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61C || cp == 0x6DD || cp == 0x70F || cp == 0x180E) return false;
    if (cp >= 0xE000 && cp <= 0xF8FF) return false;
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;
    return true;
}

// End of the run of bytes from `from` that need no escaping: printable ASCII other than
// the quote and the backslash, plus (for JSON without ensure_ascii) bytes of non-ASCII
// characters. A raw-pointer loop: this runs over every byte of long messages.
size_t plain_run(std::string_view s, size_t from, char quote, bool allow_non_ascii) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    const auto q = static_cast<unsigned char>(quote);
    size_t i = from;
    while (i < n) {
        const unsigned char c = p[i];
        if (c < 0x20 || c == q || c == '\\' || (c >= 0x7F && !(allow_non_ascii && c >= 0x80))) break;
        ++i;
    }
    return i;
}

void append_escaped_cp(std::string& out, char32_t cp) {
    if (cp < 0x100) {
        out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else if (cp < 0x10000) {
        out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
    } else {
        out += fmt::format("\\U{:08x}", static_cast<unsigned>(cp));
    }
}

}  // namespace

void append_py_string_repr(std::string& out, std::string_view s) {
    const bool has_single = s.find('\'') != std::string_view::npos;
    const bool has_double = s.find('"') != std::string_view::npos;
    const char quote = has_single && !has_double ? '"' : '\'';
    out.push_back(quote);
    for (size_t i = 0; i < s.size();) {
        // Copy runs of printable ASCII in one piece (long messages are mostly that).
        const size_t run = plain_run(s, i, quote, false);
        if (run > i) {
            out.append(s, i, run - i);
            i = run;
            continue;
        }
        const char32_t cp = next_code_point(s, i);
        if (cp == static_cast<char32_t>(quote) || cp == '\\') {
            out.push_back('\\');
            out.push_back(static_cast<char>(cp));
        } else if (cp == '\n') {
            out += "\\n";
        } else if (cp == '\r') {
            out += "\\r";
        } else if (cp == '\t') {
            out += "\\t";
        } else if (!py_is_printable(cp)) {
            append_escaped_cp(out, cp);
        } else {
            append_utf8(out, cp);
        }
    }
    out.push_back(quote);
}

namespace {

void append_value(std::string& out, const Value& value, const Budget& budget, bool as_repr) {
    switch (value.kind()) {
        case ValueKind::undefined:
            out += as_repr ? "Undefined" : "";
            return;
        case ValueKind::none:
            out += "None";
            return;
        case ValueKind::boolean:
            out += value.as_bool() ? "True" : "False";
            return;
        case ValueKind::integer:
            out += fmt::format("{}", value.as_int());
            return;
        case ValueKind::floating:
            out += py_float_repr(value.as_float());
            return;
        case ValueKind::string:
            budget.check_string_size(out.size() + value.as_string().size());  // before copying
            if (as_repr) {
                append_py_string_repr(out, value.as_string());
            } else {
                out += value.as_string();
            }
            break;
        case ValueKind::list: {
            const ListObject& list = value.as_list();
            if (list.kind == SequenceKind::generator) {
                out += "<generator object>";
                return;
            }
            const bool tuple = list.kind == SequenceKind::tuple;
            out.push_back(tuple ? '(' : '[');
            for (size_t i = 0; i < list.items.size(); ++i) {
                if (i > 0) out += ", ";
                append_value(out, list.items[i], budget, true);
                budget.check_string_size(out.size());
            }
            if (tuple && list.items.size() == 1) out.push_back(',');
            out.push_back(tuple ? ')' : ']');
            break;
        }
        case ValueKind::dict: {
            out.push_back('{');
            bool first = true;
            for (const auto& [key, item] : value.as_dict().entries) {
                if (!first) out += ", ";
                first = false;
                append_value(out, key, budget, true);
                out += ": ";
                append_value(out, item, budget, true);
                budget.check_string_size(out.size());
            }
            out.push_back('}');
            break;
        }
        case ValueKind::function:
            out += fmt::format("<built-in function {}>", value.as_function().name);
            break;
        case ValueKind::macro:
            out += fmt::format("<Macro '{}'>", value.as_macro()->name);
            break;
        case ValueKind::name_space: {
            // The namespace may hold itself: the depth limit ends the recursion.
            static thread_local uint32_t depth = 0;
            if (depth >= budget.max_data_depth())
                fail(ErrorKind::limit, "a namespace contains itself too deeply to print");
            ++depth;
            out += "<Namespace {";
            bool first = true;
            try {
                for (const auto& [name, item] : value.as_namespace()->attributes) {
                    if (!first) out += ", ";
                    first = false;
                    append_py_string_repr(out, name);
                    out += ": ";
                    append_value(out, item, budget, true);
                    budget.check_string_size(out.size());
                }
            } catch (...) {
                --depth;
                throw;
            }
            --depth;
            out += "}>";
            break;
        }
        case ValueKind::loop: {
            const LoopObject& loop = value.as_loop();
            out += fmt::format("<LoopContext {}/{}>", loop.index0 + 1, loop.length);
            break;
        }
    }
    budget.check_string_size(out.size());
}

}  // namespace

void append_str(std::string& out, const Value& value, const Budget& budget) {
    append_value(out, value, budget, false);
}

std::string to_str(const Value& value, const Budget& budget) {
    if (value.is_string()) return value.as_string();
    std::string out;
    append_str(out, value, budget);
    return out;
}

void append_repr(std::string& out, const Value& value, const Budget& budget) {
    append_value(out, value, budget, true);
}

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
    out.push_back('"');
    for (size_t i = 0; i < s.size();) {
        const size_t run = plain_run(s, i, '"', !ensure_ascii);
        if (run > i) {
            out.append(s, i, run - i);  // already valid UTF-8: no need to decode
            i = run;
            continue;
        }
        const char32_t cp = next_code_point(s, i);
        switch (cp) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            default:
                if (cp < 0x20 || (ensure_ascii && cp > 0x7E)) {
                    if (cp >= 0x10000) {
                        const char32_t v = cp - 0x10000;
                        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
                    } else {
                        out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
                    }
                } else {
                    append_utf8(out, cp);
                }
        }
    }
    out.push_back('"');
}

namespace {

std::string json_key(const Value& key) {
    switch (key.kind()) {
        case ValueKind::string:
            return key.as_string();
        case ValueKind::boolean:
            return key.as_bool() ? "true" : "false";
        case ValueKind::none:
            return "null";
        case ValueKind::integer:
            return fmt::format("{}", key.as_int());
        case ValueKind::floating: {
            const double d = key.as_float();
            if (std::isnan(d)) return "NaN";
            if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
            return py_float_repr(d);
        }
        default:
            fail(ErrorKind::type, fmt::format("keys must be str, int, float, bool or None, not {}", key.type_name()));
    }
}

void append_json_value(std::string& out, const Value& value, const JsonFormat& format, const Budget& budget,
                       uint32_t level) {
    auto newline = [&](uint32_t at) {
        if (!format.indent_set) return;
        out.push_back('\n');
        for (uint32_t i = 0; i < at; ++i) out += format.indent;
        budget.check_string_size(out.size());
    };
    switch (value.kind()) {
        case ValueKind::none:
            out += "null";
            break;
        case ValueKind::boolean:
            out += value.as_bool() ? "true" : "false";
            break;
        case ValueKind::integer:
            out += fmt::format("{}", value.as_int());
            break;
        case ValueKind::floating: {
            const double d = value.as_float();
            if (std::isnan(d)) {
                out += "NaN";
            } else if (std::isinf(d)) {
                out += d < 0 ? "-Infinity" : "Infinity";
            } else {
                out += py_float_repr(d);
            }
            break;
        }
        case ValueKind::string:
            budget.check_string_size(out.size() + value.as_string().size());  // before copying
            append_json_string(out, value.as_string(), format.ensure_ascii);
            break;
        case ValueKind::list: {
            const ListObject& list = value.as_list();
            if (list.kind == SequenceKind::generator) {
                fail(ErrorKind::type, "Object of type generator is not JSON serializable");
            }
            if (list.items.empty()) {
                out += "[]";
                break;
            }
            out.push_back('[');
            for (size_t i = 0; i < list.items.size(); ++i) {
                if (i > 0) out += format.item_separator;
                newline(level + 1);
                append_json_value(out, list.items[i], format, budget, level + 1);
                budget.check_string_size(out.size());
            }
            newline(level);
            out.push_back(']');
            break;
        }
        case ValueKind::dict: {
            const DictObject& dict = value.as_dict();
            if (dict.entries.empty()) {
                out += "{}";
                break;
            }
            std::vector<std::pair<std::string, const Value*>> entries;
            entries.reserve(dict.entries.size());
            for (const auto& [key, item] : dict.entries) entries.emplace_back(json_key(key), &item);
            if (format.sort_keys) {
                for (const auto& [key, item] : dict.entries) {
                    if (!key.is_string())
                        fail(ErrorKind::type, "'<' not supported between dict keys of different types");
                }
                std::stable_sort(entries.begin(), entries.end(),
                                 [](const auto& a, const auto& b) { return a.first < b.first; });
            }
            out.push_back('{');
            for (size_t i = 0; i < entries.size(); ++i) {
                if (i > 0) out += format.item_separator;
                newline(level + 1);
                append_json_string(out, entries[i].first, format.ensure_ascii);
                out += format.key_separator;
                append_json_value(out, *entries[i].second, format, budget, level + 1);
                budget.check_string_size(out.size());
            }
            newline(level);
            out.push_back('}');
            break;
        }
        default:
            fail(ErrorKind::type, fmt::format("Object of type {} is not JSON serializable", value.type_name()));
    }
    budget.check_string_size(out.size());
}

}  // namespace

void append_json(std::string& out, const Value& value, const JsonFormat& format, const Budget& budget) {
    append_json_value(out, value, format, budget, 0);
}

}  // namespace powerhouse::jinja
