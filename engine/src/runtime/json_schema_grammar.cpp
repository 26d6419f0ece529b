// json_schema_to_grammar and json_object_grammar (powerhouse/grammar.h): JSON schemas to GBNF
// text.
//
// Each schema becomes a grammar expression; anything bigger than a few symbols gets a rule of
// its own, named from where it sits in the schema. The choices that are not spelled out by
// JSON Schema itself:
//  - Objects list their properties in the order of "properties"; required ones must appear,
//    optional ones may be left out. Extra properties (when additionalProperties allows them)
//    come after the declared ones, and their names may not be declared names, so that a
//    declared property cannot slip in unchecked as an extra one.
//  - Whitespace between tokens is bounded: one or two spaces or tabs, or a line break and up
//    to 32 of them (room for pretty-printing 16 levels deep). Numbers are bounded as well:
//    at most 19 integer digits, 20 fraction digits and 3 exponent digits. A model can loop
//    forever on unbounded whitespace or digits; nobody needs more than this.
//  - oneOf is read as anyOf: a grammar cannot check that exactly one branch matches.
// Everything else a schema can say and a grammar cannot is refused with an error naming the
// keyword and where it is, never ignored.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "powerhouse/grammar.h"

namespace powerhouse {
namespace {

using Json = nlohmann::ordered_json;

constexpr uint64_t kMaxCount = 10000;               // minLength, maxLength, minItems, maxItems
constexpr size_t kMaxDigits = 19;                   // integer digits of an unbounded integer
constexpr int64_t kMaxBound = 1000000000000000000;  // integer minimum/maximum are clamped to +-1e18

struct SchemaFailure {
    std::string message;
};

const std::set<std::string>& annotation_keywords() {
    static const std::set<std::string> k = {"title",    "description", "default",  "examples",
                                            "$schema",  "$id",         "$comment", "deprecated",
                                            "readOnly", "writeOnly",   "$defs",    "definitions"};
    return k;
}

const std::set<std::string>& supported_keywords() {
    static const std::set<std::string> k = {"type",   "properties",  "required",  "additionalProperties",
                                            "items",  "prefixItems", "minItems",  "maxItems",
                                            "enum",   "const",       "anyOf",     "oneOf",
                                            "allOf",  "$ref",        "minLength", "maxLength",
                                            "format", "minimum",     "maximum"};
    return k;
}

// A code point inside a GBNF character class.
std::string class_char(uint32_t cp) {
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) {
        return std::string(1, static_cast<char>(cp));
    }
    return cp <= 0xFFFF ? fmt::format("\\u{:04X}", cp) : fmt::format("\\U{:08X}", cp);
}

std::vector<uint32_t> code_points(std::string_view s) {
    std::vector<uint32_t> out;
    for (size_t i = 0; i < s.size();) {
        const auto b = static_cast<uint8_t>(s[i]);
        const size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1Fu) : n == 3 ? (b & 0x0Fu) : (b & 0x07u);
        for (size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3Fu);
        out.push_back(cp);
        i += n;
    }
    return out;
}

std::string utf8(uint32_t cp) {
    std::string out;
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return out;
}

// "\uXXXX" with the hex letters in either case, as a GBNF sequence.
std::string unicode_escape(uint32_t unit) {
    std::string out = "\"\\\\u\"";
    const std::string hex = fmt::format("{:04x}", unit);
    for (char h : hex)
        out += h >= 'a' ? fmt::format(" [{}{}]", h, static_cast<char>(h - 'a' + 'A')) : fmt::format(" \"{}\"", h);
    return out;
}

// The ways JSON may write one character inside a string.
std::string json_char_forms(uint32_t cp) {
    std::vector<std::string> forms;
    if (cp >= 0x20 && cp != '"' && cp != '\\') forms.push_back(grammar_literal(utf8(cp)));
    static const std::map<uint32_t, char> kShort = {{'"', '"'},  {'\\', '\\'}, {'/', '/'},  {'\b', 'b'},
                                                    {'\f', 'f'}, {'\n', 'n'},  {'\r', 'r'}, {'\t', 't'}};
    if (auto it = kShort.find(cp); it != kShort.end()) forms.push_back(grammar_literal(std::string("\\") + it->second));
    if (cp <= 0xFFFF) {
        forms.push_back(unicode_escape(cp));
    } else {
        const uint32_t v = cp - 0x10000;
        forms.push_back(unicode_escape(0xD800 + (v >> 10)) + " " + unicode_escape(0xDC00 + (v & 0x3FF)));
    }
    std::string out = "(";
    for (size_t i = 0; i < forms.size(); ++i) out += (i ? " | " : "") + forms[i];
    return out + ")";
}

bool plain_json_char(uint32_t cp) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == ' ' || cp == '_' ||
           cp == '-' || cp == '.' || cp == ',' || cp == ':';
}

