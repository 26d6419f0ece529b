// Filters over sequences and mappings: length, join, list, map, select/reject(attr),
// items, dictsort, sort, unique, first/last, min/max, sum, default, batch, slice,
// reverse, attr. Like jinja2, map/select/reject/selectattr/rejectattr/unique/items/reverse
// return generators (one pass, no len()), which templates usually feed to list or join, and
// map and the select family take a false value (none, undefined) as nothing to go over.
#include <fmt/format.h>

#include <algorithm>

#include "template/builtins_internal.h"
#include "template/text.h"

namespace powerhouse::jinja {

namespace {

Value generator(Interpreter& interp, std::vector<Value> items) {
    return interp.make_list(std::move(items), SequenceKind::generator);
}

Value filter_length(Interpreter&, const Value& v, Args& args) {
    ArgBinder("length", args, {}, 0);
    switch (v.kind()) {
        case ValueKind::undefined:
            return Value(int64_t{0});
        case ValueKind::string:
            return Value(static_cast<int64_t>(code_point_count(v.as_string())));
        case ValueKind::dict:
            return Value(static_cast<int64_t>(v.as_dict().entries.size()));
        case ValueKind::list:
            if (v.as_list().kind != SequenceKind::generator) {
                return Value(static_cast<int64_t>(v.as_list().items.size()));
            }
            break;
        default:
            break;
    }
    fail(ErrorKind::type, fmt::format("object of type '{}' has no len()", v.type_name()));
}

Value filter_default(Interpreter&, const Value& v, Args& args) {
    ArgBinder bound("default", args, {"default_value", "boolean"}, 0);
    const Value fallback = bound.get(0, Value(std::string()));
    const bool boolean = bound.get(1, kFalse).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return fallback;
    return v;
}

Value filter_list(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder("list", args, {}, 0);
    return interp.make_list(interp.iterate(v));
}

// The attribute getter of map/selectattr/sort/...: "a.b.0" paths, item lookup first.
Value attribute_of(Interpreter& interp, const Value& item, const Value& attribute) {
    if (attribute.is_int()) return interp.get_item(item, attribute);
    return interp.get_path(item, text_of(interp, attribute));
}

Value filter_join(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder bound("join", args, {"d", "attribute"}, 0);
    const std::string separator = bound.has(0) ? text_of(interp, bound[0]) : "";
    const Value& attribute = bound.get(1, kNone);
    std::string out;
    bool first = true;
    for (const Value& item : interp.iterate(v)) {
        if (!first) out += separator;
        first = false;
        append_str(out, attribute.is_none() ? item : attribute_of(interp, item, attribute), interp.budget());
        interp.budget().check_string_size(out.size());
    }
    return interp.make_string(std::move(out));
}

Value filter_first(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder("first", args, {}, 0);
    const std::vector<Value> items = interp.iterate(v);
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items.front();
}

Value filter_last(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder("last", args, {}, 0);
    if (v.is_list() && v.as_list().kind == SequenceKind::generator) {
        fail(ErrorKind::type, "'generator' object is not reversible");
    }
    const std::vector<Value> items = interp.iterate(v);
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
}

Value filter_items(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder("items", args, {}, 0);
    if (v.is_undefined()) return generator(interp, {});
    if (!v.is_dict()) fail(ErrorKind::type, "Can only get item pairs from a mapping.");
    std::vector<Value> pairs;
    for (const auto& [key, value] : v.as_dict().entries)
        pairs.push_back(interp.make_list({key, value}, SequenceKind::tuple));
    return generator(interp, std::move(pairs));
}

// jinja2's ignore_case: strings compare lower-cased unless case_sensitive.
Value sort_key(Interpreter& interp, const Value& v, bool case_sensitive) {
    if (!case_sensitive && v.is_string()) return interp.make_string(py_lower(v.as_string()));
    return v;
}

Value filter_dictsort(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder bound("dictsort", args, {"case_sensitive", "by", "reverse"}, 0);
    const bool case_sensitive = bound.get(0, kFalse).truthy();
    const std::string by = bound.has(1) ? text_of(interp, bound[1]) : "key";
    const bool reverse = bound.get(2, kFalse).truthy();
    if (by != "key" && by != "value") fail(ErrorKind::value, "You can only sort by either 'key' or 'value'");
    if (!v.is_dict()) fail(ErrorKind::type, "dictsort() needs a mapping");
    std::vector<std::pair<Value, Value>> entries(v.as_dict().entries.begin(), v.as_dict().entries.end());
    const size_t index = by == "key" ? 0 : 1;
    std::stable_sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) {
        interp.budget().step();
        const Value ka = sort_key(interp, index == 0 ? a.first : a.second, case_sensitive);
        const Value kb = sort_key(interp, index == 0 ? b.first : b.second, case_sensitive);
        return reverse ? compare_order(kb, ka, "<") == -1 : compare_order(ka, kb, "<") == -1;
    });
    std::vector<Value> pairs;
    for (auto& [key, value] : entries) pairs.push_back(interp.make_list({key, value}, SequenceKind::tuple));
    return interp.make_list(std::move(pairs));
}

