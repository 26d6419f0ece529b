// Grammar::parse: GBNF text (powerhouse/grammar.h) -> the compiled rules of
// runtime/grammar_internal.h.
//
// Recursive descent over the text. Newlines are plain whitespace: a rule ends where the next
// "name ::=" begins (or at the end), so rules may span lines and share one. Groups become
// helper rules, and so do repetitions: x* is S ::= x S | (empty), x{m,n} is m copies of x
// then n-m nested optionals (O1 ::= x | (empty), Ok ::= x O(k-1) | (empty)), which keeps the
// grammar linear in n. Failures are thrown inside this file and returned as Error values.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "runtime/grammar_internal.h"

namespace powerhouse {

void CharSet::finish() {
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uint32_t, uint32_t>> merged;
    for (const auto& r : ranges) {
        if (!merged.empty() && r.first <= merged.back().second + 1) {
            merged.back().second = std::max(merged.back().second, r.second);
        } else {
            merged.push_back(r);
        }
    }
    ranges = std::move(merged);
    ascii[0] = ascii[1] = 0;
    for (uint32_t cp = 0; cp < 128; ++cp) {
        if (contains(cp) != negated) ascii[cp >> 6] |= uint64_t{1} << (cp & 63);
    }
}

bool CharSet::contains(uint32_t cp) const {
    // The first range that ends at or after cp.
    auto it = std::lower_bound(ranges.begin(), ranges.end(), cp,
                               [](const std::pair<uint32_t, uint32_t>& r, uint32_t v) { return r.second < v; });
    return it != ranges.end() && it->first <= cp;
}

bool CharSet::intersects(uint32_t lo, uint32_t hi) const {
    auto it = std::lower_bound(ranges.begin(), ranges.end(), lo,
                               [](const std::pair<uint32_t, uint32_t>& r, uint32_t v) { return r.second < v; });
    if (!negated) return it != ranges.end() && it->first <= hi;
    // Merged ranges: [lo, hi] is excluded only when one range covers all of it.
    return !(it != ranges.end() && it->first <= lo && it->second >= hi);
}

namespace {

constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();
constexpr uint32_t kMaxRepeat = 100000;    // a bound of {m,n}: each step is a helper rule
constexpr size_t kMaxElements = 1u << 22;  // the whole compiled grammar

struct ParseFailure {
    size_t position;
    std::string message;
};

struct DraftElement {
    GrammarOp op;
    uint32_t value;
};
using Sequence = std::vector<DraftElement>;

struct DraftRule {
    std::string name;
    std::vector<Sequence> alternatives;
    bool defined = false;
    bool generated = false;  // a group or a repetition's helper
    size_t position = 0;     // where it is defined (while undefined: its first reference)
};

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

class Parser {
public:
    explicit Parser(std::string_view text) : text_(text) {}

    GrammarImpl run(std::string_view root_name) {
        skip_space();
        while (!at_end()) {
            parse_rule();
            skip_space();
        }
        for (const DraftRule& rule : rules_) {
            if (!rule.defined) fail(rule.position, fmt::format("undefined rule '{}'", rule.name));
        }
        auto root = by_name_.find(std::string(root_name));
        if (root == by_name_.end()) fail(0, fmt::format("the grammar has no rule '{}' to start from", root_name));
        check_left_recursion();
        return flatten(root->second);
    }

private:
    [[noreturn]] void fail(size_t at, std::string message) const { throw ParseFailure{at, std::move(message)}; }

    bool at_end() const { return pos_ >= text_.size(); }
    char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

    size_t skip_space_from(size_t p) const {
        while (p < text_.size()) {
            const char c = text_[p];
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                ++p;
            } else if (c == '#') {
                while (p < text_.size() && text_[p] != '\n') ++p;
            } else {
                break;
            }
        }
        return p;
    }
    void skip_space() { pos_ = skip_space_from(pos_); }

    // A rule name followed by "::=" starts at pos_: the current rule ends here.
    bool rule_starts_here() const {
        size_t p = pos_;
        while (p < text_.size() && is_name_char(text_[p])) ++p;
        if (p == pos_) return false;
        p = skip_space_from(p);
        return text_.substr(p, 3) == "::=";
    }

