// Values as text, exactly as Python writes them, because templates print values with
// str() ({{ x }}, ~, join, string), repr() (items inside a printed list or dict) and
// json.dumps() (the tojson filter as transformers defines it).
//
// Every function checks the growing text against the budget's string limit as it goes, so
// printing a list that holds the same large string a million times fails early.
//
// Thread-safety: pure functions (the Budget is the caller's).
#pragma once

#include <string>
#include <string_view>

#include "template/limits.h"
#include "template/value.h"

namespace powerhouse::jinja {

// Python's repr(float): shortest round-trip digits, "1.0", "0.1", "1e-05", "1e+16", "inf".
std::string py_float_repr(double d);
// Python's repr(str): quotes and escapes.
void append_py_string_repr(std::string& out, std::string_view s);

// str(value); Undefined prints as nothing, None as "None", True as "True".
void append_str(std::string& out, const Value& value, const Budget& budget);
std::string to_str(const Value& value, const Budget& budget);
// repr(value).
void append_repr(std::string& out, const Value& value, const Budget& budget);

// json.dumps options (transformers' tojson defaults: ensure_ascii=False).
struct JsonFormat {
    bool ensure_ascii = false;
    bool indent_set = false;  // indent=None when false
    std::string indent;       // per level; an int n means n spaces
    std::string item_separator = ", ";
    std::string key_separator = ": ";
    bool sort_keys = false;
};
void append_json(std::string& out, const Value& value, const JsonFormat& format, const Budget& budget);
void append_json_string(std::string& out, std::string_view s, bool ensure_ascii);

}  // namespace powerhouse::jinja
