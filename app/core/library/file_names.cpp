#include "library/file_names.h"

#include <cctype>

namespace powerhouse::library {

namespace detail {

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
            return false;
        }
    }
    return true;
}

}  // namespace detail

using detail::iequals;

namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string_view trim_blanks(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// A quoted-string's content with its backslash escapes undone.
std::string unquote(std::string_view value) {
    if (value.size() < 2 || value.front() != '"') return std::string(value);
    std::string out;
    for (size_t i = 1; i < value.size(); ++i) {
        if (value[i] == '"') break;
        if (value[i] == '\\' && i + 1 < value.size()) ++i;
        out += value[i];
    }
    return out;
}

}  // namespace

std::string percent_decode(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '%' && i + 2 < text.size()) {
            const int hi = hex_value(text[i + 1]);
            const int lo = hex_value(text[i + 2]);
            if (hi >= 0 && lo >= 0) {
                out += static_cast<char>(hi * 16 + lo);
                i += 2;
                continue;
            }
        }
        out += text[i];
    }
    return out;
}

std::string file_name_from_url(std::string_view url) {
    const size_t end = url.find_first_of("?#");
    if (end != std::string_view::npos) url = url.substr(0, end);
    const size_t scheme = url.find("://");
    if (scheme != std::string_view::npos) {
        url.remove_prefix(scheme + 3);
        const size_t path = url.find('/');
        if (path == std::string_view::npos) return {};
        url.remove_prefix(path);
    }
    const size_t slash = url.rfind('/');
    return percent_decode(slash == std::string_view::npos ? url : url.substr(slash + 1));
}

std::string file_name_from_content_disposition(std::string_view header) {
    std::string plain;
    std::string extended;
    // Parameters are separated by ';' outside quoted strings.
    size_t i = 0;
    while (i < header.size()) {
        size_t j = i;
        bool quoted = false;
        for (; j < header.size(); ++j) {
            if (header[j] == '"' && (j == 0 || header[j - 1] != '\\')) quoted = !quoted;
            if (header[j] == ';' && !quoted) break;
        }
        const std::string_view part = trim_blanks(header.substr(i, j - i));
        i = j + 1;
        const size_t eq = part.find('=');
        if (eq == std::string_view::npos) continue;
        const std::string_view key = trim_blanks(part.substr(0, eq));
        const std::string_view value = trim_blanks(part.substr(eq + 1));
        if (iequals(key, "filename")) {
            plain = unquote(value);
        } else if (iequals(key, "filename*")) {
            // charset'language'percent-encoded-value; only UTF-8 (and ASCII) are meaningful.
            const size_t first = value.find('\'');
            const size_t second = first == std::string_view::npos ? first : value.find('\'', first + 1);
            if (second == std::string_view::npos) continue;
            const std::string_view charset = value.substr(0, first);
            if (!iequals(charset, "UTF-8") && !iequals(charset, "us-ascii")) continue;
            extended = percent_decode(value.substr(second + 1));
        }
    }
    return extended.empty() ? plain : extended;
}

std::string safe_file_name(std::string_view name) {
    const size_t slash = name.find_last_of("/\\");
    if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
    name = trim_blanks(name);
    if (name.empty() || name.front() == '.' || name.size() > 255) return {};
    for (const char c : name) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return {};
    }
    return std::string(name);
}

}  // namespace powerhouse::library
