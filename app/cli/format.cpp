#include "format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace powerhouse::cli {

Result<std::string> read_file_text(const std::string& path) {
    if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
    // A folder opens like a file and then reads as nothing: it would pass for an empty file.
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        return make_error(ErrorCode::invalid_argument, fmt::format("'{}' is a folder: name a file", path));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(ErrorCode::io, fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return make_error(ErrorCode::io, fmt::format("cannot read '{}'", path));
    return text.str();
}

Result<std::string> read_api_key_file(const std::string& path) {
    Result<std::string> text = read_file_text(path);
    if (!text) return text.error();
    const size_t first = text->find_first_not_of(" \t\r\n");
    if (first == std::string::npos) {
        return make_error(ErrorCode::invalid_argument, fmt::format("{} holds no API key", path));
    }
    const size_t last = text->find_last_not_of(" \t\r\n");
    return text->substr(first, last - first + 1);
}

Result<std::string> read_hf_token(const std::string& token_file) {
    std::string token;
    if (!token_file.empty()) {
        Result<std::string> text = read_file_text(token_file);
        if (!text) return text.error();
        token = std::move(text).value();
        if (token.find_first_not_of(" \t\r\n") == std::string::npos) {
            return make_error(ErrorCode::invalid_argument, fmt::format("{} holds no Hugging Face token", token_file));
        }
    } else if (const char* value = std::getenv("HF_TOKEN"); value != nullptr) {
        token = value;
    }
    const size_t first = token.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return std::string();
    const size_t last = token.find_last_not_of(" \t\r\n");
    return token.substr(first, last - first + 1);
}

std::string format_bytes(uint64_t bytes) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double value = static_cast<double>(bytes);
    size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < std::size(units)) {
        value /= 1024.0;
        ++unit;
    }
    return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", value, units[unit]);
}

std::string format_count(uint64_t count) {
    const double v = static_cast<double>(count);
    if (v >= 1e9) return fmt::format("{:.2f} B", v / 1e9);
    if (v >= 1e6) return fmt::format("{:.1f} M", v / 1e6);
    if (v >= 1e3) return fmt::format("{:.1f} K", v / 1e3);
    return fmt::format("{}", count);
}

std::string format_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
    std::vector<size_t> width(header.size(), 0);
    std::vector<bool> numeric(header.size(), true);
    auto measure = [&](const std::vector<std::string>& row, bool is_header) {
        for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
            width[c] = std::max(width[c], row[c].size());
            if (!is_header && !row[c].empty() && !(std::isdigit(static_cast<unsigned char>(row[c][0])) != 0)) {
                numeric[c] = false;
            }
        }
    };
    measure(header, true);
    for (const auto& row : rows) measure(row, false);
    auto line = [&](const std::vector<std::string>& row) {
        std::string out;
        for (size_t c = 0; c < width.size(); ++c) {
            const std::string cell = c < row.size() ? row[c] : "";
            const std::string pad(width[c] - cell.size(), ' ');
            out += (c ? "  " : "") + (numeric[c] ? pad + cell : cell + (c + 1 < width.size() ? pad : ""));
        }
        return out + "\n";
    };
    std::string out = line(header);
    for (const auto& row : rows) out += line(row);
    return out;
}

int report_error(const Error& error) {
    std::fprintf(stderr, "error: %s\n", error.message.c_str());
    return 1;
}

}  // namespace powerhouse::cli
