// Shared pieces of the builtin_*.cpp files: the tables each file contributes and small
// helpers for arguments.
//
// Thread-safety: immutable tables; pure helpers.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "template/builtins.h"
#include "template/interpreter.h"
#include "template/limits.h"
#include "template/value_format.h"
#include "template/value_ops.h"

namespace powerhouse::jinja {

struct FilterEntry {
    std::string_view name;
    FilterFunction function;
};
struct TestEntry {
    std::string_view name;
    TestFunction function;
};

// None and False, for the defaults of optional arguments that are read by reference.
inline const Value kNone = Value::none();
inline const Value kFalse = Value(false);

std::span<const FilterEntry> text_filters();      // builtin_filters_text.cpp
std::span<const FilterEntry> sequence_filters();  // builtin_filters_sequence.cpp
std::span<const TestEntry> all_tests();           // builtin_tests.cpp

// str(value) for filters that work on text (Undefined gives "").
inline std::string text_of(Interpreter& interp, const Value& value) {
    return to_str(value, interp.budget());
}

// An int argument (bools count); fails with a TypeError naming `what` otherwise.
int64_t int_arg(const Value& value, std::string_view what);
// A bool argument as Python's truthiness.
inline bool bool_arg(const Value& value) {
    return value.truthy();
}

}  // namespace powerhouse::jinja