// A JSON string that holds exactly `value`: letters and digits as themselves, every other
// character in any of its spellings (raw, short escape, \u escape).
std::string json_string_literal(std::string_view value) {
    std::string out = "\"\\\"\"";
    std::string plain;
    auto flush = [&] {
        if (!plain.empty()) out += " " + grammar_literal(plain);
        plain.clear();
    };
    for (uint32_t cp : code_points(value)) {
        if (plain_json_char(cp)) {
            plain += static_cast<char>(cp);
        } else {
            flush();
            out += " " + json_char_forms(cp);
        }
    }
    flush();
    return out + " \"\\\"\"";
}

// Same-length digit strings from lo to hi (lo <= hi), as a GBNF sequence.
std::string digits_between(const std::string& lo, const std::string& hi) {
    if (lo == hi) return grammar_literal(lo);
    size_t i = 0;
    while (lo[i] == hi[i]) ++i;
    const size_t rest = lo.size() - i - 1;
    const std::string lo_tail = lo.substr(i + 1);
    const std::string hi_tail = hi.substr(i + 1);
    const auto digits_class = [](char a, char b) {
        return a == b ? grammar_literal(std::string(1, a)) : fmt::format("[{}-{}]", a, b);
    };
    const std::string any_rest = rest == 0 ? "" : fmt::format(" [0-9]{{{}}}", rest);
    std::vector<std::string> alts;
    char middle_lo = lo[i];
    char middle_hi = hi[i];
    if (lo_tail.find_first_not_of('0') != std::string::npos) {
        alts.push_back(grammar_literal(std::string(1, lo[i])) + " " + digits_between(lo_tail, std::string(rest, '9')));
        ++middle_lo;
    }
    if (hi_tail.find_first_not_of('9') != std::string::npos) {
        alts.push_back(grammar_literal(std::string(1, hi[i])) + " " + digits_between(std::string(rest, '0'), hi_tail));
        --middle_hi;
    }
    if (middle_lo <= middle_hi) alts.push_back(digits_class(middle_lo, middle_hi) + any_rest);
    std::string out = i > 0 ? grammar_literal(lo.substr(0, i)) + " (" : "(";
    for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
    return out + ")";
}

// Decimal integers (no leading zeros) from lo up to hi, or without an upper bound (up to
// kMaxDigits digits) when !bounded: the alternatives.
std::vector<std::string> non_negative_range(uint64_t lo, bool bounded, uint64_t hi) {
    std::vector<std::string> alts;
    if (lo == 0) {
        alts.push_back("\"0\"");
        lo = 1;
    }
    if (bounded && hi < lo) return alts;
    const std::string lo_s = std::to_string(lo);
    const size_t lo_len = lo_s.size();
    if (bounded) {
        const std::string hi_s = std::to_string(hi);
        for (size_t len = lo_len; len <= hi_s.size(); ++len) {
            const std::string a = len == lo_len ? lo_s : "1" + std::string(len - 1, '0');
            const std::string b = len == hi_s.size() ? hi_s : std::string(len, '9');
            alts.push_back(digits_between(a, b));
        }
    } else {
        alts.push_back(digits_between(lo_s, std::string(lo_len, '9')));
        if (lo_len < kMaxDigits) alts.push_back(fmt::format("[1-9] [0-9]{{{},{}}}", lo_len, kMaxDigits - 1));
    }
    return alts;
}

std::string join_alternatives(const std::vector<std::string>& alts) {
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
}

// {min,max} for a GBNF repetition; max nullopt: unbounded.
std::string repetition(uint64_t min, std::optional<uint64_t> max) {
    if (!max) return fmt::format("{{{},}}", min);
    return fmt::format("{{{},{}}}", min, *max);
}

std::string pointer_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (c == '~') {
            out += "~0";
        } else if (c == '/') {
            out += "~1";
        } else {
            out += c;
        }
    }
    return out;
}

class SchemaConverter {
public:
    SchemaConverter(const Json& root, std::string_view root_name, std::string_view prefix)
        : root_(root), root_name_(root_name), prefix_(prefix) {
        used_names_.insert(root_name_);
        ref_rules_["#"] = root_name_;
    }

    std::string run() {
        const std::string body = visit(root_, "root");
        std::string out = fmt::format("{} ::= {}\n", root_name_, body);
        for (const auto& [name, rule_body] : rules_) out += fmt::format("{} ::= {}\n", name, rule_body);
        return out;
    }

private:
    [[noreturn]] void fail(std::string_view what) const {
        throw SchemaFailure{fmt::format("json schema at {}: {}", path_.empty() ? "/" : path_, what)};
    }

