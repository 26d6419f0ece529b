// Filters over text and numbers: trim, upper, replace, indent, tojson, int, round, ...
// Semantics follow jinja2 3.1 (e.g. `title` splits words on dashes and brackets too, and
// `indent` leaves the first line alone unless first=true); tojson is transformers'
// json.dumps wrapper (ensure_ascii=False, indent, separators, sort_keys).
#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "template/builtins_internal.h"
#include "template/text.h"

namespace powerhouse::jinja {

namespace {

Value filter_trim(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder bound("trim", args, {"chars"}, 0);
    const std::string text = text_of(interp, v);
    const Value& chars = bound.get(0, kNone);
    if (chars.is_none()) return Value(std::string(py_strip(text, nullptr)));
    const std::string set = text_of(interp, chars);
    return Value(std::string(py_strip(text, &set)));
}

Value filter_upper(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder("upper", args, {}, 0);
    return interp.make_string(py_upper(text_of(interp, v)));
}

Value filter_lower(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder("lower", args, {}, 0);
    return interp.make_string(py_lower(text_of(interp, v)));
}

Value filter_capitalize(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder("capitalize", args, {}, 0);
    return interp.make_string(py_capitalize(text_of(interp, v)));
}

// jinja2's title: words begin after whitespace, '-', '(', '{', '[' or '<'.
Value filter_title(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder("title", args, {}, 0);
    const std::string text = text_of(interp, v);
    std::string out;
    bool word_start = true;
    for (size_t i = 0; i < text.size();) {
        const size_t start = i;
        const char32_t cp = next_code_point(text, i);
        const bool separator = py_isspace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        const std::string_view piece(text.data() + start, i - start);
        if (separator) {
            out += piece;
            word_start = true;
        } else if (word_start) {
            out += py_upper(piece);
            word_start = false;
        } else {
            out += py_lower(piece);
        }
    }
    return interp.make_string(std::move(out));
}

Value filter_replace(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder bound("replace", args, {"old", "new", "count"}, 2);
    const std::string text = text_of(interp, v);
    const std::string old_text = text_of(interp, bound[0]);
    const std::string new_text = text_of(interp, bound[1]);
    const Value& count_value = bound.get(2, kNone);
    const int64_t count = count_value.is_none() ? -1 : int_arg(count_value, "replace() count");
    // Bound the result before building it: each replacement can grow the text.
    const uint64_t occurrences = old_text.empty() ? code_point_count(text) + 1 : text.size() / old_text.size();
    const uint64_t replaced = count < 0 ? occurrences : std::min<uint64_t>(occurrences, static_cast<uint64_t>(count));
    if (new_text.size() > old_text.size()) {
        const uint64_t growth = new_text.size() - old_text.size();
        if (replaced > 0 && growth > interp.budget().limits().max_output_bytes / replaced) {
            interp.budget().check_string_size(interp.budget().limits().max_output_bytes + 1);
        }
        interp.budget().check_string_size(text.size() + replaced * growth);
    }
    return interp.make_string(py_replace(text, old_text, new_text, count));
}

Value filter_string(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder("string", args, {}, 0);
    if (v.is_string()) return v;
    return interp.make_string(text_of(interp, v));
}

Value filter_safe(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder("safe", args, {}, 0);
    if (v.is_string()) return v;
    return interp.make_string(text_of(interp, v));
}

Value filter_escape(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder("escape", args, {}, 0);
    const std::string text = text_of(interp, v);
    std::string out;
    for (char c : text) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&#34;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out.push_back(c);
        }
    }
    return interp.make_string(std::move(out));
}

Value filter_center(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder bound("center", args, {"width"}, 0);
    const std::string text = text_of(interp, v);
    const int64_t width = bound.has(0) ? int_arg(bound[0], "center() width") : 80;
    const auto length = static_cast<int64_t>(code_point_count(text));
    if (width <= length) return Value(text);
    interp.budget().check_string_size(static_cast<uint64_t>(width));
    const int64_t margin = width - length;
    const int64_t left = margin / 2 + (margin & width & 1);  // Python's str.center
    return interp.make_string(std::string(static_cast<size_t>(left), ' ') + text +
                              std::string(static_cast<size_t>(margin - left), ' '));
}

