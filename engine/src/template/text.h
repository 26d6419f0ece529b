// Python's str semantics over UTF-8 bytes, for the template interpreter: templates index,
// slice, strip, split and case-map strings the way Python does, by code point, with
// Python's idea of whitespace (str.isspace) and of line breaks (str.splitlines).
//
// Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (the scripts
// chat templates meet in role names and tool schemas); other characters pass unchanged.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace powerhouse::jinja {

// Decodes the code point at s[i] and advances i. Input is valid UTF-8 (checked on entry
// to the interpreter); a stray byte decodes as itself so that nothing ever reads past s.
char32_t next_code_point(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t cp);
bool is_valid_utf8(std::string_view s);
bool is_ascii(std::string_view s);

// len(s) in code points.
size_t code_point_count(std::string_view s);
// Byte offset of every code point, plus s.size() at the end (for slicing non-ASCII text).
std::vector<size_t> code_point_offsets(std::string_view s);

bool py_isspace(char32_t cp);
bool py_is_line_break(char32_t cp);
char32_t to_upper(char32_t cp);
char32_t to_lower(char32_t cp);
bool is_cased_upper(char32_t cp);  // has a lower-case mapping
bool is_cased_lower(char32_t cp);  // has an upper-case mapping

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);  // str.capitalize
std::string py_title(std::string_view s);       // str.title
std::string py_swapcase(std::string_view s);

// str.strip/lstrip/rstrip: with chars == nullptr, strips whitespace; else any of chars.
enum class StripSide { both, left, right };
std::string_view py_strip(std::string_view s, const std::string* chars, StripSide side = StripSide::both);

// str.split(): runs of whitespace, no empty parts; max_split < 0 means no limit.
std::vector<std::string> py_split_whitespace(std::string_view s, int64_t max_split);
// str.rsplit(): the same from the right.
std::vector<std::string> py_rsplit_whitespace(std::string_view s, int64_t max_split);
// str.split(sep) / str.rsplit(sep) with a non-empty separator.
std::vector<std::string> py_split(std::string_view s, std::string_view sep, int64_t max_split);
std::vector<std::string> py_rsplit(std::string_view s, std::string_view sep, int64_t max_split);
// str.splitlines(keepends).
std::vector<std::string> py_splitlines(std::string_view s, bool keep_ends);
// str.replace(old, new, count); count < 0 replaces all. An empty `old` inserts `new`
// between code points, as Python does.
std::string py_replace(std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count);

bool py_isdigit(std::string_view s);
bool py_isalpha(std::string_view s);
bool py_isalnum(std::string_view s);
bool py_isspace_str(std::string_view s);
bool py_isupper(std::string_view s);
bool py_islower(std::string_view s);

}  // namespace powerhouse::jinja