    // Descends into a sub-schema for error messages.
    class PathScope {
    public:
        PathScope(SchemaConverter& c, std::string_view keyword, std::string_view name = {}) : c_(c), saved_(c.path_) {
            c_.path_ += "/" + std::string(keyword);
            if (!name.empty()) c_.path_ += "/" + pointer_escape(name);
        }
        ~PathScope() { c_.path_ = saved_; }
        PathScope(const PathScope&) = delete;
        PathScope& operator=(const PathScope&) = delete;

    private:
        SchemaConverter& c_;
        std::string saved_;
    };

    std::string new_name(std::string_view hint) {
        std::string base = prefix_;
        for (char c : hint) {
            const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
            if (ok) {
                base += c;
            } else if (!base.empty() && base.back() != '-') {
                base += '-';
            }
            if (base.size() > prefix_.size() + 48) break;
        }
        if (base.empty()) base = "r";
        std::string name = base;
        for (int n = 2; used_names_.count(name); ++n) name = fmt::format("{}-{}", base, n);
        used_names_.insert(name);
        return name;
    }

    std::string add_rule(std::string_view hint, std::string body) {
        std::string name = new_name(hint);
        rules_.emplace_back(name, std::move(body));
        return name;
    }

    // The shared rules of plain JSON, added on first use.
    std::string prim(const std::string& kind) {
        if (auto it = prims_.find(kind); it != prims_.end()) return it->second;
        const std::string name = new_name(kind);
        prims_[kind] = name;
        const size_t slot = rules_.size();
        rules_.emplace_back(name, "");
        std::string body;
        if (kind == "ws") {
            body = "( [ \\t]{1,2} | \"\\n\" [ \\t]{0,32} )?";
        } else if (kind == "char") {
            body = "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )";
        } else if (kind == "string") {
            body = fmt::format("\"\\\"\" {}* \"\\\"\"", prim("char"));
        } else if (kind == "integer") {
            body = fmt::format("\"-\"? ( \"0\" | [1-9] [0-9]{{0,{}}} )", kMaxDigits - 1);
        } else if (kind == "number") {
            body = fmt::format("{} ( \".\" [0-9]{{1,20}} )? ( [eE] [-+]? [0-9]{{1,3}} )?", prim("integer"));
        } else if (kind == "boolean") {
            body = "\"true\" | \"false\"";
        } else if (kind == "value") {
            body = fmt::format("{} | {} | {} | {} | {} | \"null\"", prim("object"), prim("array"), prim("string"),
                               prim("number"), prim("boolean"));
        } else if (kind == "object") {
            const std::string member =
                fmt::format("{0} {1} \":\" {1} {2} {1}", prim("string"), prim("ws"), prim("value"));
            body = fmt::format("\"{{\" {0} ( {1} ( \",\" {0} {1} )* )? \"}}\"", prim("ws"), member);
        } else if (kind == "array") {
            body = fmt::format("\"[\" {0} ( {1} {0} ( \",\" {0} {1} {0} )* )? \"]\"", prim("ws"), prim("value"));
        } else if (kind == "hex") {
            body = "[0-9a-fA-F]";
        } else if (kind == "date") {
            body = fmt::format(
                "{} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
                "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
                "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) | {} \"-02-29\"",
                prim("year"), prim("leap-year"));
        } else if (kind == "year") {  // 0001 to 9999, as Python's datetime and RFC 3339
            body = "[1-9] [0-9]{3} | \"0\" ( [1-9] [0-9]{2} | \"0\" ( [1-9] [0-9] | \"0\" [1-9] ) )";
        } else if (kind == "leap-year") {  // divisible by 4, and by 400 when by 100
            body = fmt::format("[0-9] [0-9] {0} | {0} \"00\"", prim("div4"));
        } else if (kind == "div4") {  // two digits divisible by 4, not 00
            body = "\"0\" [48] | [2468] [048] | [13579] [26]";
        } else if (kind == "time") {  // RFC 3339 full-time: an offset is required
            body =
                "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? "
                "( [zZ] | [-+] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )";
        } else if (kind == "date-time") {
            body = fmt::format("{} [tT] {}", prim("date"), prim("time"));
        } else if (kind == "uuid") {
            body = fmt::format("{0}{{8}} \"-\" {0}{{4}} \"-\" {0}{{4}} \"-\" {0}{{4}} \"-\" {0}{{12}}", prim("hex"));
        }
        rules_[slot].second = std::move(body);
        return name;
    }

    void check_keywords(const Json& s) const {
        for (const auto& [key, value] : s.items()) {
            if (!supported_keywords().count(key) && !annotation_keywords().count(key)) {
                fail(fmt::format("unsupported keyword '{}'", key));
            }
        }
    }

    // Only `allowed` (and annotations) may stand beside `keyword`.
    void only_with(const Json& s, std::string_view keyword, const std::set<std::string>& allowed = {}) const {
        for (const auto& [key, value] : s.items()) {
            if (key == keyword || annotation_keywords().count(key) || allowed.count(key)) continue;
            fail(fmt::format("'{}' beside '{}' is not supported", key, keyword));
        }
    }

