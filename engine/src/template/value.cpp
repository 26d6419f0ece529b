#include "template/value.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace powerhouse::jinja {

Value::Value(std::string s) : kind_(ValueKind::string), object_(std::make_shared<const std::string>(std::move(s))) {}

Value::Value(StringPtr s) : kind_(ValueKind::string), object_(std::move(s)) {}

Value::Value(std::shared_ptr<const ListObject> list) : kind_(ValueKind::list), object_(std::move(list)) {}

Value::Value(std::shared_ptr<const DictObject> dict) : kind_(ValueKind::dict), object_(std::move(dict)) {}

Value::Value(std::shared_ptr<const FunctionObject> function)
    : kind_(ValueKind::function), object_(std::move(function)) {}

Value::Value(std::shared_ptr<LoopObject> loop) : kind_(ValueKind::loop), object_(std::move(loop)) {}

Value::Value(MacroObject* macro) : kind_(ValueKind::macro) {
    scalar_.macro = macro;
}

Value::Value(NamespaceObject* ns) : kind_(ValueKind::name_space) {
    scalar_.ns = ns;
}

Value Value::undefined(std::string why) {
    Value v;
    v.object_ = std::make_shared<const std::string>(std::move(why));
    return v;
}

const std::string& Value::undefined_message() const {
    static const std::string unknown = "undefined value";
    return object_ ? *static_cast<const std::string*>(object_.get()) : unknown;
}

const void* Value::identity() const {
    switch (kind_) {
        case ValueKind::macro:
            return scalar_.macro;
        case ValueKind::name_space:
            return scalar_.ns;
        default:
            return object_.get();
    }
}

double Value::to_double() const {
    switch (kind_) {
        case ValueKind::boolean:
            return scalar_.b ? 1.0 : 0.0;
        case ValueKind::integer:
            return static_cast<double>(scalar_.i);
        case ValueKind::floating:
            return scalar_.d;
        default:
            return 0.0;
    }
}

bool Value::truthy() const {
    switch (kind_) {
        case ValueKind::undefined:
        case ValueKind::none:
            return false;
        case ValueKind::boolean:
            return scalar_.b;
        case ValueKind::integer:
            return scalar_.i != 0;
        case ValueKind::floating:
            return scalar_.d != 0.0;
        case ValueKind::string:
            return !as_string().empty();
        case ValueKind::list:
            return as_list().kind == SequenceKind::generator || !as_list().items.empty();
        case ValueKind::dict:
            return !as_dict().entries.empty();
        default:
            return true;
    }
}

uint32_t Value::depth() const {
    if (kind_ == ValueKind::list) return as_list().depth;
    if (kind_ == ValueKind::dict) return as_dict().depth;
    return 0;
}

std::string_view Value::type_name() const {
    switch (kind_) {
        case ValueKind::undefined:
            return "Undefined";
        case ValueKind::none:
            return "NoneType";
        case ValueKind::boolean:
            return "bool";
        case ValueKind::integer:
            return "int";
        case ValueKind::floating:
            return "float";
        case ValueKind::string:
            return "str";
        case ValueKind::list:
            switch (as_list().kind) {
                case SequenceKind::list:
                    return "list";
                case SequenceKind::tuple:
                    return "tuple";
                case SequenceKind::generator:
                    return "generator";
            }
            return "list";
        case ValueKind::dict:
            return "dict";
        case ValueKind::function:
            return "builtin_function_or_method";
        case ValueKind::macro:
            return "Macro";
        case ValueKind::name_space:
            return "Namespace";
        case ValueKind::loop:
            return "LoopContext";
    }
    return "object";
}

namespace {

// Compares an int64 with a double exactly, as Python does (no rounding of the int).
int compare_int_double(int64_t i, double d) {
    if (std::isnan(d)) return 2;  // unordered
    if (d >= 9.3e18) return -1;
    if (d <= -9.3e18) return 1;
    const double floor_d = std::floor(d);
    const auto fi = static_cast<int64_t>(floor_d);
    if (i < fi) return -1;
    if (i > fi) return 1;
    return floor_d == d ? 0 : -1;
}

bool numbers_equal(const Value& a, const Value& b) {
    if (a.is_float() && b.is_float()) return a.as_float() == b.as_float();
    if (a.is_float()) return compare_int_double(b.to_int(), a.as_float()) == 0;
    if (b.is_float()) return compare_int_double(a.to_int(), b.as_float()) == 0;
    return a.to_int() == b.to_int();
}

}  // namespace