Value filter_indent(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder bound("indent", args, {"width", "first", "blank"}, 0);
    std::string indentation;
    const Value& width = bound.get(0, Value(int64_t{4}));
    if (width.is_string()) {
        indentation = width.as_string();
    } else {
        const int64_t n = int_arg(width, "indent() width");
        interp.budget().check_string_size(static_cast<uint64_t>(std::max<int64_t>(n, 0)));
        indentation = std::string(static_cast<size_t>(std::max<int64_t>(n, 0)), ' ');
    }
    const bool first = bound.get(1, kFalse).truthy();
    const bool blank = bound.get(2, kFalse).truthy();
    const std::string text = text_of(interp, v) + "\n";  // jinja2 appends one for splitlines
    const std::vector<std::string> lines = py_splitlines(text, false);
    interp.budget().check_string_size(text.size() + lines.size() * (indentation.size() + 1));
    std::string out;
    if (blank) {
        for (size_t i = 0; i < lines.size(); ++i) {
            if (i > 0) out += "\n" + indentation;
            out += lines[i];
        }
    } else {
        out = lines.empty() ? std::string() : lines[0];
        for (size_t i = 1; i < lines.size(); ++i) {
            out += "\n";
            if (!lines[i].empty()) out += indentation;
            out += lines[i];
        }
    }
    if (first) out = indentation + out;
    return interp.make_string(std::move(out));
}

Value filter_truncate(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder bound("truncate", args, {"length", "killwords", "end", "leeway"}, 0);
    const std::string text = text_of(interp, v);
    const int64_t length = bound.has(0) ? int_arg(bound[0], "truncate() length") : 255;
    const bool killwords = bound.get(1, kFalse).truthy();
    const std::string end = bound.has(2) ? text_of(interp, bound[2]) : "...";
    const Value& leeway_value = bound.get(3, kNone);
    const int64_t leeway = leeway_value.is_none() ? 5 : int_arg(leeway_value, "truncate() leeway");
    const auto end_length = static_cast<int64_t>(code_point_count(end));
    if (length < end_length) fail(ErrorKind::value, fmt::format("expected length >= {}, got {}", end_length, length));
    if (leeway < 0) fail(ErrorKind::value, fmt::format("expected leeway >= 0, got {}", leeway));
    const std::vector<size_t> offsets = code_point_offsets(text);
    const auto n = static_cast<int64_t>(offsets.size()) - 1;
    if (n <= length + leeway) return Value(text);
    std::string head = text.substr(0, offsets[static_cast<size_t>(length - end_length)]);
    if (!killwords) {
        const size_t space = head.rfind(' ');
        if (space != std::string::npos) head.resize(space);
    }
    return interp.make_string(head + end);
}

Value filter_wordcount(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder("wordcount", args, {}, 0);
    const std::string text = text_of(interp, v);
    int64_t words = 0;
    bool in_word = false;
    for (size_t i = 0; i < text.size();) {
        const char32_t cp = next_code_point(text, i);
        std::string one;
        append_utf8(one, cp);
        const bool word_char = cp == '_' || py_isalnum(one);
        if (word_char && !in_word) ++words;
        in_word = word_char;
    }
    return Value(words);
}

Value filter_format(Interpreter& interp, const Value& v, Args& args) {
    const std::string text = text_of(interp, v);
    if (!args.positional.empty() && !args.keyword.empty()) {
        fail(ErrorKind::type, "can't handle positional and keyword arguments at the same time");
    }
    if (!args.keyword.empty()) {
        DictObject dict;
        for (auto& [name, value] : args.keyword) dict.set(Value(name), value);
        return interp.make_string(percent_format(interp, text, interp.make_dict(std::move(dict))));
    }
    return interp.make_string(percent_format(interp, text, interp.make_list(args.positional, SequenceKind::tuple)));
}