    std::string_view read_name() {
        const size_t start = pos_;
        while (!at_end() && is_name_char(peek())) ++pos_;
        return text_.substr(start, pos_ - start);
    }

    uint32_t rule_id(std::string_view name, size_t at) {
        auto [it, inserted] = by_name_.try_emplace(std::string(name), static_cast<uint32_t>(rules_.size()));
        if (inserted) {
            DraftRule rule;
            rule.name = std::string(name);
            rule.position = at;
            rules_.push_back(std::move(rule));
        }
        return it->second;
    }

    uint32_t new_helper(uint32_t parent, size_t at) {
        DraftRule rule;
        rule.name = fmt::format("{}~{}", rules_[parent].name, ++helper_count_);
        rule.defined = true;
        rule.generated = true;
        rule.position = at;
        rules_.push_back(std::move(rule));
        return static_cast<uint32_t>(rules_.size() - 1);
    }

    void count_elements(size_t n) {
        n_elements_ += n;
        if (n_elements_ > kMaxElements) {
            fail(pos_, fmt::format("the grammar is too large (more than {} elements once repetitions are expanded)",
                                   kMaxElements));
        }
    }

    void parse_rule() {
        const size_t name_pos = pos_;
        const std::string_view name = read_name();
        if (name.empty()) fail(pos_, fmt::format("expected a rule name, found {}", describe_here()));
        skip_space();
        if (text_.substr(pos_, 3) != "::=") {
            fail(pos_, fmt::format("expected '::=' after the rule name '{}', found {}", name, describe_here()));
        }
        pos_ += 3;
        const uint32_t id = rule_id(name, name_pos);
        if (rules_[id].defined) {
            fail(name_pos, fmt::format("rule '{}' is defined twice (first at {})", name, where(rules_[id].position)));
        }
        rules_[id].defined = true;
        rules_[id].position = name_pos;
        std::vector<Sequence> alternatives = parse_alternatives(id, false, name_pos);
        if (peek() == ')') fail(pos_, "')' without a matching '('");
        rules_[id].alternatives = std::move(alternatives);
    }

    std::vector<Sequence> parse_alternatives(uint32_t rule, bool nested, size_t open_pos) {
        std::vector<Sequence> alternatives;
        alternatives.push_back(parse_sequence(rule, nested, open_pos));
        while (peek() == '|') {
            ++pos_;
            alternatives.push_back(parse_sequence(rule, nested, open_pos));
        }
        return alternatives;
    }

    Sequence parse_sequence(uint32_t rule, bool nested, size_t open_pos) {
        Sequence seq;
        for (;;) {
            skip_space();
            if (at_end()) {
                if (nested) fail(open_pos, "'(' is never closed");
                return seq;
            }
            const char c = peek();
            if (c == '|' || c == ')') return seq;
            if (is_name_char(c) && rule_starts_here()) {
                if (nested) fail(open_pos, "'(' is never closed");
                return seq;
            }
            const size_t item_pos = pos_;
            const size_t item_start = seq.size();
            if (c == '"') {
                parse_literal(seq);
            } else if (c == '[') {
                seq.push_back({GrammarOp::chars, parse_class()});
            } else if (c == '.') {
                ++pos_;
                seq.push_back({GrammarOp::chars, any_char_set()});
            } else if (c == '(') {
                ++pos_;
                const uint32_t group = new_helper(rule, item_pos);
                std::vector<Sequence> alternatives = parse_alternatives(group, true, item_pos);
                if (peek() != ')') fail(item_pos, "'(' is never closed");
                ++pos_;
                rules_[group].alternatives = std::move(alternatives);
                seq.push_back({GrammarOp::rule, group});
            } else if (is_name_char(c)) {
                const std::string_view name = read_name();
                seq.push_back({GrammarOp::rule, rule_id(name, item_pos)});
            } else if (c == '*' || c == '+' || c == '?' || c == '{') {
                fail(pos_, fmt::format("'{}' has nothing to repeat", c));
            } else {
                fail(pos_, fmt::format("unexpected {}", describe_here()));
            }
            count_elements(seq.size() - item_start);
            parse_postfix(rule, seq, item_start);
        }
    }

