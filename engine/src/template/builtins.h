// The template's standard library: jinja2's filters and tests, the methods templates call
// on Python strings, dicts and lists, and the globals transformers provides (range,
// namespace, dict, joiner, raise_exception, strftime_now).
//
// Filters and tests are looked up by name when the template is parsed, so an unknown one
// is a parse error with its position, as in jinja2.
//
// Thread-safety: the tables are immutable; the functions use only the interpreter passed in.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "template/limits.h"
#include "template/value.h"

namespace powerhouse::jinja {

using FilterFunction = Value (*)(Interpreter& interp, const Value& operand, Args& args);
using TestFunction = bool (*)(Interpreter& interp, const Value& operand, Args& args);

// nullptr when unknown.
FilterFunction find_filter(std::string_view name);
TestFunction find_test(std::string_view name);
// jinja2 filters/tests this interpreter knowingly leaves out (for a clearer message).
bool is_unsupported_filter(std::string_view name);

// Why no filter or test of that name can run, for the parser (which notes it) and the
// interpreter (which fails there once it gets to it), so both say the same: a filter
// left out is `unsupported`, any other unknown name a `syntax` error, as in jinja2.
struct UnknownCallable {
    ErrorKind kind;
    std::string message;
};
UnknownCallable unknown_filter(std::string_view name);
UnknownCallable unknown_test(std::string_view name);

// The global function `name` (range, namespace, ...), or undefined.
Value find_global(std::string_view name);

// obj.name for a method of a string, dict or list: a bound method, or undefined when the
// type has no such method. Methods that would mutate are refused (SecurityError).
Value find_method(Interpreter& interp, const Value& object, std::string_view name);

// Binds positional and keyword arguments to parameter names, like a Python signature.
// `required` leading parameters must be given; the others default to undefined (absent).
class ArgBinder {
public:
    ArgBinder(std::string_view function, Args& args, std::initializer_list<std::string_view> params, size_t required);
    // The parameter's value, or `fallback` when not given. By value: callers pass
    // temporaries as fallbacks.
    Value get(size_t index, const Value& fallback) const;
    bool has(size_t index) const { return given_[index]; }
    const Value& operator[](size_t index) const { return values_[index]; }

private:
    std::vector<Value> values_;
    std::vector<bool> given_;
};

}  // namespace powerhouse::jinja
