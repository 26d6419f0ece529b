// Where the bytes of a rendered prompt came from: the template's own text, or the data in
// the context (messages, tools, documents). The tokenizer recognises special tokens only
// in the former, so a user who types "<|im_start|>" gets the plain-text tokens for those
// characters while the template's "<|im_start|>" becomes the control token.
//
// Strings are immutable and shared, so a string's provenance belongs to the string object:
// the tracker keeps, per object, the byte ranges that are data. It follows data exactly
// through concatenation (`+`, `~`), printing, captured blocks ({% set %}...{% endset %},
// macro and call-block output); every other operation (filters, methods, indexing,
// formatting) is treated conservatively: when any input holds data, every string in the
// result is data as a whole. The error can only go one way: a template-made special token
// computed from data is taken as text, never user text as a special token.
//
// Thread-safety: one tracker per render.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "template/value.h"

namespace powerhouse::jinja {

class Interpreter;

// Byte ranges [begin, end): sorted, disjoint and never touching (adjacent ones are merged).
using Spans = std::vector<std::pair<size_t, size_t>>;

// Adds [begin, end) to spans whose ranges all end at or before `begin` (append order).
void add_span(Spans& spans, size_t begin, size_t end);

// Text under construction with the ranges of it that are data.
struct TrackedText {
    std::string text;
    Spans data;
};

class DataTracker {
public:
    bool enabled() const { return enabled_; }
    void enable() { enabled_ = true; }

    // The data ranges of a string value; nullptr when it has none (or is not a string).
    const Spans* spans_of(const Value& value) const;
    // True when the value is, or contains at any depth, a string with data in it.
    bool contains_data(const Value& value) const;
    bool contains_data(const Args& args) const;

    // A new string value with the given data ranges. The string must be a fresh object.
    Value make(Interpreter& interp, TrackedText text);
    // The value with every string in it (list items, dict keys and values, at any depth)
    // marked as data as a whole; strings already entirely data are kept as they are.
    Value mark_all(Interpreter& interp, const Value& value);

    // Appends a string value to `out`, carrying its data ranges.
    void append(TrackedText& out, const Value& string_value) const;

private:
    bool enabled_ = false;
    // Keyed by the string object; the pointer kept alongside stops the address being reused
    // by another string during the render.
    std::unordered_map<const void*, std::pair<StringPtr, Spans>> spans_;
};

}  // namespace powerhouse::jinja