    std::optional<uint64_t> count(const Json& s, const char* key) const {
        if (!s.contains(key)) return std::nullopt;
        const Json& v = s[key];
        if (!v.is_number() || v.get<double>() < 0 || std::floor(v.get<double>()) != v.get<double>()) {
            fail(fmt::format("'{}' must be a non-negative integer", key));
        }
        const double d = v.get<double>();
        if (d > static_cast<double>(kMaxCount)) {
            fail(fmt::format("'{}' {} is above the {} a grammar can bound", key, d, kMaxCount));
        }
        return static_cast<uint64_t>(d);
    }

    std::vector<std::string> types_of(const Json& s) const {
        static const std::set<std::string> kTypes = {"object",  "array",   "string", "number",
                                                     "integer", "boolean", "null"};
        std::vector<std::string> types;
        if (s.contains("type")) {
            const Json& t = s["type"];
            if (t.is_string()) {
                types.push_back(t.get<std::string>());
            } else if (t.is_array() && !t.empty()) {
                for (const Json& x : t) {
                    if (!x.is_string()) fail("'type' must be a string or a list of strings");
                    types.push_back(x.get<std::string>());
                }
            } else {
                fail("'type' must be a string or a non-empty list of strings");
            }
            for (const std::string& x : types) {
                if (!kTypes.count(x)) fail(fmt::format("unknown type '{}'", x));
            }
            return types;
        }
        // No type: the one the keywords belong to (stricter than JSON Schema, which would let
        // values of other types through, but no one writes a schema meaning that).
        auto has = [&](std::initializer_list<const char*> keys) {
            return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
        };
        if (has({"properties", "additionalProperties", "required"})) types.push_back("object");
        if (has({"items", "prefixItems", "minItems", "maxItems"})) types.push_back("array");
        if (has({"minLength", "maxLength", "format"})) types.push_back("string");
        if (has({"minimum", "maximum"})) fail("'minimum'/'maximum' need \"type\": \"integer\"");
        if (types.size() > 1) fail("keywords of several types without a 'type'");
        return types;
    }

    std::string visit(const Json& s, std::string_view hint) {
        if (s.is_boolean()) {
            if (s.get<bool>()) return prim("value");
            fail("the schema false accepts nothing");
        }
        if (!s.is_object()) fail("a schema must be an object or a boolean");
        check_keywords(s);
        if (s.contains("$ref")) {
            only_with(s, "$ref");
            return ref_rule(s["$ref"]);
        }
        for (const char* key : {"anyOf", "oneOf"}) {
            if (!s.contains(key)) continue;
            only_with(s, key);
            const Json& branches = s[key];
            if (!branches.is_array() || branches.empty()) fail(fmt::format("'{}' must be a non-empty list", key));
            std::vector<std::string> alts;
            for (size_t i = 0; i < branches.size(); ++i) {
                PathScope scope(*this, key, std::to_string(i));
                alts.push_back(visit(branches[i], fmt::format("{}-{}", hint, i)));
            }
            if (alts.size() == 1) return alts[0];
            std::string body;
            for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
            return add_rule(hint, body);
        }
        if (s.contains("allOf")) return all_of(s, hint);
        if (s.contains("const") || s.contains("enum")) return literal_values(s, hint);
        const std::vector<std::string> types = types_of(s);
        if (types.empty()) return prim("value");
        std::vector<std::string> alts;
        for (const std::string& t : types) alts.push_back(visit_type(s, t, hint));
        if (alts.size() == 1) return alts[0];
        std::string body;
        for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
        return add_rule(hint, body);
    }

    std::string visit_type(const Json& s, const std::string& type, std::string_view hint) {
        if (type == "null") return "\"null\"";
        if (type == "boolean") return prim("boolean");
        if (type == "integer") return integer(s, hint);
        if (type == "number") {
            if (s.contains("minimum") || s.contains("maximum")) {
                fail("'minimum'/'maximum' on a number are not supported (only on integers)");
            }
            return prim("number");
        }
        if (type == "string") return string(s, hint);
        if (type == "array") return array(s, hint);
        return object(s, hint);
    }

