// Recursive-descent parser for the supported Jinja subset, following jinja2's grammar and
// operator precedence (including its quirks: `**` is left-associative, `-2**2` is 4,
// filters bind tighter than arithmetic, `x is test arg` takes one argument without parens).
//
// Recursion is bounded: every nested expression or block counts against
// TemplateLimits::max_nesting, so 10,000 nested parentheses fail with a clear error
// instead of exhausting the stack, and no tree deeper than the limit is ever built.
//
// Thread-safety: pure function.
#pragma once

#include <string_view>

#include "powerhouse/chat_template.h"
#include "template/ast.h"

namespace powerhouse::jinja {

// Parses a normalized source (see normalize_source). Throws TemplateError.
TemplateAst parse_template(std::string_view source, const TemplateLimits& limits);

// "12:5" for a byte offset (1-based line, column in characters).
std::string line_column(std::string_view source, uint32_t offset);

}  // namespace powerhouse::jinja