Value filter_sort(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder bound("sort", args, {"reverse", "case_sensitive", "attribute"}, 0);
    const bool reverse = bound.get(0, kFalse).truthy();
    const bool case_sensitive = bound.get(1, kFalse).truthy();
    const Value& attribute = bound.get(2, kNone);
    std::vector<Value> items = interp.iterate(v);
    std::vector<std::pair<Value, size_t>> keyed;
    keyed.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
        interp.budget().step();
        const Value key = attribute.is_none() ? items[i] : attribute_of(interp, items[i], attribute);
        keyed.emplace_back(sort_key(interp, key, case_sensitive), i);
    }
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
        interp.budget().step();  // n log n comparisons: keep the clock checked
        return reverse ? compare_order(b.first, a.first, "<") == -1 : compare_order(a.first, b.first, "<") == -1;
    });
    std::vector<Value> sorted;
    sorted.reserve(items.size());
    for (const auto& [key, index] : keyed) sorted.push_back(items[index]);
    return interp.make_list(std::move(sorted));
}

Value filter_unique(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder bound("unique", args, {"case_sensitive", "attribute"}, 0);
    const bool case_sensitive = bound.get(0, kFalse).truthy();
    const Value& attribute = bound.get(1, kNone);
    std::vector<Value> out;
    std::vector<Value> seen;
    for (const Value& item : interp.iterate(v)) {
        const Value key =
            sort_key(interp, attribute.is_none() ? item : attribute_of(interp, item, attribute), case_sensitive);
        bool duplicate = false;
        for (const Value& s : seen) {
            interp.budget().step();
            if (values_equal(s, key)) {
                duplicate = true;
                break;
            }
        }
        if (duplicate) continue;
        seen.push_back(key);
        out.push_back(item);
    }
    return generator(interp, std::move(out));
}

Value min_max(Interpreter& interp, const Value& v, Args& args, bool want_max, const char* name) {
    ArgBinder bound(name, args, {"case_sensitive", "attribute"}, 0);
    const bool case_sensitive = bound.get(0, kFalse).truthy();
    const Value& attribute = bound.get(1, kNone);
    const std::vector<Value> items = interp.iterate(v);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    Value best_key;
    for (size_t i = 0; i < items.size(); ++i) {
        const Value key = sort_key(interp, attribute.is_none() ? items[i] : attribute_of(interp, items[i], attribute),
                                   case_sensitive);
        if (i == 0 || compare_order(key, best_key, "<") == (want_max ? 1 : -1)) {
            best = i;
            best_key = key;
        }
    }
    return items[best];
}

Value filter_min(Interpreter& interp, const Value& v, Args& args) {
    return min_max(interp, v, args, false, "min");
}
Value filter_max(Interpreter& interp, const Value& v, Args& args) {
    return min_max(interp, v, args, true, "max");
}