Value filter_tojson(Interpreter& interp, const Value& v, Args& args) {
    // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    ArgBinder bound("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}, 0);
    JsonFormat format;
    format.ensure_ascii = bound.get(0, kFalse).truthy();
    const Value& indent = bound.get(1, kNone);
    if (!indent.is_none()) {
        format.indent_set = true;
        if (indent.is_string()) {
            format.indent = indent.as_string();
        } else {
            const int64_t n = int_arg(indent, "tojson() indent");
            if (n > 1000) fail(ErrorKind::limit, "tojson() indent too large");
            format.indent = std::string(static_cast<size_t>(std::max<int64_t>(n, 0)), ' ');
        }
        format.item_separator = ",";
    }
    const Value& separators = bound.get(2, kNone);
    if (!separators.is_none()) {
        const std::vector<Value> parts = interp.iterate(separators);
        if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string()) {
            fail(ErrorKind::value, "tojson() separators must be a pair of strings");
        }
        format.item_separator = parts[0].as_string();
        format.key_separator = parts[1].as_string();
    }
    format.sort_keys = bound.get(3, kFalse).truthy();
    std::string out;
    append_json(out, v, format, interp.budget());
    return interp.make_string(std::move(out));
}

// Python's int(str, base): optional sign, underscores between digits, surrounding space.
bool parse_int(std::string_view text, int64_t base, int64_t& out) {
    std::string_view s = py_strip(text, nullptr);
    bool negative = false;
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
        negative = s[0] == '-';
        s.remove_prefix(1);
    }
    if (base == 16 && s.size() > 2 && s[0] == '0' && (s[1] | 0x20) == 'x') s.remove_prefix(2);
    if (base == 8 && s.size() > 2 && s[0] == '0' && (s[1] | 0x20) == 'o') s.remove_prefix(2);
    if (base == 2 && s.size() > 2 && s[0] == '0' && (s[1] | 0x20) == 'b') s.remove_prefix(2);
    if (s.empty() || s.front() == '_' || s.back() == '_') return false;
    uint64_t value = 0;
    char previous = 0;
    for (char c : s) {
        if (c == '_') {
            if (previous == '_') return false;
            previous = c;
            continue;
        }
        previous = c;
        int d = -1;
        if (c >= '0' && c <= '9') d = c - '0';
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') d = (c | 0x20) - 'a' + 10;
        if (d < 0 || d >= base) return false;
        if (value > (static_cast<uint64_t>(INT64_MAX) - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) {
            fail(ErrorKind::value, "integer overflow: values beyond 64 bits are not supported");
        }
        value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    }
    out = negative ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
    return true;
}

// Python's float(str): decimal or exponent notation, "inf", "nan", underscores.
bool parse_float(std::string_view text, double& out) {
    std::string s;
    for (char c : py_strip(text, nullptr)) {
        if (c != '_') s.push_back(c);
    }
    if (s.empty()) return false;
    std::string lower = py_lower(s);
    const bool negative = lower[0] == '-';
    const std::string_view body = std::string_view(lower).substr(lower[0] == '-' || lower[0] == '+' ? 1 : 0);
    if (body == "inf" || body == "infinity") {
        out = negative ? -HUGE_VAL : HUGE_VAL;
        return true;
    }
    if (body == "nan") {
        out = std::nan("");
        return true;
    }
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    const auto result = std::from_chars(begin, s.data() + s.size(), out);
    if (result.ptr != s.data() + s.size()) return false;
    if (result.ec == std::errc::result_out_of_range) {
        // Python: overflow gives inf, underflow 0.0
        const size_t e = lower.find('e');
        const bool tiny = e != std::string::npos && e + 1 < lower.size() && lower[e + 1] == '-';
        out = tiny ? (negative ? -0.0 : 0.0) : (negative ? -HUGE_VAL : HUGE_VAL);
        return true;
    }
    return result.ec == std::errc();
}

