// Python's operators on template values: + - * / // % ** (with str * int, list + list,
// str % args), ordering comparisons and `in`. Results that would be large are checked
// against the budget before they are built.
//
// Thread-safety: pure functions over immutable values (the Interpreter is the caller's).
#pragma once

#include <string>
#include <string_view>

#include "template/ast.h"
#include "template/value.h"

namespace powerhouse::jinja {

Value arithmetic(Interpreter& interp, BinaryOp op, const Value& a, const Value& b);
Value negate(const Value& v, bool minus);

// -1, 0 or 1; raises TypeError for values Python cannot order. `op` is for the message.
int compare_order(const Value& a, const Value& b, std::string_view op);
bool compare(CompareOp op, const Value& a, const Value& b, Interpreter& interp);
bool contains(Interpreter& interp, const Value& container, const Value& item);

// printf-style formatting: "%s and %d" % (a, b), also the `format` filter.
std::string percent_format(Interpreter& interp, std::string_view format, const Value& args);

// Raises the error an Undefined carries when it is used (jinja2's UndefinedError).
[[noreturn]] void fail_undefined(const Value& undefined);

}  // namespace powerhouse::jinja