Value filter_sum(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder bound("sum", args, {"attribute", "start"}, 0);
    const Value& attribute = bound.get(0, kNone);
    Value total = bound.get(1, Value(int64_t{0}));
    for (const Value& item : interp.iterate(v)) {
        total = arithmetic(interp, BinaryOp::add, total,
                           attribute.is_none() ? item : attribute_of(interp, item, attribute));
    }
    return total;
}

Value filter_reverse(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder("reverse", args, {}, 0);
    if (v.is_string()) {
        return slice_value(interp, v, Value::none(), Value::none(), Value(int64_t{-1}));
    }
    std::vector<Value> items = interp.iterate(v);
    std::reverse(items.begin(), items.end());
    return generator(interp, std::move(items));
}

// The items select/reject/selectattr/rejectattr and map go over: like jinja2's `if seq:`
// before its loop, a false value (none, undefined, an empty string, 0) gives none, so
// `tools|selectattr(...)` works when there are no tools.
std::vector<Value> items_if_any(Interpreter& interp, const Value& v) {
    if (!v.truthy()) return {};
    return interp.iterate(v);
}

// select/reject/selectattr/rejectattr: keep items whose test (or truthiness) matches.
Value select_items(Interpreter& interp, const Value& v, Args& args, bool with_attribute, bool keep_when) {
    std::vector<Value> rest = args.positional;
    if (!args.keyword.empty()) fail(ErrorKind::type, "select filters take no keyword arguments");
    Value attribute;
    if (with_attribute) {
        if (rest.empty()) fail(ErrorKind::type, "selectattr/rejectattr need an attribute name");
        attribute = rest.front();
        rest.erase(rest.begin());
    }
    std::string test;
    if (!rest.empty()) {
        test = text_of(interp, rest.front());
        rest.erase(rest.begin());
        if (find_test(test) == nullptr) {
            UnknownCallable unknown = unknown_test(test);
            fail(unknown.kind, std::move(unknown.message));
        }
    }
    std::vector<Value> out;
    for (const Value& item : items_if_any(interp, v)) {
        interp.budget().step();
        const Value subject = with_attribute ? attribute_of(interp, item, attribute) : item;
        bool passed;
        if (test.empty()) {
            passed = subject.truthy();
        } else {
            Args test_args;
            test_args.positional = rest;
            passed = interp.apply_test(test, subject, test_args);
        }
        if (passed == keep_when) out.push_back(item);
    }
    return generator(interp, std::move(out));
}

Value filter_select(Interpreter& interp, const Value& v, Args& args) {
    return select_items(interp, v, args, false, true);
}
Value filter_reject(Interpreter& interp, const Value& v, Args& args) {
    return select_items(interp, v, args, false, false);
}
Value filter_selectattr(Interpreter& interp, const Value& v, Args& args) {
    return select_items(interp, v, args, true, true);
}
Value filter_rejectattr(Interpreter& interp, const Value& v, Args& args) {
    return select_items(interp, v, args, true, false);
}

Value filter_map(Interpreter& interp, const Value& v, Args& args) {
    std::vector<Value> out;
    const Value* attribute = nullptr;
    const Value* fallback = nullptr;
    for (const auto& [name, value] : args.keyword) {
        if (name == "attribute") {
            attribute = &value;
        } else if (name == "default") {
            fallback = &value;
        }
    }
    if (attribute != nullptr) {
        if (!args.positional.empty()) fail(ErrorKind::type, "map() with attribute= takes no positional arguments");
        for (const Value& item : items_if_any(interp, v)) {
            Value mapped = attribute_of(interp, item, *attribute);
            if (mapped.is_undefined() && fallback != nullptr) mapped = *fallback;
            out.push_back(std::move(mapped));
        }
        return generator(interp, std::move(out));
    }
    if (args.positional.empty()) fail(ErrorKind::type, "map() needs a filter name or attribute=");
    const std::string filter = text_of(interp, args.positional.front());
    if (find_filter(filter) == nullptr) {
        UnknownCallable unknown = unknown_filter(filter);
        fail(unknown.kind, std::move(unknown.message));
    }
    for (const Value& item : items_if_any(interp, v)) {
        Args filter_args;
        filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
        filter_args.keyword = args.keyword;
        out.push_back(interp.apply_filter(filter, item, filter_args));
    }
    return generator(interp, std::move(out));
}