    // Any run of * + ? {m} {m,} {m,n} after an item, applied in order.
    void parse_postfix(uint32_t rule, Sequence& seq, size_t item_start) {
        for (;;) {
            skip_space();
            const size_t op_pos = pos_;
            const char c = peek();
            uint32_t min = 0;
            uint32_t max = kUnbounded;
            if (c == '*') {
                ++pos_;
            } else if (c == '+') {
                ++pos_;
                min = 1;
            } else if (c == '?') {
                ++pos_;
                max = 1;
            } else if (c == '{') {
                ++pos_;
                parse_braces(op_pos, min, max);
            } else {
                return;
            }
            repeat(rule, seq, item_start, min, max, op_pos);
        }
    }

    uint32_t read_count(size_t op_pos) {
        skip_space();
        if (!(peek() >= '0' && peek() <= '9')) fail(pos_, fmt::format("expected a number, found {}", describe_here()));
        uint64_t n = 0;
        while (peek() >= '0' && peek() <= '9') {
            n = n * 10 + static_cast<uint64_t>(peek() - '0');
            if (n > kMaxRepeat) fail(op_pos, fmt::format("repetition count above the limit of {}", kMaxRepeat));
            ++pos_;
        }
        return static_cast<uint32_t>(n);
    }

    void parse_braces(size_t op_pos, uint32_t& min, uint32_t& max) {
        min = read_count(op_pos);
        skip_space();
        if (peek() == '}') {
            max = min;
        } else if (peek() == ',') {
            ++pos_;
            skip_space();
            max = peek() == '}' ? kUnbounded : read_count(op_pos);
            skip_space();
        }
        if (peek() != '}') fail(pos_, fmt::format("expected '}}' to close the repetition, found {}", describe_here()));
        ++pos_;
        if (max < min) fail(op_pos, fmt::format("repetition {{{},{}}}: the maximum is below the minimum", min, max));
    }

    // Replaces seq[item_start, end) with min..max copies of itself.
    void repeat(uint32_t rule, Sequence& seq, size_t item_start, uint32_t min, uint32_t max, size_t at) {
        if (seq.size() == item_start) return;  // "" repeated: still nothing
        DraftElement item = seq[item_start];
        if (seq.size() - item_start > 1) {  // a multi-character literal: make it one element
            const uint32_t wrapped = new_helper(rule, at);
            rules_[wrapped].alternatives.push_back(
                Sequence(seq.begin() + static_cast<ptrdiff_t>(item_start), seq.end()));
            item = {GrammarOp::rule, wrapped};
        }
        seq.resize(item_start);
        count_elements(min + 4);
        seq.insert(seq.end(), min, item);
        if (max == kUnbounded) {
            const uint32_t star = new_helper(rule, at);
            rules_[star].alternatives = {Sequence{item, {GrammarOp::rule, star}}, Sequence{}};
            seq.push_back({GrammarOp::rule, star});
            return;
        }
        uint32_t inner = 0;
        for (uint32_t k = 1; k <= max - min; ++k) {
            const uint32_t optional = new_helper(rule, at);
            Sequence first{item};
            if (k > 1) first.push_back({GrammarOp::rule, inner});
            rules_[optional].alternatives = {std::move(first), Sequence{}};
            inner = optional;
            count_elements(4);
        }
        if (max > min) seq.push_back({GrammarOp::rule, inner});
    }

    // One code point of the grammar's text at pos_ (the text is UTF-8).
    uint32_t read_code_point() {
        const auto lead = static_cast<uint8_t>(peek());
        const int length = utf8_sequence_length(lead);
        if (length == 0 || pos_ + static_cast<size_t>(length) > text_.size())
            fail(pos_, "invalid UTF-8 in the grammar");
        uint32_t lo = 0;
        uint32_t hi = 0;
        if (!utf8_prefix_interval(reinterpret_cast<const uint8_t*>(text_.data() + pos_), length, length, lo, hi)) {
            fail(pos_, "invalid UTF-8 in the grammar");
        }
        pos_ += static_cast<size_t>(length);
        return lo;
    }