    std::optional<int64_t> bound(const Json& s, const char* key, bool is_min) const {
        if (!s.contains(key)) return std::nullopt;
        const Json& v = s[key];
        if (!v.is_number()) fail(fmt::format("'{}' must be a number", key));
        if (v.is_number_integer() && v.is_number_unsigned()) {
            return static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), kMaxBound));
        }
        if (v.is_number_integer()) return std::clamp<int64_t>(v.get<int64_t>(), -kMaxBound, kMaxBound);
        const double d = is_min ? std::ceil(v.get<double>()) : std::floor(v.get<double>());
        return static_cast<int64_t>(std::clamp(d, -static_cast<double>(kMaxBound), static_cast<double>(kMaxBound)));
    }

    std::string integer(const Json& s, std::string_view hint) {
        const std::optional<int64_t> lo = bound(s, "minimum", true);
        const std::optional<int64_t> hi = bound(s, "maximum", false);
        if (!lo && !hi) return prim("integer");
        if (lo && hi && *lo > *hi) fail("no integer lies between 'minimum' and 'maximum'");
        std::vector<std::string> alts;
        if (!hi || *hi >= 0) {
            const uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
            alts = non_negative_range(from, hi.has_value(), hi ? static_cast<uint64_t>(*hi) : 0);
        }
        if (!lo || *lo < 0) {
            const uint64_t from = hi && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
            alts.push_back("\"-\" " + join_alternatives(non_negative_range(from, lo.has_value(),
                                                                           lo ? static_cast<uint64_t>(-*lo) : 0)));
        }
        std::string body;
        for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
        return add_rule(std::string(hint) + "-int", body);
    }

    std::string string(const Json& s, std::string_view hint) {
        const std::optional<uint64_t> min = count(s, "minLength");
        const std::optional<uint64_t> max = count(s, "maxLength");
        if (s.contains("format")) {
            if (min || max) fail("'minLength'/'maxLength' beside 'format' are not supported");
            if (!s["format"].is_string()) fail("'format' must be a string");
            const std::string format = s["format"].get<std::string>();
            if (format != "date" && format != "time" && format != "date-time" && format != "uuid") {
                fail(fmt::format("format '{}' is not supported (date, time, date-time and uuid are)", format));
            }
            return fmt::format("\"\\\"\" {} \"\\\"\"", prim(format));
        }
        if (!min && !max) return prim("string");
        if (min && max && *min > *max) fail("'minLength' is above 'maxLength'");
        return add_rule(std::string(hint) + "-string",
                        fmt::format("\"\\\"\" {}{} \"\\\"\"", prim("char"), repetition(min.value_or(0), max)));
    }

    std::string array(const Json& s, std::string_view hint) {
        std::vector<std::string> prefix;
        if (s.contains("prefixItems")) {
            const Json& p = s["prefixItems"];
            if (!p.is_array()) fail("'prefixItems' must be a list of schemas");
            for (size_t i = 0; i < p.size(); ++i) {
                PathScope scope(*this, "prefixItems", std::to_string(i));
                prefix.push_back(visit(p[i], fmt::format("{}-{}", hint, i)));
            }
        }
        std::optional<std::string> tail = prim("value");  // JSON Schema: more items of any kind
        if (s.contains("items")) {
            const Json& items = s["items"];
            if (items.is_array()) fail("'items' as a list is not supported (use 'prefixItems')");
            if (items.is_boolean() && !items.get<bool>()) {
                tail.reset();
            } else {
                PathScope scope(*this, "items");
                tail = visit(items, std::string(hint) + "-item");
            }
        }
        const uint64_t k = prefix.size();
        const uint64_t min = count(s, "minItems").value_or(0);
        std::optional<uint64_t> max = count(s, "maxItems");
        if (!tail) max = std::min<uint64_t>(max.value_or(k), k);
        if (max && min > *max) fail("no array length satisfies 'minItems' and 'maxItems' (and the items allowed)");
        const std::string ws = prim("ws");
        if (max && *max == 0) return add_rule(std::string(hint) + "-array", fmt::format("\"[\" {} \"]\"", ws));
        // after(i): what may follow once i items are written (i >= 1).
        const uint64_t kk = max ? std::min(k, *max) : k;
        std::vector<std::string> after(kk + 1);
        if (kk < k || !tail) {
            after[kk] = "\"\"";
        } else {
            const uint64_t more_min = min > k ? min - k : 0;
            const std::optional<uint64_t> more_max = max ? std::optional<uint64_t>(*max - k) : std::nullopt;
            after[kk] = fmt::format("( \",\" {0} {1} {0} ){2}", ws, *tail, repetition(more_min, more_max));
        }
        for (uint64_t i = kk; i-- > 1;) {
            std::string body = fmt::format("\",\" {0} {1} {0} {2}", ws, prefix[i], after[i + 1]);
            if (i >= min) body += " | \"\"";
            after[i] = add_rule(fmt::format("{}-after-{}", hint, i), body);
        }
        std::string items;
        if (k == 0) {
            const uint64_t more_min = min > 1 ? min - 1 : 0;
            const std::optional<uint64_t> more_max = max ? std::optional<uint64_t>(*max - 1) : std::nullopt;
            items = fmt::format("{1} {0} ( \",\" {0} {1} {0} ){2}", ws, *tail, repetition(more_min, more_max));
        } else {
            items = fmt::format("{} {} {}", prefix[0], ws, after[1]);
        }
        return add_rule(std::string(hint) + "-array",
                        fmt::format("\"[\" {} ( {} ){} \"]\"", ws, items, min == 0 ? "?" : ""));
    }

    struct Property {
        std::string name;
        std::string value;  // grammar expression
        bool required = false;
    };

    std::string object(const Json& s, std::string_view hint) {
        const bool has_properties = s.contains("properties");
        if (!has_properties && !s.contains("additionalProperties") && !s.contains("required")) {
            return prim("object");  // {"type": "object"}: any object
        }
        std::vector<std::string> required;  // in the schema's order
        if (s.contains("required")) {
            if (!s["required"].is_array()) fail("'required' must be a list of names");
            for (const Json& r : s["required"]) {
                if (!r.is_string()) fail("'required' must be a list of names");
                required.push_back(r.get<std::string>());
            }
        }
        const auto is_required = [&](const std::string& name) {
            return std::find(required.begin(), required.end(), name) != required.end();
        };
        std::optional<std::string> additional;  // the value expression of extra properties
        if (s.contains("additionalProperties")) {
            const Json& a = s["additionalProperties"];
            if (!(a.is_boolean() && !a.get<bool>())) {
                PathScope scope(*this, "additionalProperties");
                additional = visit(a, std::string(hint) + "-extra");
            }
        }
        std::vector<Property> props;
        if (has_properties) {
            if (!s["properties"].is_object()) fail("'properties' must be an object");
            for (const auto& [name, sub] : s["properties"].items()) {
                PathScope scope(*this, "properties", name);
                props.push_back({name, visit(sub, fmt::format("{}-{}", hint, name)), is_required(name)});
            }
        }
        for (const std::string& r : required) {
            const bool declared =
                std::any_of(props.begin(), props.end(), [&](const Property& p) { return p.name == r; });
            if (declared) continue;
            if (!additional) fail(fmt::format("required property '{}' is not in 'properties'", r));
            props.push_back({r, *additional, true});
        }
        return object_rule(props, additional, hint);
    }

    // The members of an object in declaration order (see the file comment). a(i): the members
    // from i on when none came before; b(i): the same after at least one (each starts with a comma).
    std::string object_rule(const std::vector<Property>& props, const std::optional<std::string>& additional,
                            std::string_view hint) {
        const std::string ws = prim("ws");
        const size_t n = props.size();
        std::vector<std::string> kv(n);
        for (size_t i = 0; i < n; ++i) {
            kv[i] = add_rule(
                fmt::format("{}-{}-kv", hint, props[i].name),
                fmt::format("{} {} \":\" {} {} {}", json_string_literal(props[i].name), ws, ws, props[i].value, ws));
        }
        std::string tail_a = "\"\"";
        std::string tail_b = "\"\"";
        if (additional) {
            std::vector<std::string> names;
            for (const Property& p : props) names.push_back(p.name);
            const std::string key = names.empty() ? prim("string") : other_key(names, hint);
            const std::string extra = add_rule(std::string(hint) + "-extra-kv",
                                               fmt::format("{} {} \":\" {} {} {}", key, ws, ws, *additional, ws));
            tail_a = fmt::format("( {0} ( \",\" {1} {0} )* )?", extra, ws);
            tail_b = fmt::format("( \",\" {1} {0} )*", extra, ws);
        }
        std::vector<std::string> b(n + 1);
        b[n] = tail_b;
        for (size_t i = n; i-- > 1;) {
            std::string body = fmt::format("\",\" {} {} {}", ws, kv[i], b[i + 1]);
            if (!props[i].required) body += " | " + b[i + 1];
            b[i] = add_rule(fmt::format("{}-rest-{}", hint, i), body);
        }
        // a(i) is reached only through optional properties before i.
        size_t first_required = 0;
        while (first_required < n && !props[first_required].required) ++first_required;
        std::string a = tail_a;
        for (size_t i = std::min(first_required + 1, n); i-- > 0;) {
            std::string body = fmt::format("{} {}", kv[i], b[i + 1]);
            if (!props[i].required) body += " | " + a;
            a = i == 0 ? body : add_rule(fmt::format("{}-from-{}", hint, i), body);
        }
        return add_rule(std::string(hint) + "-object", fmt::format("\"{{\" {} ( {} ) \"}}\"", ws, a));
    }

    // A JSON string (quotes included) that is none of `names`: a trie over their characters,
    // one rule per node. Leaving the trie (another character, or any escape) frees the rest.
    std::string other_key(const std::vector<std::string>& names, std::string_view hint) {
        struct Node {
            std::map<uint32_t, size_t> children;
            bool terminal = false;
        };
        std::vector<Node> trie(1);
        for (const std::string& name : names) {
            size_t at = 0;
            for (uint32_t cp : code_points(name)) {
                auto it = trie[at].children.find(cp);
                if (it == trie[at].children.end()) {
                    trie.push_back({});
                    it = trie[at].children.emplace(cp, trie.size() - 1).first;
                }
                at = it->second;
            }
            trie[at].terminal = true;
        }
        const std::string chr = prim("char");
        std::vector<std::string> rule_names(trie.size());
        for (size_t i = 0; i < trie.size(); ++i) rule_names[i] = new_name(fmt::format("{}-key-{}", hint, i));
        for (size_t i = 0; i < trie.size(); ++i) {
            std::string excluded;
            std::vector<std::string> alts;
            for (const auto& [cp, child] : trie[i].children) {
                if (cp < 0x20 || cp == '"' || cp == '\\') continue;  // never raw in a JSON string
                excluded += class_char(cp);
                alts.push_back(grammar_literal(utf8(cp)) + " " + rule_names[child]);
            }
            alts.push_back(fmt::format("[^\"\\\\\\x00-\\x1F{}] {}*", excluded, chr));
            alts.push_back(fmt::format("\"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{{4}} ) {}*", chr));
            if (!trie[i].terminal) alts.push_back("\"\"");
            std::string body;
            for (size_t k = 0; k < alts.size(); ++k) body += (k ? " | " : "") + alts[k];
            rules_.emplace_back(rule_names[i], body);
        }
        return fmt::format("\"\\\"\" {} \"\\\"\"", rule_names[0]);
    }

    std::string all_of(const Json& s, std::string_view hint) {
        only_with(s, "allOf", {"type", "properties", "required"});
        if (s.contains("type") && s["type"] != Json("object")) fail("'allOf' is supported for objects only");
        const Json& members = s["allOf"];
        if (!members.is_array() || members.empty()) fail("'allOf' must be a non-empty list");
        Json merged = Json::object();
        Json merged_required = Json::array();
        auto merge = [&](const Json& m) {
            if (m.contains("additionalProperties")) fail("'additionalProperties' inside 'allOf' is not supported");
            if (m.contains("properties")) {
                for (const auto& [name, sub] : m["properties"].items()) {
                    if (merged.contains(name)) fail(fmt::format("property '{}' is declared twice in 'allOf'", name));
                    merged[name] = sub;
                }
            }
            if (m.contains("required")) {
                for (const Json& r : m["required"]) merged_required.push_back(r);
            }
        };
        for (size_t i = 0; i < members.size(); ++i) {
            PathScope scope(*this, "allOf", std::to_string(i));
            const Json* m = &members[i];
            if (m->is_object() && m->contains("$ref")) m = &resolve((*m)["$ref"]);
            if (!m->is_object()) fail("an 'allOf' member must be an object schema");
            check_keywords(*m);
            only_with(*m, "properties", {"type", "required", "additionalProperties"});
            if (m->contains("type") && (*m)["type"] != Json("object")) fail("'allOf' is supported for objects only");
            merge(*m);
        }
        merge(s);
        Json object_schema = {{"type", "object"}, {"properties", merged}, {"required", merged_required}};
        // The properties were merged from elsewhere: their schemas keep the paths they came from.
        return object(object_schema, hint);
    }

    const Json& resolve(const Json& ref) {
        if (!ref.is_string()) fail("'$ref' must be a string");
        const std::string r = ref.get<std::string>();
        if (r.empty() || r[0] != '#')
            fail(fmt::format("$ref '{}': only references inside the schema (#/...) are supported", r));
        const Json* at = &root_;
        size_t pos = 1;
        while (pos < r.size()) {
            if (r[pos] != '/') fail(fmt::format("$ref '{}' is not a JSON pointer", r));
            const size_t end = std::min(r.find('/', pos + 1), r.size());
            std::string segment;
            for (size_t i = pos + 1; i < end; ++i) {
                if (r[i] == '~' && i + 1 < end && (r[i + 1] == '0' || r[i + 1] == '1')) {
                    segment += r[i + 1] == '0' ? '~' : '/';
                    ++i;
                } else if (r[i] == '%' && i + 2 < end) {
                    segment += static_cast<char>(std::stoi(r.substr(i + 1, 2), nullptr, 16));
                    i += 2;
                } else {
                    segment += r[i];
                }
            }
            if (at->is_object() && at->contains(segment)) {
                at = &(*at)[segment];
            } else if (at->is_array() && !segment.empty() &&
                       segment.find_first_not_of("0123456789") == std::string::npos &&
                       std::stoull(segment) < at->size()) {
                at = &(*at)[std::stoull(segment)];
            } else {
                fail(fmt::format("$ref '{}' points to nothing", r));
            }
            pos = end;
        }
        return *at;
    }

    std::string ref_rule(const Json& ref) {
        const Json& target = resolve(ref);
        const std::string r = ref.get<std::string>();
        if (auto it = ref_rules_.find(r); it != ref_rules_.end()) return it->second;
        const std::string name = new_name("ref-" + r.substr(r.find_last_of('/') + 1));
        ref_rules_[r] = name;  // before visiting: the target may refer to itself
        const size_t slot = rules_.size();
        rules_.emplace_back(name, "");
        const std::string saved = path_;
        path_ = r.substr(1);
        std::string body = visit(target, name.substr(prefix_.size()));
        path_ = saved;
        rules_[slot].second = std::move(body);
        return name;
    }

    // const / enum: the values themselves, those of the schema's type if it names one.
    std::string literal_values(const Json& s, std::string_view hint) {
        const char* key = s.contains("const") ? "const" : "enum";
        only_with(s, key, {"type", "const", "enum"});
        std::vector<const Json*> values;
        if (s.contains("const")) values.push_back(&s["const"]);
        if (s.contains("enum")) {
            if (!s["enum"].is_array() || s["enum"].empty()) fail("'enum' must be a non-empty list");
            std::vector<const Json*> enum_values;
            for (const Json& v : s["enum"]) enum_values.push_back(&v);
            if (values.empty()) {
                values = enum_values;
            } else if (std::none_of(enum_values.begin(), enum_values.end(),
                                    [&](const Json* v) { return *v == *values[0]; })) {
                values.clear();
            }
        }
        std::vector<std::string> types;
        if (s.contains("type")) types = types_of(s);
        std::string body;
        for (const Json* v : values) {
            if (!types.empty() &&
                std::none_of(types.begin(), types.end(), [&](const std::string& t) { return has_type(*v, t); })) {
                continue;
            }
            body += (body.empty() ? "" : " | ") + literal(*v);
        }
        if (body.empty()) fail(fmt::format("no value of '{}' fits the schema", key));
        return add_rule(std::string(hint) + "-" + key, body);
    }

    static bool has_type(const Json& v, const std::string& type) {
        if (type == "null") return v.is_null();
        if (type == "boolean") return v.is_boolean();
        if (type == "string") return v.is_string();
        if (type == "array") return v.is_array();
        if (type == "object") return v.is_object();
        if (type == "number") return v.is_number();
        // JSON Schema counts 1.0 as an integer.
        return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    }

    // A grammar for exactly one JSON value, whitespace allowed where JSON allows it.
    std::string literal(const Json& v) {
        if (v.is_string()) return json_string_literal(v.get<std::string>());
        if (v.is_array()) {
            if (v.empty()) return fmt::format("\"[\" {} \"]\"", prim("ws"));
            std::string out = fmt::format("\"[\" {}", prim("ws"));
            for (size_t i = 0; i < v.size(); ++i) {
                out +=
                    fmt::format("{} {} {}", i ? fmt::format(" \",\" {}", prim("ws")) : "", literal(v[i]), prim("ws"));
            }
            return out + " \"]\"";
        }
        if (v.is_object()) {
            if (v.empty()) return fmt::format("\"{{\" {} \"}}\"", prim("ws"));
            std::string out = fmt::format("\"{{\" {}", prim("ws"));
            bool first = true;
            for (const auto& [key, value] : v.items()) {
                out += fmt::format("{} {} {} \":\" {} {} {}", first ? "" : fmt::format(" \",\" {}", prim("ws")),
                                   json_string_literal(key), prim("ws"), prim("ws"), literal(value), prim("ws"));
                first = false;
            }
            return out + " \"}\"";
        }
        return grammar_literal(v.dump());
    }

    const Json& root_;
    std::string root_name_;
    std::string prefix_;
    std::string path_;
    std::vector<std::pair<std::string, std::string>> rules_;
    std::set<std::string> used_names_;
    std::map<std::string, std::string> prims_;
    std::map<std::string, std::string> ref_rules_;
};

}  // namespace

std::string grammar_literal(std::string_view text) {
    std::string out = "\"";
    for (char c : text) {
        const auto b = static_cast<uint8_t>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (b < 0x20 || b == 0x7F) {
            out += fmt::format("\\x{:02X}", b);
        } else {
            out += c;
        }
    }
    return out + "\"";
}

Result<std::string> json_schema_to_grammar(const nlohmann::ordered_json& schema, std::string_view root,
                                           std::string_view prefix) {
    try {
        return SchemaConverter(schema, root, prefix).run();
    } catch (const SchemaFailure& failure) {
        return make_error(ErrorCode::invalid_argument, failure.message);
    } catch (const std::exception& e) {  // nlohmann's type errors on a malformed schema
        return make_error(ErrorCode::invalid_argument, fmt::format("json schema: {}", e.what()));
    }
}

std::string json_object_grammar(std::string_view root, std::string_view prefix) {
    const nlohmann::ordered_json any_object = {{"type", "object"}};
    return SchemaConverter(any_object, root, prefix).run();
}

}  // namespace powerhouse
