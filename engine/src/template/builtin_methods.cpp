// The Python methods templates call on values: str (strip, split, startswith, replace,
// format, ...), dict (items, keys, values, get) and list (index, count). Methods that
// would mutate (list.append, dict.update, ...) are refused, as jinja2's
// ImmutableSandboxedEnvironment refuses them.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "template/builtins_internal.h"
#include "template/text.h"

namespace powerhouse::jinja {

namespace {

const std::string& self_string(const FunctionObject& f) {
    return f.self.as_string();
}

std::string string_arg(const Value& v, std::string_view method) {
    if (v.is_string()) return v.as_string();
    if (v.is_undefined()) fail_undefined(v);
    fail(ErrorKind::type, fmt::format("{}() argument must be str, not {}", method, v.type_name()));
}

Value strip_method(Interpreter&, const FunctionObject& f, Args& args, StripSide side, const char* name) {
    ArgBinder bound(name, args, {"chars"}, 0);
    const Value& chars = bound.get(0, kNone);
    if (chars.is_none()) return Value(std::string(py_strip(self_string(f), nullptr, side)));
    const std::string set = string_arg(chars, name);
    return Value(std::string(py_strip(self_string(f), &set, side)));
}

Value m_strip(Interpreter& i, const FunctionObject& f, Args& a) {
    return strip_method(i, f, a, StripSide::both, "strip");
}
Value m_lstrip(Interpreter& i, const FunctionObject& f, Args& a) {
    return strip_method(i, f, a, StripSide::left, "lstrip");
}
Value m_rstrip(Interpreter& i, const FunctionObject& f, Args& a) {
    return strip_method(i, f, a, StripSide::right, "rstrip");
}

Value to_list(Interpreter& interp, std::vector<std::string> parts) {
    std::vector<Value> items;
    items.reserve(parts.size());
    for (std::string& p : parts) items.emplace_back(std::move(p));
    return interp.make_list(std::move(items));
}

Value split_method(Interpreter& interp, const FunctionObject& f, Args& args, bool from_right) {
    const char* name = from_right ? "rsplit" : "split";
    ArgBinder bound(name, args, {"sep", "maxsplit"}, 0);
    const Value& sep = bound.get(0, kNone);
    const int64_t max_split = bound.has(1) ? int_arg(bound[1], "maxsplit") : -1;
    if (sep.is_none()) {
        return to_list(interp, from_right ? py_rsplit_whitespace(self_string(f), max_split)
                                          : py_split_whitespace(self_string(f), max_split));
    }
    const std::string separator = string_arg(sep, name);
    if (separator.empty()) fail(ErrorKind::value, "empty separator");
    return to_list(interp, from_right ? py_rsplit(self_string(f), separator, max_split)
                                      : py_split(self_string(f), separator, max_split));
}

Value m_split(Interpreter& i, const FunctionObject& f, Args& a) {
    return split_method(i, f, a, false);
}
Value m_rsplit(Interpreter& i, const FunctionObject& f, Args& a) {
    return split_method(i, f, a, true);
}

Value m_splitlines(Interpreter& interp, const FunctionObject& f, Args& args) {
    ArgBinder bound("splitlines", args, {"keepends"}, 0);
    return to_list(interp, py_splitlines(self_string(f), bound.get(0, Value(false)).truthy()));
}

// Byte range [begin, end) of s for Python's optional start/end code point arguments.
void code_point_range(const std::string& s, const ArgBinder& bound, size_t first_index, size_t& begin, size_t& end) {
    begin = 0;
    end = s.size();
    if (!bound.has(first_index) && !bound.has(first_index + 1)) return;
    const std::vector<size_t> offsets = code_point_offsets(s);
    const auto n = static_cast<int64_t>(offsets.size()) - 1;
    auto clamp = [&](const Value& v, int64_t fallback) {
        if (v.is_none()) return fallback;
        int64_t i = int_arg(v, "slice index");
        if (i < 0) i = std::max<int64_t>(i + n, 0);
        return std::min(i, n);
    };
    const int64_t b = clamp(bound.get(first_index, kNone), 0);
    const int64_t e = clamp(bound.get(first_index + 1, kNone), n);
    begin = offsets[static_cast<size_t>(b)];
    end = std::max(begin, offsets[static_cast<size_t>(e)]);
}

Value affix_method(Interpreter& interp, const FunctionObject& f, Args& args, bool prefix) {
    const char* name = prefix ? "startswith" : "endswith";
    ArgBinder bound(name, args, {"prefix", "start", "end"}, 1);
    const std::string& s = self_string(f);
    size_t begin, end;
    code_point_range(s, bound, 1, begin, end);
    const std::string_view view = std::string_view(s).substr(begin, end - begin);
    std::vector<Value> candidates;
    if (bound[0].is_list() && bound[0].as_list().kind == SequenceKind::tuple) {
        candidates = bound[0].as_list().items;
    } else if (bound[0].is_string()) {
        candidates.push_back(bound[0]);
    } else {
        fail(ErrorKind::type,
             fmt::format("{} first arg must be str or a tuple of str, not {}", name, bound[0].type_name()));
    }
    (void)interp;
    for (const Value& c : candidates) {
        const std::string affix = string_arg(c, name);
        if (prefix ? view.starts_with(affix) : view.ends_with(affix)) return Value(true);
    }
    return Value(false);
}

Value m_startswith(Interpreter& i, const FunctionObject& f, Args& a) {
    return affix_method(i, f, a, true);
}
Value m_endswith(Interpreter& i, const FunctionObject& f, Args& a) {
    return affix_method(i, f, a, false);
}

Value find_method_impl(Interpreter&, const FunctionObject& f, Args& args, bool from_right, bool raise,
                       const char* name) {
    ArgBinder bound(name, args, {"sub", "start", "end"}, 1);
    const std::string& s = self_string(f);
    const std::string sub = string_arg(bound[0], name);
    size_t begin, end;
    code_point_range(s, bound, 1, begin, end);
    const std::string_view view = std::string_view(s).substr(begin, end - begin);
    const size_t at = from_right ? view.rfind(sub) : view.find(sub);
    if (at == std::string_view::npos) {
        if (raise) fail(ErrorKind::value, "substring not found");
        return Value(int64_t{-1});
    }
    return Value(static_cast<int64_t>(code_point_count(std::string_view(s).substr(0, begin + at))));
}

Value m_find(Interpreter& i, const FunctionObject& f, Args& a) {
    return find_method_impl(i, f, a, false, false, "find");
}
Value m_rfind(Interpreter& i, const FunctionObject& f, Args& a) {
    return find_method_impl(i, f, a, true, false, "rfind");
}
Value m_index_str(Interpreter& i, const FunctionObject& f, Args& a) {
    return find_method_impl(i, f, a, false, true, "index");
}
Value m_rindex(Interpreter& i, const FunctionObject& f, Args& a) {
    return find_method_impl(i, f, a, true, true, "rindex");
}

Value m_count_str(Interpreter&, const FunctionObject& f, Args& args) {
    ArgBinder bound("count", args, {"sub", "start", "end"}, 1);
    const std::string& s = self_string(f);
    const std::string sub = string_arg(bound[0], "count");
    size_t begin, end;
    code_point_range(s, bound, 1, begin, end);
    const std::string_view view = std::string_view(s).substr(begin, end - begin);
    if (sub.empty()) return Value(static_cast<int64_t>(code_point_count(view) + 1));
    int64_t n = 0;
    for (size_t at = view.find(sub); at != std::string_view::npos; at = view.find(sub, at + sub.size())) ++n;
    return Value(n);
}

Value m_replace(Interpreter& interp, const FunctionObject& f, Args& args) {
    ArgBinder bound("replace", args, {"old", "new", "count"}, 2);
    Args filter_args;
    filter_args.positional = {Value(string_arg(bound[0], "replace")), Value(string_arg(bound[1], "replace"))};
    if (bound.has(2)) filter_args.positional.push_back(int_arg(bound[2], "replace() count") < 0 ? kNone : bound[2]);
    return interp.apply_filter("replace", f.self, filter_args);
}

Value m_join(Interpreter& interp, const FunctionObject& f, Args& args) {
    ArgBinder bound("join", args, {"iterable"}, 1);
    std::string out;
    size_t index = 0;
    for (const Value& item : interp.iterate(bound[0])) {
        if (!item.is_string()) {
            fail(ErrorKind::type,
                 fmt::format("sequence item {}: expected str instance, {} found", index, item.type_name()));
        }
        if (index++ > 0) out += self_string(f);
        out += item.as_string();
        interp.budget().check_string_size(out.size());
    }
    return interp.make_string(std::move(out));
}

Value case_method(Interpreter& interp, const FunctionObject& f, Args& args, std::string (*fn)(std::string_view),
                  const char* name) {
    ArgBinder(name, args, {}, 0);
    return interp.make_string(fn(self_string(f)));
}

Value m_upper(Interpreter& i, const FunctionObject& f, Args& a) {
    return case_method(i, f, a, py_upper, "upper");
}
Value m_lower(Interpreter& i, const FunctionObject& f, Args& a) {
    return case_method(i, f, a, py_lower, "lower");
}
Value m_title(Interpreter& i, const FunctionObject& f, Args& a) {
    return case_method(i, f, a, py_title, "title");
}
Value m_capitalize(Interpreter& i, const FunctionObject& f, Args& a) {
    return case_method(i, f, a, py_capitalize, "capitalize");
}
Value m_swapcase(Interpreter& i, const FunctionObject& f, Args& a) {
    return case_method(i, f, a, py_swapcase, "swapcase");
}

Value predicate_method(const FunctionObject& f, Args& args, bool (*fn)(std::string_view), const char* name) {
    ArgBinder(name, args, {}, 0);
    return Value(fn(self_string(f)));
}

Value m_isdigit(Interpreter&, const FunctionObject& f, Args& a) {
    return predicate_method(f, a, py_isdigit, "isdigit");
}
Value m_isalpha(Interpreter&, const FunctionObject& f, Args& a) {
    return predicate_method(f, a, py_isalpha, "isalpha");
}
Value m_isalnum(Interpreter&, const FunctionObject& f, Args& a) {
    return predicate_method(f, a, py_isalnum, "isalnum");
}
Value m_isspace(Interpreter&, const FunctionObject& f, Args& a) {
    return predicate_method(f, a, py_isspace_str, "isspace");
}
Value m_isupper(Interpreter&, const FunctionObject& f, Args& a) {
    return predicate_method(f, a, py_isupper, "isupper");
}
Value m_islower(Interpreter&, const FunctionObject& f, Args& a) {
    return predicate_method(f, a, py_islower, "islower");
}

Value justify(Interpreter& interp, const FunctionObject& f, Args& args, char side, const char* name) {
    ArgBinder bound(name, args, {"width", "fillchar"}, 1);
    const std::string& s = self_string(f);
    const int64_t width = int_arg(bound[0], "width");
    const std::string fill = bound.has(1) ? string_arg(bound[1], name) : " ";
    if (code_point_count(fill) != 1) fail(ErrorKind::type, "The fill character must be exactly one character long");
    const auto length = static_cast<int64_t>(code_point_count(s));
    if (width <= length) return f.self;
    interp.budget().check_string_size(static_cast<uint64_t>(width) * fill.size());
    const int64_t margin = width - length;
    int64_t left = side == 'r' ? margin : side == 'l' ? 0 : margin / 2 + (margin & width & 1);
    std::string out;
    for (int64_t k = 0; k < left; ++k) out += fill;
    out += s;
    for (int64_t k = 0; k < margin - left; ++k) out += fill;
    return interp.make_string(std::move(out));
}

Value m_center(Interpreter& i, const FunctionObject& f, Args& a) {
    return justify(i, f, a, 'c', "center");
}
Value m_ljust(Interpreter& i, const FunctionObject& f, Args& a) {
    return justify(i, f, a, 'l', "ljust");
}
Value m_rjust(Interpreter& i, const FunctionObject& f, Args& a) {
    return justify(i, f, a, 'r', "rjust");
}

Value m_zfill(Interpreter& interp, const FunctionObject& f, Args& args) {
    ArgBinder bound("zfill", args, {"width"}, 1);
    const std::string& s = self_string(f);
    const int64_t width = int_arg(bound[0], "width");
    const auto length = static_cast<int64_t>(code_point_count(s));
    if (width <= length) return f.self;
    interp.budget().check_string_size(static_cast<uint64_t>(width));
    const size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
    return interp.make_string(s.substr(0, sign) + std::string(static_cast<size_t>(width - length), '0') +
                              s.substr(sign));
}

Value partition_method(Interpreter& interp, const FunctionObject& f, Args& args, bool from_right) {
    const char* name = from_right ? "rpartition" : "partition";
    ArgBinder bound(name, args, {"sep"}, 1);
    const std::string& s = self_string(f);
    const std::string sep = string_arg(bound[0], name);
    if (sep.empty()) fail(ErrorKind::value, "empty separator");
    const size_t at = from_right ? s.rfind(sep) : s.find(sep);
    if (at == std::string::npos) {
        if (from_right)
            return interp.make_list({Value(std::string()), Value(std::string()), f.self}, SequenceKind::tuple);
        return interp.make_list({f.self, Value(std::string()), Value(std::string())}, SequenceKind::tuple);
    }
    return interp.make_list({Value(s.substr(0, at)), Value(sep), Value(s.substr(at + sep.size()))},
                            SequenceKind::tuple);
}

Value m_partition(Interpreter& i, const FunctionObject& f, Args& a) {
    return partition_method(i, f, a, false);
}
Value m_rpartition(Interpreter& i, const FunctionObject& f, Args& a) {
    return partition_method(i, f, a, true);
}

Value m_removeprefix(Interpreter&, const FunctionObject& f, Args& args) {
    ArgBinder bound("removeprefix", args, {"prefix"}, 1);
    const std::string affix = string_arg(bound[0], "removeprefix");
    const std::string& s = self_string(f);
    return s.starts_with(affix) ? Value(s.substr(affix.size())) : f.self;
}

Value m_removesuffix(Interpreter&, const FunctionObject& f, Args& args) {
    ArgBinder bound("removesuffix", args, {"suffix"}, 1);
    const std::string affix = string_arg(bound[0], "removesuffix");
    const std::string& s = self_string(f);
    return !affix.empty() && s.ends_with(affix) ? Value(s.substr(0, s.size() - affix.size())) : f.self;
}

// str.format with {}, {0}, {name} and {name.attr}/{name[key]}-free fields; !r/!s
// conversions; no format specs beyond an empty one.
Value m_format(Interpreter& interp, const FunctionObject& f, Args& args) {
    const std::string& s = self_string(f);
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '}') {
            if (i + 1 < s.size() && s[i + 1] == '}') ++i;
            out.push_back('}');
            continue;
        }
        if (c != '{') {
            out.push_back(c);
            continue;
        }
        if (i + 1 < s.size() && s[i + 1] == '{') {
            out.push_back('{');
            ++i;
            continue;
        }
        const size_t close = s.find('}', i);
        if (close == std::string::npos) fail(ErrorKind::value, "Single '{' encountered in format string");
        std::string field = s.substr(i + 1, close - i - 1);
        i = close;
        char conversion = 's';
        if (const size_t colon = field.find(':'); colon != std::string::npos) {
            if (colon + 1 != field.size()) fail(ErrorKind::unsupported, "format specs in str.format are not supported");
            field.resize(colon);
        }
        if (const size_t bang = field.find('!'); bang != std::string::npos) {
            conversion = bang + 1 < field.size() ? field[bang + 1] : 's';
            field.resize(bang);
        }
        const Value* arg = nullptr;
        if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
            const size_t index = field.empty() ? auto_index++ : static_cast<size_t>(std::stoul(field.substr(0, 9)));
            if (index >= args.positional.size()) {
                fail(ErrorKind::value,
                     fmt::format("Replacement index {} out of range for positional args tuple", index));
            }
            arg = &args.positional[index];
        } else {
            for (const auto& [name, value] : args.keyword) {
                if (name == field) arg = &value;
            }
            if (arg == nullptr) fail(ErrorKind::value, fmt::format("format key '{}' not found", field));
        }
        if (conversion == 'r') {
            append_repr(out, *arg, interp.budget());
        } else {
            append_str(out, *arg, interp.budget());
        }
        interp.budget().check_string_size(out.size());
    }
    return interp.make_string(std::move(out));
}