bool values_equal(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) return numbers_equal(a, b);
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case ValueKind::undefined:
        case ValueKind::none:
            return true;
        case ValueKind::string:
            return a.as_string() == b.as_string();
        case ValueKind::list: {
            const ListObject& la = a.as_list();
            const ListObject& lb = b.as_list();
            if (la.kind == SequenceKind::generator || lb.kind == SequenceKind::generator) return &la == &lb;
            if (la.kind != lb.kind || la.items.size() != lb.items.size()) return false;
            for (size_t i = 0; i < la.items.size(); ++i) {
                if (!values_equal(la.items[i], lb.items[i])) return false;
            }
            return true;
        }
        case ValueKind::dict: {
            const DictObject& da = a.as_dict();
            const DictObject& db = b.as_dict();
            if (da.entries.size() != db.entries.size()) return false;
            for (const auto& [key, value] : da.entries) {
                const Value* other = db.find(key);
                if (other == nullptr || !values_equal(value, *other)) return false;
            }
            return true;
        }
        default:
            return a.identity() == b.identity();
    }
}

bool is_hashable(const Value& v) {
    switch (v.kind()) {
        case ValueKind::list:
            if (v.as_list().kind != SequenceKind::tuple) return false;
            return std::all_of(v.as_list().items.begin(), v.as_list().items.end(), is_hashable);
        case ValueKind::dict:
        case ValueKind::undefined:
            return false;
        default:
            return true;
    }
}

size_t KeyHash::operator()(const Value& v) const {
    switch (v.kind()) {
        case ValueKind::none:
            return 0x9e3779b9u;
        case ValueKind::boolean:
        case ValueKind::integer:
            return std::hash<int64_t>{}(v.to_int());
        case ValueKind::floating: {
            const double d = v.as_float();
            if (std::floor(d) == d && std::fabs(d) < 9.2e18) return std::hash<int64_t>{}(static_cast<int64_t>(d));
            return std::hash<double>{}(d);
        }
        case ValueKind::string:
            return std::hash<std::string_view>{}(v.as_string());
        case ValueKind::list: {
            size_t h = 0x345678;
            for (const Value& item : v.as_list().items) h = (h ^ (*this)(item)) * 1000003u;
            return h;
        }
        default:
            return std::hash<const void*>{}(v.identity());
    }
}

bool KeyEqual::operator()(const Value& a, const Value& b) const {
    return values_equal(a, b);
}

const Value* DictObject::find(const Value& key) const {
    if (!is_hashable(key)) return nullptr;
    const auto it = index.find(key);
    return it == index.end() ? nullptr : &entries[it->second].second;
}

const Value* DictObject::find(std::string_view key) const {
    return find(Value(key));
}

void DictObject::set(Value key, Value value) {
    const auto it = index.find(key);
    if (it != index.end()) {
        entries[it->second].second = std::move(value);
        return;
    }
    index.emplace(key, entries.size());
    entries.emplace_back(std::move(key), std::move(value));
}

const Value* NamespaceObject::find(std::string_view name) const {
    for (const auto& [key, value] : attributes) {
        if (key == name) return &value;
    }
    return nullptr;
}

void NamespaceObject::set(std::string_view name, Value value) {
    for (auto& [key, existing] : attributes) {
        if (key == name) {
            existing = std::move(value);
            return;
        }
    }
    attributes.emplace_back(std::string(name), std::move(value));
}

bool make_sequence(std::vector<Value> items, SequenceKind kind, uint32_t max_depth, Value& out) {
    uint32_t depth = 0;
    for (const Value& item : items) depth = std::max(depth, item.depth());
    if (depth + 1 > max_depth) return false;
    auto list = std::make_shared<ListObject>();
    list->items = std::move(items);
    list->kind = kind;
    list->depth = depth + 1;
    out = Value(std::shared_ptr<const ListObject>(std::move(list)));
    return true;
}

bool make_dict(DictObject dict, uint32_t max_depth, Value& out) {
    uint32_t depth = 0;
    for (const auto& [key, value] : dict.entries) depth = std::max({depth, key.depth(), value.depth()});
    if (depth + 1 > max_depth) return false;
    dict.depth = depth + 1;
    out = Value(std::shared_ptr<const DictObject>(std::make_shared<DictObject>(std::move(dict))));
    return true;
}

}  // namespace powerhouse::jinja
