#include "engine/template/template_test_support.h"

#include <fmt/format.h>

#include <algorithm>

namespace powerhouse::test {

namespace {

std::string escaped(std::string_view s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '\n':
                out += "\\n";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\\':
                out += "\\\\";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    out += fmt::format("\\x{:02x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
                } else {
                    out.push_back(c);
                }
        }
    }
    return out;
}

}  // namespace

std::string describe_difference(std::string_view expected, std::string_view actual) {
    const size_t n = std::min(expected.size(), actual.size());
    size_t at = 0;
    while (at < n && expected[at] == actual[at]) ++at;
    if (at == n && expected.size() == actual.size()) return "identical";
    const size_t from = at > 40 ? at - 40 : 0;
    return fmt::format(
        "first difference at byte {} (expected {} bytes, got {})\n  expected: ...{}\n  actual:   ...{}\n", at,
        expected.size(), actual.size(), escaped(expected.substr(from, 120)), escaped(actual.substr(from, 120)));
}

}  // namespace powerhouse::test