// ---- dict and list

Value m_items(Interpreter& interp, const FunctionObject& f, Args& args) {
    ArgBinder("items", args, {}, 0);
    std::vector<Value> pairs;
    for (const auto& [key, value] : f.self.as_dict().entries) {
        pairs.push_back(interp.make_list({key, value}, SequenceKind::tuple));
    }
    return interp.make_list(std::move(pairs));
}

Value m_keys(Interpreter& interp, const FunctionObject& f, Args& args) {
    ArgBinder("keys", args, {}, 0);
    return interp.make_list(interp.iterate(f.self));
}

Value m_values(Interpreter& interp, const FunctionObject& f, Args& args) {
    ArgBinder("values", args, {}, 0);
    std::vector<Value> values;
    for (const auto& [key, value] : f.self.as_dict().entries) values.push_back(value);
    return interp.make_list(std::move(values));
}

Value m_get(Interpreter&, const FunctionObject& f, Args& args) {
    ArgBinder bound("get", args, {"key", "default"}, 1);
    if (!is_hashable(bound[0])) fail(ErrorKind::type, fmt::format("unhashable type: '{}'", bound[0].type_name()));
    if (const Value* v = f.self.as_dict().find(bound[0])) return *v;
    return bound.get(1, kNone);
}

Value m_copy(Interpreter&, const FunctionObject& f, Args& args) {
    ArgBinder("copy", args, {}, 0);
    return f.self;  // immutable values: a copy is the same value
}

