#include "template/provenance.h"

#include "template/interpreter.h"

namespace powerhouse::jinja {

void add_span(Spans& spans, size_t begin, size_t end) {
    if (begin >= end) return;
    if (!spans.empty() && spans.back().second >= begin) {
        spans.back().second = std::max(spans.back().second, end);
        return;
    }
    spans.emplace_back(begin, end);
}

const Spans* DataTracker::spans_of(const Value& value) const {
    if (!enabled_ || !value.is_string() || spans_.empty()) return nullptr;
    const auto it = spans_.find(value.identity());
    return it == spans_.end() ? nullptr : &it->second.second;
}

bool DataTracker::contains_data(const Value& value) const {
    if (!enabled_ || spans_.empty()) return false;
    switch (value.kind()) {
        case ValueKind::string:
            return spans_of(value) != nullptr;
        case ValueKind::list:
            for (const Value& item : value.as_list().items) {
                if (contains_data(item)) return true;
            }
            return false;
        case ValueKind::dict:
            for (const auto& [key, item] : value.as_dict().entries) {
                if (contains_data(key) || contains_data(item)) return true;
            }
            return false;
        case ValueKind::function:
            // A bound method carries its object: "<data>".upper is data.
            return contains_data(value.as_function().self);
        default:
            return false;
    }
}

bool DataTracker::contains_data(const Args& args) const {
    if (!enabled_ || spans_.empty()) return false;
    for (const Value& v : args.positional) {
        if (contains_data(v)) return true;
    }
    for (const auto& [name, v] : args.keyword) {
        if (contains_data(v)) return true;
    }
    return false;
}

Value DataTracker::make(Interpreter& interp, TrackedText text) {
    Value value = interp.make_string(std::move(text.text));
    if (enabled_ && !text.data.empty()) {
        spans_[value.identity()] = {value.string_ptr(), std::move(text.data)};
    }
    return value;
}

Value DataTracker::mark_all(Interpreter& interp, const Value& value) {
    if (!enabled_) return value;
    switch (value.kind()) {
        case ValueKind::string: {
            const std::string& s = value.as_string();
            if (s.empty()) return value;  // nothing in it can become a token
            const Spans* spans = spans_of(value);
            if (spans != nullptr && spans->size() == 1 && spans->front() == std::make_pair(size_t{0}, s.size())) {
                return value;
            }
            // A copy: the original object may be a template literal used elsewhere.
            TrackedText copy{s, {}};
            add_span(copy.data, 0, s.size());
            return make(interp, std::move(copy));
        }
        case ValueKind::list: {
            const ListObject& list = value.as_list();
            std::vector<Value> items;
            items.reserve(list.items.size());
            for (const Value& item : list.items) items.push_back(mark_all(interp, item));
            Value out = interp.make_list(std::move(items), list.kind);
            out.as_list().consumed = list.consumed;
            return out;
        }
        case ValueKind::dict: {
            DictObject dict;
            for (const auto& [key, item] : value.as_dict().entries) dict.set(mark_all(interp, key), mark_all(interp, item));
            return interp.make_dict(std::move(dict));
        }
        default:
            return value;
    }
}

void DataTracker::append(TrackedText& out, const Value& string_value) const {
    const size_t base = out.text.size();
    out.text.append(string_value.as_string());
    if (const Spans* spans = spans_of(string_value)) {
        for (const auto& [begin, end] : *spans) add_span(out.data, base + begin, base + end);
    }
}

}  // namespace powerhouse::jinja