Value filter_attr(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder bound("attr", args, {"name"}, 1);
    const std::string name = text_of(interp, bound[0]);
    if (v.is_dict()) {
        // Python attributes of a dict are its methods, never its keys.
        if (!name.empty() && name.front() == '_') {
            fail(ErrorKind::security, fmt::format("access to attribute '{}' of 'dict' object is unsafe.", name));
        }
        const Value method = find_method(interp, v, name);
        return method.is_undefined() ? Value::undefined(fmt::format("'dict object' has no attribute '{}'", name))
                                     : method;
    }
    return interp.get_attribute(v, name);
}

Value filter_batch(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder bound("batch", args, {"linecount", "fill_with"}, 1);
    const int64_t size = int_arg(bound[0], "batch() linecount");
    if (size <= 0) fail(ErrorKind::value, "batch() linecount must be positive");
    const Value& fill = bound.get(1, kNone);
    std::vector<Value> batches;
    std::vector<Value> current;
    for (const Value& item : interp.iterate(v)) {
        current.push_back(item);
        if (static_cast<int64_t>(current.size()) == size) {
            batches.push_back(interp.make_list(std::move(current)));
            current.clear();
        }
    }
    if (!current.empty()) {
        if (bound.has(1) && !fill.is_none()) {
            while (static_cast<int64_t>(current.size()) < size) current.push_back(fill);
        }
        batches.push_back(interp.make_list(std::move(current)));
    }
    return generator(interp, std::move(batches));
}

Value filter_slice(Interpreter& interp, const Value& v, Args& args) {
    ArgBinder bound("slice", args, {"slices", "fill_with"}, 1);
    const int64_t slices = int_arg(bound[0], "slice() slices");
    if (slices <= 0 || slices > 100000) fail(ErrorKind::value, "slice() needs 1 to 100000 slices");
    const Value& fill = bound.get(1, kNone);
    const std::vector<Value> items = interp.iterate(v);
    const auto length = static_cast<int64_t>(items.size());
    const int64_t per_slice = length / slices;
    const int64_t with_extra = length % slices;
    int64_t offset = 0;
    std::vector<Value> out;
    for (int64_t n = 0; n < slices; ++n) {
        const int64_t start = offset + n * per_slice;
        if (n < with_extra) ++offset;
        const int64_t end = offset + (n + 1) * per_slice;
        std::vector<Value> part(items.begin() + start, items.begin() + end);
        if (!fill.is_none() && n >= with_extra) part.push_back(fill);
        out.push_back(interp.make_list(std::move(part)));
    }
    return generator(interp, std::move(out));
}

constexpr FilterEntry kSequenceFilters[] = {
    {"length", filter_length},
    {"count", filter_length},
    {"default", filter_default},
    {"d", filter_default},
    {"list", filter_list},
    {"join", filter_join},
    {"first", filter_first},
    {"last", filter_last},
    {"items", filter_items},
    {"dictsort", filter_dictsort},
    {"sort", filter_sort},
    {"unique", filter_unique},
    {"min", filter_min},
    {"max", filter_max},
    {"sum", filter_sum},
    {"reverse", filter_reverse},
    {"select", filter_select},
    {"reject", filter_reject},
    {"selectattr", filter_selectattr},
    {"rejectattr", filter_rejectattr},
    {"map", filter_map},
    {"attr", filter_attr},
    {"batch", filter_batch},
    {"slice", filter_slice},
};

}  // namespace

std::span<const FilterEntry> sequence_filters() {
    return kSequenceFilters;
}

}  // namespace powerhouse::jinja