Value m_index_list(Interpreter&, const FunctionObject& f, Args& args) {
    ArgBinder bound("index", args, {"value"}, 1);
    const auto& items = f.self.as_list().items;
    for (size_t i = 0; i < items.size(); ++i) {
        if (values_equal(items[i], bound[0])) return Value(static_cast<int64_t>(i));
    }
    fail(ErrorKind::value, "value is not in list");
}

Value m_count_list(Interpreter&, const FunctionObject& f, Args& args) {
    ArgBinder bound("count", args, {"value"}, 1);
    int64_t n = 0;
    for (const Value& item : f.self.as_list().items) n += values_equal(item, bound[0]) ? 1 : 0;
    return Value(n);
}

using MethodTable = std::unordered_map<std::string_view, NativeFunction>;

const MethodTable& string_methods() {
    static const MethodTable table = {
        {"strip", m_strip},
        {"lstrip", m_lstrip},
        {"rstrip", m_rstrip},
        {"split", m_split},
        {"rsplit", m_rsplit},
        {"splitlines", m_splitlines},
        {"startswith", m_startswith},
        {"endswith", m_endswith},
        {"find", m_find},
        {"rfind", m_rfind},
        {"index", m_index_str},
        {"rindex", m_rindex},
        {"count", m_count_str},
        {"replace", m_replace},
        {"join", m_join},
        {"upper", m_upper},
        {"lower", m_lower},
        {"casefold", m_lower},
        {"title", m_title},
        {"capitalize", m_capitalize},
        {"swapcase", m_swapcase},
        {"isdigit", m_isdigit},
        {"isdecimal", m_isdigit},
        {"isnumeric", m_isdigit},
        {"isalpha", m_isalpha},
        {"isalnum", m_isalnum},
        {"isspace", m_isspace},
        {"isupper", m_isupper},
        {"islower", m_islower},
        {"center", m_center},
        {"ljust", m_ljust},
        {"rjust", m_rjust},
        {"zfill", m_zfill},
        {"partition", m_partition},
        {"rpartition", m_rpartition},
        {"removeprefix", m_removeprefix},
        {"removesuffix", m_removesuffix},
        {"format", m_format},
    };
    return table;
}

