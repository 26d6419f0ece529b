// Values of the template interpreter, with Python's semantics (templates are written
// against jinja2, i.e. against Python objects): None, bool, int (64-bit here; overflow is an
// error), float, str (UTF-8, indexed by code point), list/tuple, dict (insertion-ordered,
// keyed like Python: 1, 1.0 and True are the same key), plus jinja2's Undefined, functions
// (globals and bound methods), macros, namespace() objects and the `loop` object.
//
// Strings, lists and dicts are immutable and shared (jinja2's ImmutableSandboxedEnvironment
// refuses the methods that would mutate them), so copying a Value is cheap. Only
// namespaces are mutable; they, macros and stateful functions live in the render's Arena,
// so that reference cycles through them (`{% set ns.self = ns %}`) cannot leak.
// Lists and dicts record their nesting depth, capped when built, so that every recursive
// walk over data (printing, tojson, comparison, destruction) has a bounded depth.
//
// Thread-safety: values are immutable and may be shared; the reference counts are atomic.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace powerhouse::jinja {

class Interpreter;
class Value;
struct ListObject;
struct DictObject;
struct FunctionObject;
struct MacroObject;
struct NamespaceObject;
struct LoopObject;

enum class ValueKind : uint8_t {
    undefined,
    none,
    boolean,
    integer,
    floating,
    string,
    list,  // also tuples and generators (see SequenceKind)
    dict,
    function,
    macro,
    name_space,
    loop,
};

// Python distinguishes these in repr() and in what they allow: generators (what map,
// select, selectattr, reverse, ... return) have no len() and no indexing, and iterate once.
enum class SequenceKind : uint8_t { list, tuple, generator };

using StringPtr = std::shared_ptr<const std::string>;

class Value {
public:
    Value() = default;  // undefined, with no explanation
    Value(bool b) : kind_(ValueKind::boolean) { scalar_.b = b; }
    Value(int64_t i) : kind_(ValueKind::integer) { scalar_.i = i; }
    Value(int i) : Value(static_cast<int64_t>(i)) {}
    Value(double d) : kind_(ValueKind::floating) { scalar_.d = d; }
    Value(std::string s);
    Value(std::string_view s) : Value(std::string(s)) {}
    Value(const char* s) : Value(std::string(s)) {}
    Value(StringPtr s);
    Value(std::shared_ptr<const ListObject> list);
    Value(std::shared_ptr<const DictObject> dict);
    Value(std::shared_ptr<const FunctionObject> function);
    Value(std::shared_ptr<LoopObject> loop);
    Value(MacroObject* macro);
    Value(NamespaceObject* ns);

    static Value none() {
        Value v;
        v.kind_ = ValueKind::none;
        return v;
    }
    // `why` is the message of the error raised when the value is used ("'x' is undefined").
    static Value undefined(std::string why);

    ValueKind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == ValueKind::undefined; }
    bool is_none() const { return kind_ == ValueKind::none; }
    bool is_bool() const { return kind_ == ValueKind::boolean; }
    bool is_int() const { return kind_ == ValueKind::integer; }
    bool is_float() const { return kind_ == ValueKind::floating; }
    bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python's Number
    bool is_string() const { return kind_ == ValueKind::string; }
    bool is_list() const { return kind_ == ValueKind::list; }
    bool is_dict() const { return kind_ == ValueKind::dict; }
    bool is_namespace() const { return kind_ == ValueKind::name_space; }
    bool is_callable() const { return kind_ == ValueKind::function || kind_ == ValueKind::macro; }

    bool as_bool() const { return scalar_.b; }
    int64_t as_int() const { return scalar_.i; }
    double as_float() const { return scalar_.d; }
    // Numbers as double (bool counts as 0/1).
    double to_double() const;
    // Integers and bools as int64.
    int64_t to_int() const { return is_bool() ? (scalar_.b ? 1 : 0) : scalar_.i; }
    const std::string& as_string() const { return *static_cast<const std::string*>(object_.get()); }
    StringPtr string_ptr() const { return std::static_pointer_cast<const std::string>(object_); }
    const ListObject& as_list() const { return *static_cast<const ListObject*>(object_.get()); }
    const DictObject& as_dict() const { return *static_cast<const DictObject*>(object_.get()); }
    const FunctionObject& as_function() const { return *static_cast<const FunctionObject*>(object_.get()); }
    LoopObject& as_loop() const { return *static_cast<LoopObject*>(const_cast<void*>(object_.get())); }
    MacroObject* as_macro() const { return scalar_.macro; }
    NamespaceObject* as_namespace() const { return scalar_.ns; }
    const std::string& undefined_message() const;
    // The object's identity (Python's `is`), for the sameas test.
    const void* identity() const;

    bool truthy() const;
    // Nesting depth of lists/dicts (0 for scalars).
    uint32_t depth() const;
    // Python's type name, for messages: "str", "int", "NoneType", "dict", "list", ...
    std::string_view type_name() const;

private:
    ValueKind kind_ = ValueKind::undefined;
    union {
        bool b;
        int64_t i;
        double d;
        MacroObject* macro;
        NamespaceObject* ns;
    } scalar_{};
    // string, list, dict, function or loop by kind; for undefined, the explanation (may be
    // null). One type-erased pointer keeps a Value at 32 bytes.
    std::shared_ptr<const void> object_;
};

struct ListObject {
    std::vector<Value> items;
    SequenceKind kind = SequenceKind::list;
    uint32_t depth = 1;
    // A generator iterates once: jinja2 templates that reuse one see it empty the second
    // time, and so do we.
    mutable bool consumed = false;
};

// Python hash/equality for dict keys: 1 == 1.0 == True, strings by content, tuples by items.
struct KeyHash {
    size_t operator()(const Value& v) const;
};
struct KeyEqual {
    bool operator()(const Value& a, const Value& b) const;
};
bool is_hashable(const Value& v);

struct DictObject {
    std::vector<std::pair<Value, Value>> entries;  // insertion order
    std::unordered_map<Value, size_t, KeyHash, KeyEqual> index;
    uint32_t depth = 1;

    const Value* find(const Value& key) const;
    const Value* find(std::string_view key) const;
    // Inserts or replaces (keeping the first position, as Python does).
    void set(Value key, Value value);
};

struct Args;
using NativeFunction = Value (*)(Interpreter& interp, const FunctionObject& self, Args& args);

// A global function (range, namespace, ...) or a method bound to its object ("abc".upper).
struct FunctionObject {
    std::string name;
    NativeFunction call = nullptr;
    Value self;             // the bound object, for methods
    void* state = nullptr;  // arena-owned mutable state (joiner, cycler)
};

struct NamespaceObject {
    std::vector<std::pair<std::string, Value>> attributes;
    const Value* find(std::string_view name) const;
    void set(std::string_view name, Value value);
};

// Positional and keyword arguments of a call, as evaluated.
struct Args {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;
};

// Python's ==, with 1 == 1.0 == True; lists and tuples never equal each other.
bool values_equal(const Value& a, const Value& b);

// Makes a list/tuple/generator value, checking the nesting depth against `max_depth`
// (returns false when too deep).
bool make_sequence(std::vector<Value> items, SequenceKind kind, uint32_t max_depth, Value& out);
bool make_dict(DictObject dict, uint32_t max_depth, Value& out);

}  // namespace powerhouse::jinja
