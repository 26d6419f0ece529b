// Lookup tables for filters and tests, argument binding, and the global functions
// (range, dict, namespace, joiner, raise_exception, strftime_now).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <unordered_map>

#include "template/builtins_internal.h"

namespace powerhouse::jinja {

int64_t int_arg(const Value& value, std::string_view what) {
    if (value.is_int() || value.is_bool()) return value.to_int();
    if (value.is_undefined()) fail_undefined(value);
    fail(ErrorKind::type, fmt::format("{} must be an integer, not '{}'", what, value.type_name()));
}

ArgBinder::ArgBinder(std::string_view function, Args& args, std::initializer_list<std::string_view> params,
                     size_t required)
    : values_(params.size()), given_(params.size(), false) {
    if (args.positional.size() > params.size()) {
        fail(ErrorKind::type, fmt::format("{}() takes at most {} argument(s) ({} given)", function, params.size(),
                                          args.positional.size()));
    }
    for (size_t i = 0; i < args.positional.size(); ++i) {
        values_[i] = args.positional[i];
        given_[i] = true;
    }
    for (auto& [name, value] : args.keyword) {
        const auto it = std::find(params.begin(), params.end(), name);
        if (it == params.end()) {
            fail(ErrorKind::type, fmt::format("{}() got an unexpected keyword argument '{}'", function, name));
        }
        const auto index = static_cast<size_t>(it - params.begin());
        if (given_[index]) {
            fail(ErrorKind::type, fmt::format("{}() got multiple values for argument '{}'", function, name));
        }
        values_[index] = value;
        given_[index] = true;
    }
    for (size_t i = 0; i < required; ++i) {
        if (!given_[i]) {
            fail(ErrorKind::type, fmt::format("{}() missing required argument '{}'", function,
                                              *(params.begin() + static_cast<long>(i))));
        }
    }
}

Value ArgBinder::get(size_t index, const Value& fallback) const {
    return given_[index] ? values_[index] : fallback;
}

FilterFunction find_filter(std::string_view name) {
    static const std::unordered_map<std::string_view, FilterFunction> table = [] {
        std::unordered_map<std::string_view, FilterFunction> t;
        for (const FilterEntry& e : text_filters()) t.emplace(e.name, e.function);
        for (const FilterEntry& e : sequence_filters()) t.emplace(e.name, e.function);
        return t;
    }();
    const auto it = table.find(name);
    return it == table.end() ? nullptr : it->second;
}

TestFunction find_test(std::string_view name) {
    static const std::unordered_map<std::string_view, TestFunction> table = [] {
        std::unordered_map<std::string_view, TestFunction> t;
        for (const TestEntry& e : all_tests()) t.emplace(e.name, e.function);
        return t;
    }();
    const auto it = table.find(name);
    return it == table.end() ? nullptr : it->second;
}

bool is_unsupported_filter(std::string_view name) {
    static constexpr std::string_view names[] = {"filesizeformat", "groupby", "pprint",   "random", "striptags",
                                                 "urlencode",      "urlize",  "wordwrap", "xmlattr"};
    return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

UnknownCallable unknown_filter(std::string_view name) {
    if (is_unsupported_filter(name))
        return {ErrorKind::unsupported, fmt::format("the filter '{}' is not supported", name)};
    return {ErrorKind::syntax, fmt::format("no filter named '{}'", name)};
}

UnknownCallable unknown_test(std::string_view name) {
    return {ErrorKind::syntax, fmt::format("no test named '{}'", name)};
}

namespace {

Value global_range(Interpreter& interp, const FunctionObject&, Args& args) {
    if (!args.keyword.empty()) fail(ErrorKind::type, "range() takes no keyword arguments");
    if (args.positional.empty() || args.positional.size() > 3) {
        fail(ErrorKind::type, fmt::format("range expected 1 to 3 arguments, got {}", args.positional.size()));
    }
    int64_t start = 0, stop = 0, step = 1;
    if (args.positional.size() == 1) {
        stop = int_arg(args.positional[0], "range() argument");
    } else {
        start = int_arg(args.positional[0], "range() argument");
        stop = int_arg(args.positional[1], "range() argument");
        if (args.positional.size() == 3) step = int_arg(args.positional[2], "range() argument");
    }
    if (step == 0) fail(ErrorKind::value, "range() arg 3 must not be zero");
    // Count in unsigned 64 bits: range(-2**63, 2**63 - 1) must not overflow.
    uint64_t count = 0;
    if (step > 0 && start < stop) {
        count = (static_cast<uint64_t>(stop) - static_cast<uint64_t>(start) - 1) / static_cast<uint64_t>(step) + 1;
    }
    if (step < 0 && stop < start) {
        const uint64_t magnitude = 0 - static_cast<uint64_t>(step);
        count = (static_cast<uint64_t>(start) - static_cast<uint64_t>(stop) - 1) / magnitude + 1;
    }
    const uint64_t max_range = interp.budget().limits().max_range;
    if (count > max_range) {
        fail(ErrorKind::limit,
             fmt::format("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", max_range));
    }
    std::vector<Value> items;
    items.reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) {
        items.emplace_back(static_cast<int64_t>(static_cast<uint64_t>(start) + i * static_cast<uint64_t>(step)));
    }
    return interp.make_list(std::move(items));
}

Value global_dict(Interpreter& interp, const FunctionObject&, Args& args) {
    DictObject dict;
    if (args.positional.size() > 1) fail(ErrorKind::type, "dict expected at most 1 argument");
    if (args.positional.size() == 1) {
        const Value& source = args.positional[0];
        if (source.is_dict()) {
            dict = source.as_dict();
        } else {
            for (const Value& pair : interp.iterate(source)) {
                const std::vector<Value> kv = interp.iterate(pair);
                if (kv.size() != 2) fail(ErrorKind::value, "dictionary update sequence element has wrong length");
                if (!is_hashable(kv[0])) fail(ErrorKind::type, fmt::format("unhashable type: '{}'", kv[0].type_name()));
                dict.set(kv[0], kv[1]);
            }
        }
    }
    for (auto& [name, value] : args.keyword) dict.set(Value(name), value);
    return interp.make_dict(std::move(dict));
}

Value global_namespace(Interpreter& interp, const FunctionObject&, Args& args) {
    NamespaceObject* ns = interp.arena().make<NamespaceObject>();
    if (args.positional.size() > 1) fail(ErrorKind::type, "namespace() takes at most 1 positional argument");
    if (args.positional.size() == 1) {
        if (!args.positional[0].is_dict()) fail(ErrorKind::type, "namespace() expects a mapping");
        for (const auto& [key, value] : args.positional[0].as_dict().entries) {
            ns->set(to_str(key, interp.budget()), value);
        }
    }
    for (auto& [name, value] : args.keyword) ns->set(name, value);
    return Value(ns);
}

struct JoinerState {
    std::string separator;
    bool used = false;
};

Value joiner_call(Interpreter&, const FunctionObject& self, Args&) {
    auto* state = static_cast<JoinerState*>(self.state);
    if (!state->used) {
        state->used = true;
        return Value(std::string());
    }
    return Value(state->separator);
}

Value global_joiner(Interpreter& interp, const FunctionObject&, Args& args) {
    ArgBinder bound("joiner", args, {"sep"}, 0);
    auto* state = interp.arena().make<JoinerState>();
    state->separator = bound.has(0) ? to_str(bound[0], interp.budget()) : ", ";
    auto function = std::make_shared<FunctionObject>();
    function->name = "joiner";
    function->call = joiner_call;
    function->state = state;
    return Value(std::shared_ptr<const FunctionObject>(std::move(function)));
}

Value global_raise_exception(Interpreter& interp, const FunctionObject&, Args& args) {
    ArgBinder bound("raise_exception", args, {"message"}, 1);
    fail(ErrorKind::raised, to_str(bound[0], interp.budget()));
}

// strftime with C-locale (English) names, like Python in a process that never called
// setlocale; glibc's "%-d" (no padding) is supported, as Python on Linux passes it through.
std::string format_time(std::string_view format, const std::tm& t) {
    static constexpr const char* days[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                           "Thursday", "Friday", "Saturday"};
    static constexpr const char* months[] = {"January", "February", "March",     "April",   "May",      "June",
                                             "July",    "August",   "September", "October", "November", "December"};
    std::string out;
    for (size_t i = 0; i < format.size(); ++i) {
        if (format[i] != '%' || i + 1 >= format.size()) {
            out.push_back(format[i]);
            continue;
        }
        bool pad = true;
        char c = format[++i];
        if (c == '-' && i + 1 < format.size()) {
            pad = false;
            c = format[++i];
        }
        auto num = [&](int v, int width) { out += pad ? fmt::format("{:0{}d}", v, width) : fmt::format("{}", v); };
        const int hour12 = t.tm_hour % 12 == 0 ? 12 : t.tm_hour % 12;
        switch (c) {
            case 'a':
                out += std::string_view(days[t.tm_wday]).substr(0, 3);
                break;
            case 'A':
                out += days[t.tm_wday];
                break;
            case 'b':
            case 'h':
                out += std::string_view(months[t.tm_mon]).substr(0, 3);
                break;
            case 'B':
                out += months[t.tm_mon];
                break;
            case 'd':
                num(t.tm_mday, 2);
                break;
            case 'e':
                out += pad ? fmt::format("{:2d}", t.tm_mday) : fmt::format("{}", t.tm_mday);
                break;
            case 'H':
                num(t.tm_hour, 2);
                break;
            case 'I':
                num(hour12, 2);
                break;
            case 'j':
                num(t.tm_yday + 1, 3);
                break;
            case 'm':
                num(t.tm_mon + 1, 2);
                break;
            case 'M':
                num(t.tm_min, 2);
                break;
            case 'p':
                out += t.tm_hour < 12 ? "AM" : "PM";
                break;
            case 'S':
                num(t.tm_sec, 2);
                break;
            case 'w':
                out += fmt::format("{}", t.tm_wday);
                break;
            case 'u':
                out += fmt::format("{}", t.tm_wday == 0 ? 7 : t.tm_wday);
                break;
            case 'y':
                num(t.tm_year % 100, 2);
                break;
            case 'Y':
                out += fmt::format("{}", t.tm_year + 1900);
                break;
            case 'F':
                out += fmt::format("{}-{:02d}-{:02d}", t.tm_year + 1900, t.tm_mon + 1, t.tm_mday);
                break;
            case 'T':
                out += fmt::format("{:02d}:{:02d}:{:02d}", t.tm_hour, t.tm_min, t.tm_sec);
                break;
            case 'R':
                out += fmt::format("{:02d}:{:02d}", t.tm_hour, t.tm_min);
                break;
            case 'D':
                out += fmt::format("{:02d}/{:02d}/{:02d}", t.tm_mon + 1, t.tm_mday, t.tm_year % 100);
                break;
            case 'n':
                out.push_back('\n');
                break;
            case 't':
                out.push_back('\t');
                break;
            case 'Z':
            case 'z':
                break;  // naive datetime: no zone, as in Python
            case '%':
                out.push_back('%');
                break;
            default:
                out.push_back('%');
                if (!pad) out.push_back('-');
                out.push_back(c);
        }
    }
    return out;
}

Value global_strftime_now(Interpreter& interp, const FunctionObject&, Args& args) {
    ArgBinder bound("strftime_now", args, {"format"}, 1);
    if (!bound[0].is_string()) fail(ErrorKind::type, "strftime_now() argument must be a string");
    std::tm t{};
    if (interp.options().now) {
        using namespace std::chrono;
        const local_seconds now = *interp.options().now;
        const local_days day = floor<days>(now);
        const year_month_day ymd{day};
        const hh_mm_ss<seconds> time{now - day};
        t.tm_year = static_cast<int>(ymd.year()) - 1900;
        t.tm_mon = static_cast<int>(static_cast<unsigned>(ymd.month())) - 1;
        t.tm_mday = static_cast<int>(static_cast<unsigned>(ymd.day()));
        t.tm_hour = static_cast<int>(time.hours().count());
        t.tm_min = static_cast<int>(time.minutes().count());
        t.tm_sec = static_cast<int>(time.seconds().count());
        t.tm_wday = static_cast<int>(weekday{day}.c_encoding());
        t.tm_yday = static_cast<int>((day - local_days{ymd.year() / January / 1}).count());
    } else {
        const std::time_t now = std::time(nullptr);
        localtime_r(&now, &t);
    }
    return interp.make_string(format_time(bound[0].as_string(), t));
}

Value make_global(std::string_view name, NativeFunction function) {
    auto object = std::make_shared<FunctionObject>();
    object->name = std::string(name);
    object->call = function;
    return Value(std::shared_ptr<const FunctionObject>(std::move(object)));
}

}  // namespace

Value find_global(std::string_view name) {
    static const std::unordered_map<std::string_view, Value> globals = [] {
        std::unordered_map<std::string_view, Value> g;
        g.emplace("range", make_global("range", global_range));
        g.emplace("dict", make_global("dict", global_dict));
        g.emplace("namespace", make_global("namespace", global_namespace));
        g.emplace("joiner", make_global("joiner", global_joiner));
        g.emplace("raise_exception", make_global("raise_exception", global_raise_exception));
        g.emplace("strftime_now", make_global("strftime_now", global_strftime_now));
        return g;
    }();
    const auto it = globals.find(name);
    return it == globals.end() ? Value() : it->second;
}

}  // namespace powerhouse::jinja