    uint32_t read_hex(size_t digits, size_t escape_pos) {
        uint32_t value = 0;
        for (size_t i = 0; i < digits; ++i) {
            const int h = hex_digit(peek());
            if (h < 0) fail(escape_pos, fmt::format("escape needs {} hex digits", digits));
            value = value * 16 + static_cast<uint32_t>(h);
            ++pos_;
        }
        if (value > 0x10FFFF) fail(escape_pos, "escape above U+10FFFF");
        return value;
    }

    // A character inside a literal or a class: an escape or one code point.
    uint32_t read_char() {
        if (peek() != '\\') return read_code_point();
        const size_t escape_pos = pos_;
        ++pos_;
        if (at_end()) fail(escape_pos, "'\\' at the end of the grammar");
        const char c = peek();
        ++pos_;
        switch (c) {
            case 'n':
                return '\n';
            case 'r':
                return '\r';
            case 't':
                return '\t';
            case 'f':
                return '\f';
            case 'b':
                return '\b';
            case '0':
                return 0;
            case 'x':
                return read_hex(2, escape_pos);
            case 'u':
                return read_hex(4, escape_pos);
            case 'U':
                return read_hex(8, escape_pos);
            case '\\':
            case '"':
            case '\'':
            case '[':
            case ']':
            case '-':
            case '^':
            case '/':
            case '.':
                return static_cast<uint8_t>(c);
            default:
                fail(escape_pos, fmt::format("unknown escape '\\{}'", c));
        }
    }

    uint32_t single_char_set(uint32_t cp) {
        auto [it, inserted] = single_sets_.try_emplace(cp, static_cast<uint32_t>(sets_.size()));
        if (inserted) {
            CharSet set;
            set.ranges.push_back({cp, cp});
            set.finish();
            sets_.push_back(std::move(set));
        }
        return it->second;
    }

    uint32_t any_char_set() {
        if (any_set_ == kUnbounded) {
            CharSet set;
            set.ranges.push_back({0, 0x10FFFF});
            set.finish();
            any_set_ = static_cast<uint32_t>(sets_.size());
            sets_.push_back(std::move(set));
        }
        return any_set_;
    }

    void parse_literal(Sequence& seq) {
        const size_t open = pos_;
        ++pos_;
        for (;;) {
            if (at_end()) fail(open, "'\"' is never closed");
            if (peek() == '"') break;
            seq.push_back({GrammarOp::chars, single_char_set(read_char())});
        }
        ++pos_;
    }

    uint32_t parse_class() {
        const size_t open = pos_;
        ++pos_;
        CharSet set;
        if (peek() == '^') {
            set.negated = true;
            ++pos_;
        }
        for (;;) {
            if (at_end()) fail(open, "'[' is never closed");
            if (peek() == ']') break;
            const size_t char_pos = pos_;
            const uint32_t lo = read_char();
            uint32_t hi = lo;
            if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
                ++pos_;
                hi = read_char();
                if (hi < lo) fail(char_pos, fmt::format("range U+{:04X}-U+{:04X} is backwards", lo, hi));
            }
            set.ranges.push_back({lo, hi});
        }
        ++pos_;
        if (set.ranges.empty()) fail(open, "empty character class");
        set.finish();
        sets_.push_back(std::move(set));
        return static_cast<uint32_t>(sets_.size() - 1);
    }