const MethodTable& dict_methods() {
    static const MethodTable table = {
        {"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"get", m_get}, {"copy", m_copy},
    };
    return table;
}

const MethodTable& list_methods() {
    static const MethodTable table = {{"index", m_index_list}, {"count", m_count_list}, {"copy", m_copy}};
    return table;
}

bool is_mutating(const Value& object, std::string_view name) {
    static constexpr std::string_view dict_mutators[] = {"clear", "pop", "popitem", "setdefault", "update"};
    static constexpr std::string_view list_mutators[] = {"append", "clear", "pop",    "reverse",
                                                         "insert", "sort",  "extend", "remove"};
    if (object.is_dict())
        return std::find(std::begin(dict_mutators), std::end(dict_mutators), name) != std::end(dict_mutators);
    if (object.is_list())
        return std::find(std::begin(list_mutators), std::end(list_mutators), name) != std::end(list_mutators);
    return false;
}

}  // namespace

Value find_method(Interpreter&, const Value& object, std::string_view name) {
    const MethodTable* table = nullptr;
    if (object.is_string()) table = &string_methods();
    if (object.is_dict()) table = &dict_methods();
    if (object.is_list() && object.as_list().kind != SequenceKind::generator) table = &list_methods();
    if (table == nullptr) return Value();
    if (is_mutating(object, name)) {
        // jinja2's ImmutableSandboxedEnvironment message, word for word.
        fail(ErrorKind::security,
             fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, object.type_name()));
    }
    const auto it = table->find(name);
    if (it == table->end()) return Value();
    auto function = std::make_shared<FunctionObject>();
    function->name = std::string(name);
    function->call = it->second;
    function->self = object;
    return Value(std::shared_ptr<const FunctionObject>(std::move(function)));
}

}  // namespace powerhouse::jinja
