// Human-readable numbers for the command line: sizes, counts, tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "powerhouse/result.h"

namespace powerhouse::cli {

std::string format_bytes(uint64_t bytes);     // "4.58 GiB"
std::string format_count(uint64_t count);     // "134.5 M", "8.03 B"

// A plain-text table with a header row; columns are left-aligned unless numeric.
std::string format_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

// JSON as text, any invalid UTF-8 in it (a file name, a model's metadata, a server's answer)
// written as U+FFFD: nlohmann's dump() throws on it, which ended the program.
template <class Json>
std::string json_text(const Json& json, int indent = -1) {
    return json.dump(indent, ' ', false, Json::error_handler_t::replace);
}

// The whole content of a file ("-": standard input); a folder is an error, not an empty file.
Result<std::string> read_file_text(const std::string& path);

// The API key in a file (--api-key-file), surrounding whitespace removed: an error when the
// file holds none. The key is never printed, nor part of an error.
Result<std::string> read_api_key_file(const std::string& path);

// The Hugging Face token for `search` and `pull`: the content of `token_file`
// (--hf-token-file) when given, else $HF_TOKEN, as the huggingface_hub tools read it; "" for
// none. Like an API key, it is never printed, nor part of an error.
Result<std::string> read_hf_token(const std::string& token_file);

// Prints "error: <message>" to stderr and returns 1.
int report_error(const Error& error);

}  // namespace powerhouse::cli