    // A rule that can reach itself before consuming a character would make the matcher
    // expand forever: find such a cycle through the rules that may match empty text.
    void check_left_recursion() const {
        std::vector<uint8_t> nullable(rules_.size(), 0);
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t r = 0; r < rules_.size(); ++r) {
                if (nullable[r]) continue;
                for (const Sequence& alt : rules_[r].alternatives) {
                    const bool all = std::all_of(alt.begin(), alt.end(), [&](const DraftElement& e) {
                        return e.op == GrammarOp::rule && nullable[e.value];
                    });
                    if (all) {
                        nullable[r] = 1;
                        changed = true;
                        break;
                    }
                }
            }
        }
        // The rules each rule may begin with.
        std::vector<std::vector<uint32_t>> starts(rules_.size());
        for (size_t r = 0; r < rules_.size(); ++r) {
            for (const Sequence& alt : rules_[r].alternatives) {
                for (const DraftElement& e : alt) {
                    if (e.op != GrammarOp::rule) break;
                    starts[r].push_back(e.value);
                    if (!nullable[e.value]) break;
                }
            }
        }
        // Iterative depth-first search: 0 unvisited, 1 on the path, 2 done.
        std::vector<uint8_t> state(rules_.size(), 0);
        std::vector<std::pair<uint32_t, size_t>> path;
        for (uint32_t start = 0; start < rules_.size(); ++start) {
            if (state[start]) continue;
            path.push_back({start, 0});
            state[start] = 1;
            while (!path.empty()) {
                auto& [rule, next] = path.back();
                if (next == starts[rule].size()) {
                    state[rule] = 2;
                    path.pop_back();
                    continue;
                }
                const uint32_t to = starts[rule][next++];
                if (state[to] == 1) report_cycle(path, to);
                if (state[to] == 0) {
                    state[to] = 1;
                    path.push_back({to, 0});
                }
            }
        }
    }

    [[noreturn]] void report_cycle(const std::vector<std::pair<uint32_t, size_t>>& path, uint32_t to) const {
        size_t first = 0;
        while (path[first].first != to) ++first;
        std::string cycle;
        const DraftRule* named = nullptr;
        for (size_t i = first; i < path.size(); ++i) {
            const DraftRule& rule = rules_[path[i].first];
            if (!rule.generated) {
                cycle += rule.name + " -> ";
                if (!named) named = &rule;
            }
        }
        if (!named) {  // only helpers: a repetition of something that may match nothing
            fail(rules_[to].position, "this repeats something that can match empty text (left recursion)");
        }
        cycle += named->name;
        fail(named->position, fmt::format("left recursion: {} can refer back to itself before matching any "
                                          "character ({})",
                                          named->name, cycle));
    }

    GrammarImpl flatten(uint32_t root) {
        GrammarImpl g;
        g.root = root;
        g.char_sets = std::move(sets_);
        g.rules.resize(rules_.size());
        g.rule_names.reserve(rules_.size());
        for (size_t r = 0; r < rules_.size(); ++r) {
            g.rule_names.push_back(rules_[r].name);
            for (const Sequence& alt : rules_[r].alternatives) {
                g.rules[r].push_back(static_cast<uint32_t>(g.elements.size()));
                for (const DraftElement& e : alt) g.elements.push_back({e.op, e.value});
                g.elements.push_back({GrammarOp::end, 0});
            }
        }
        return g;
    }

    std::string describe_here() const {
        if (at_end()) return "the end of the grammar";
        const char c = peek();
        if (c == '\n') return "a line break";
        return fmt::format("'{}'", c);
    }

public:
    // "LINE:COLUMN" of a byte offset, both from 1; the column counts characters.
    std::string where(size_t at) const {
        at = std::min(at, text_.size());
        size_t line = 1;
        size_t line_start = 0;
        for (size_t i = 0; i < at; ++i) {
            if (text_[i] == '\n') {
                ++line;
                line_start = i + 1;
            }
        }
        size_t column = 1;
        for (size_t i = line_start; i < at; ++i) {
            if ((static_cast<uint8_t>(text_[i]) & 0xC0) != 0x80) ++column;
        }
        return fmt::format("{}:{}", line, column);
    }

private:
    std::string_view text_;
    size_t pos_ = 0;
    std::vector<DraftRule> rules_;
    std::unordered_map<std::string, uint32_t> by_name_;
    std::vector<CharSet> sets_;
    std::map<uint32_t, uint32_t> single_sets_;  // code point -> its one-character set
    uint32_t any_set_ = kUnbounded;
    uint32_t helper_count_ = 0;
    size_t n_elements_ = 0;
};

}  // namespace

Result<Grammar> Grammar::parse(std::string_view text, std::string_view root) {
    Parser parser(text);
    try {
        auto impl = std::make_shared<GrammarImpl>(parser.run(root));
        return Grammar(std::move(impl));
    } catch (const ParseFailure& failure) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("{}: {}", parser.where(failure.position), failure.message));
    }
}

}  // namespace powerhouse