Value filter_int(Interpreter&, const Value& v, Args& args) {
    ArgBinder bound("int", args, {"default", "base"}, 0);
    const Value fallback = bound.get(0, Value(int64_t{0}));
    const int64_t base = bound.has(1) ? int_arg(bound[1], "int() base") : 10;
    if (v.is_int() || v.is_bool()) return Value(v.to_int());
    if (v.is_float()) {
        const double d = v.as_float();
        if (std::isnan(d)) return fallback;
        if (std::isinf(d)) fail(ErrorKind::value, "cannot convert float infinity to integer");
        if (std::fabs(d) >= 9.2e18) fail(ErrorKind::value, "integer overflow: values beyond 64 bits are not supported");
        return Value(static_cast<int64_t>(d));
    }
    if (v.is_string()) {
        int64_t i = 0;
        if (base >= 2 && base <= 36 && parse_int(v.as_string(), base, i)) return Value(i);
        double d = 0;
        if (parse_float(v.as_string(), d) && !std::isnan(d)) {
            // int(float("inf")) raises OverflowError, which jinja2's int filter lets through.
            if (std::isinf(d)) fail(ErrorKind::value, "cannot convert float infinity to integer");
            if (std::fabs(d) >= 9.2e18)
                fail(ErrorKind::value, "integer overflow: values beyond 64 bits are not supported");
            return Value(static_cast<int64_t>(d));
        }
    }
    return fallback;
}

Value filter_float(Interpreter&, const Value& v, Args& args) {
    ArgBinder bound("float", args, {"default"}, 0);
    const Value fallback = bound.get(0, Value(0.0));
    if (v.is_number()) return Value(v.to_double());
    double d = 0;
    if (v.is_string() && parse_float(v.as_string(), d)) return Value(d);
    return fallback;
}

Value filter_abs(Interpreter&, const Value& v, Args& args) {
    ArgBinder("abs", args, {}, 0);
    if (v.is_float()) return Value(std::fabs(v.as_float()));
    if (v.is_int() || v.is_bool()) {
        if (v.to_int() == INT64_MIN)
            fail(ErrorKind::value, "integer overflow: values beyond 64 bits are not supported");
        return Value(v.to_int() < 0 ? -v.to_int() : v.to_int());
    }
    if (v.is_undefined()) fail_undefined(v);
    fail(ErrorKind::type, fmt::format("bad operand type for abs(): '{}'", v.type_name()));
}

Value filter_round(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder bound("round", args, {"precision", "method"}, 0);
    const int64_t precision = bound.has(0) ? int_arg(bound[0], "round() precision") : 0;
    const std::string method = bound.has(1) ? text_of(interp, bound[1]) : "common";
    if (method != "common" && method != "ceil" && method != "floor") {
        fail(ErrorKind::value, "method must be 'common', 'ceil' or 'floor'");
    }
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_number()) fail(ErrorKind::type, fmt::format("type {} doesn't define __round__ method", v.type_name()));
    if (method == "common" && !v.is_float()) return Value(v.to_int());
    const double d = v.to_double();
    if (precision < -308 || precision > 308) return Value(d);
    if (method == "common") {
        if (!std::isfinite(d)) return Value(d);
        if (precision < 0) {
            const double scale = std::pow(10.0, static_cast<double>(-precision));
            return Value(std::nearbyint(d / scale) * scale);
        }
        // Correctly rounded decimal digits (round-half-even on the exact binary value), as
        // Python's round() computes them.
        const std::string digits = fmt::format("{:.{}f}", d, precision);
        double r = 0;
        std::from_chars(digits.data(), digits.data() + digits.size(), r);
        return Value(r);
    }
    const double scale = std::pow(10.0, static_cast<double>(precision));
    return Value((method == "ceil" ? std::ceil(d * scale) : std::floor(d * scale)) / scale);
}

constexpr FilterEntry kTextFilters[] = {
    {"trim", filter_trim},           {"upper", filter_upper},
    {"lower", filter_lower},         {"capitalize", filter_capitalize},
    {"title", filter_title},         {"replace", filter_replace},
    {"string", filter_string},       {"safe", filter_safe},
    {"escape", filter_escape},       {"e", filter_escape},
    {"forceescape", filter_escape},  {"center", filter_center},
    {"indent", filter_indent},       {"truncate", filter_truncate},
    {"wordcount", filter_wordcount}, {"format", filter_format},
    {"tojson", filter_tojson},       {"int", filter_int},
    {"float", filter_float},         {"abs", filter_abs},
    {"round", filter_round},
};

}  // namespace

std::span<const FilterEntry> text_filters() {
    return kTextFilters;
}

}  // namespace powerhouse::jinja
