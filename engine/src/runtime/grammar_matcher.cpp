// GrammarVocabulary and GrammarMatcher (powerhouse/grammar.h).
//
// The matcher follows the text with a set of parse stacks, as llama.cpp's grammar engine
// does: each stack lists what is left to match, innermost first, and its top is always a
// character class (references at the top are expanded at once) or it is empty, which means the
// text so far is a whole sentence. A character advances every stack whose top accepts it.
//
// Two layers of sharing keep this cheap enough to run over a whole vocabulary per token:
//  - Stacks are persistent linked lists in an arena, hash-consed: a stack is a node id,
//    (position, rest of the stack) pairs are interned, so equal stacks are equal ids, sets
//    dedupe by sorting ids, and the successors of a stack once its top matches are computed
//    once and cached on its node.
//  - A configuration (a sorted set of stacks, plus the bytes of a character not finished yet)
//    is interned too, and each configuration caches its transition per byte. The matcher is
//    then a lazily built automaton over bytes: mask() walks the vocabulary's trie with one
//    table lookup per trie node once the tables are warm.
// The caches only grow while a generation runs, so past a size they are rebuilt around the
// current configuration. Hard caps on stacks per configuration and on cache sizes within one
// step turn a grammar whose stack sets explode into masked tokens, never into unbounded memory.
//
// Partial UTF-8: a token may end inside a character. A configuration keeps those bytes; the
// code points they can still become form one interval (UTF-8 keeps code point order), and the
// bytes are viable when some stack top intersects it.
#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "runtime/grammar_internal.h"

namespace powerhouse {

bool utf8_prefix_interval(const uint8_t* bytes, int n, int length, uint32_t& lo, uint32_t& hi) {
    if (length < 1 || length > 4 || n < 1 || n > length) return false;
    if (utf8_sequence_length(bytes[0]) != length) return false;
    static constexpr uint32_t kLeadMask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    static constexpr uint32_t kMax[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    uint32_t l = bytes[0] & kLeadMask[length];
    uint32_t h = l;
    for (int i = 1; i < length; ++i) {
        if (i < n) {
            if ((bytes[i] & 0xC0) != 0x80) return false;
            l = (l << 6) | (bytes[i] & 0x3Fu);
            h = (h << 6) | (bytes[i] & 0x3Fu);
        } else {
            l <<= 6;
            h = (h << 6) | 0x3Fu;
        }
    }
    l = std::max(l, kMin[length]);  // overlong forms
    h = std::min(h, kMax[length]);  // above U+10FFFF
    if (l > h) return false;
    if (l >= 0xD800 && h <= 0xDFFF) return false;  // surrogates only
    if (l >= 0xD800 && l <= 0xDFFF) l = 0xE000;
    if (h >= 0xD800 && h <= 0xDFFF) h = 0xD7FF;
    lo = l;
    hi = h;
    return true;
}

namespace {

constexpr uint32_t kEmptyStack = 0;  // node 0: the empty stack (the grammar is complete)
constexpr uint32_t kNotComputed = std::numeric_limits<uint32_t>::max();
constexpr uint32_t kOverflow = kNotComputed - 1;
constexpr int32_t kUnknown = -2;  // transition not computed yet
constexpr int32_t kDead = -1;

constexpr size_t kMaxStacks = 2048;         // stacks in one configuration
constexpr size_t kMaxExpansion = 1u << 16;  // stacks visited while expanding one step
constexpr size_t kCompactNodes = 1u << 18;  // past these the caches are rebuilt between steps
constexpr size_t kCompactConfigs = 1u << 12;
constexpr size_t kMaxNodes = 1u << 22;  // within one step, past these a transition counts as dead
constexpr size_t kMaxConfigs = 1u << 16;

}  // namespace

// Named rather than anonymous: GrammarMachine's fields have these types, and GrammarMachine
// is not in the anonymous namespace (GrammarMatcher::State holds one).
namespace grammar_machine {

struct StackNode {
    uint32_t pos = 0;     // index of the top element in GrammarImpl::elements
    uint32_t parent = 0;  // the rest of the stack
    uint32_t succ_begin = 0;
    uint32_t succ_count = kNotComputed;  // successors once the top matched; kOverflow: too many
};

struct Config {
    uint32_t stacks_begin = 0;
    uint32_t stacks_count = 0;
    int32_t table = -1;  // transitions_[table * 256 + byte]; -1 until the first lookup
    uint8_t pending[3] = {0, 0, 0};
    uint8_t n_pending = 0;  // bytes of a character not finished yet
    uint8_t length = 0;     // that character's length
    bool can_end = false;
    bool must_end = false;
};

}  // namespace grammar_machine

using grammar_machine::Config;
using grammar_machine::StackNode;

// The automaton of one matcher: stacks, configurations and their transitions.
class GrammarMachine {
public:
    explicit GrammarMachine(const GrammarImpl& grammar) : g_(grammar) { reset_caches(); }

    uint32_t initial() {
        std::vector<uint32_t> bases;
        for (uint32_t start : g_.rules[g_.root]) {
            bases.push_back(g_.elements[start].op == GrammarOp::end ? kEmptyStack : intern(start, kEmptyStack));
        }
        std::vector<uint32_t> stacks;
        if (!expand(bases, stacks) || stacks.size() > kMaxStacks) stacks.clear();
        std::sort(stacks.begin(), stacks.end());
        const int32_t id = make_config(stacks, nullptr, 0, 0);
        return id < 0 ? dead_config() : static_cast<uint32_t>(id);
    }

    const Config& config(uint32_t id) const { return configs_[id]; }

    int32_t next(uint32_t config, uint8_t byte) {
        const int32_t table = configs_[config].table;
        if (table >= 0) {
            const int32_t t = transitions_[static_cast<size_t>(table) * 256 + byte];
            if (t != kUnknown) return t;
        }
        return next_slow(config, byte);
    }

    // Rebuilds the caches around `keep` once they have grown past their limits; returns the
    // id `keep` has afterwards.
    uint32_t compact_if_needed(uint32_t keep) {
        if (nodes_.size() <= kCompactNodes && configs_.size() <= kCompactConfigs) return keep;
        const Config old = configs_[keep];
        const std::vector<StackNode> old_nodes = std::move(nodes_);
        std::vector<uint32_t> old_stacks(config_stacks_.begin() + old.stacks_begin,
                                         config_stacks_.begin() + old.stacks_begin + old.stacks_count);
        reset_caches();
        std::vector<uint32_t> stacks;
        std::vector<uint32_t> chain;
        for (uint32_t s : old_stacks) {
            chain.clear();
            for (uint32_t n = s; n != kEmptyStack; n = old_nodes[n].parent) chain.push_back(old_nodes[n].pos);
            uint32_t copy = kEmptyStack;
            for (auto it = chain.rbegin(); it != chain.rend(); ++it) copy = intern(*it, copy);
            stacks.push_back(copy);
        }
        std::sort(stacks.begin(), stacks.end());
        const int32_t id = make_config(stacks, old.pending, old.n_pending, old.length);
        return id < 0 ? dead_config() : static_cast<uint32_t>(id);
    }

private:
    void reset_caches() {
        nodes_.assign(1, StackNode{std::numeric_limits<uint32_t>::max(), kEmptyStack, 0, 0});
        node_index_.clear();
        successors_.clear();
        visited_.clear();
        epoch_ = 0;
        configs_.clear();
        config_stacks_.clear();
        config_index_.clear();
        transitions_.clear();
    }

    // A configuration with no stacks: every transition from it is dead.
    uint32_t dead_config() {
        std::vector<uint32_t> none;
        const int32_t id = make_config(none, nullptr, 0, 0);
        return static_cast<uint32_t>(std::max(id, 0));
    }

    uint32_t intern(uint32_t pos, uint32_t parent) {
        const uint64_t key = (uint64_t{pos} << 32) | parent;
        auto [it, inserted] = node_index_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
        if (inserted) nodes_.push_back(StackNode{pos, parent, 0, kNotComputed});
        return it->second;
    }

    // Expands rule references at the tops of `bases` until every stack has a character class
    // on top (or is empty); appends the distinct results to `out`. False when the expansion is
    // too large.
    bool expand(const std::vector<uint32_t>& bases, std::vector<uint32_t>& out) {
        if (++epoch_ == 0) {
            std::fill(visited_.begin(), visited_.end(), 0);
            epoch_ = 1;
        }
        work_.assign(bases.begin(), bases.end());
        size_t visits = 0;
        while (!work_.empty()) {
            const uint32_t s = work_.back();
            work_.pop_back();
            if (s >= visited_.size()) visited_.resize(std::max<size_t>(nodes_.size(), s + 1) * 2, 0);
            if (visited_[s] == epoch_) continue;
            visited_[s] = epoch_;
            if (++visits > kMaxExpansion || nodes_.size() > kMaxNodes) return false;
            if (s == kEmptyStack) {
                out.push_back(s);
                continue;
            }
            const StackNode node = nodes_[s];
            const GrammarElement element = g_.elements[node.pos];
            if (element.op == GrammarOp::chars) {
                out.push_back(s);
                continue;
            }
            // A reference: what follows it in this alternative goes under each alternative of
            // the referenced rule (nothing, when the reference ends its alternative).
            const uint32_t rest =
                g_.elements[node.pos + 1].op == GrammarOp::end ? node.parent : intern(node.pos + 1, node.parent);
            for (uint32_t start : g_.rules[element.value]) {
                work_.push_back(g_.elements[start].op == GrammarOp::end ? rest : intern(start, rest));
            }
        }
        return true;
    }

    // The stacks after the character class on top of `s` matched, cached on the node.
    bool successors(uint32_t s, std::vector<uint32_t>& out) {
        if (nodes_[s].succ_count == kNotComputed) {
            const StackNode node = nodes_[s];
            const uint32_t base =
                g_.elements[node.pos + 1].op == GrammarOp::end ? node.parent : intern(node.pos + 1, node.parent);
            expanded_.clear();
            const bool ok = expand({base}, expanded_);
            nodes_[s].succ_begin = static_cast<uint32_t>(successors_.size());
            nodes_[s].succ_count = ok ? static_cast<uint32_t>(expanded_.size()) : kOverflow;
            if (ok) successors_.insert(successors_.end(), expanded_.begin(), expanded_.end());
        }
        const StackNode& node = nodes_[s];
        if (node.succ_count == kOverflow) return false;
        out.insert(out.end(), successors_.begin() + node.succ_begin,
                   successors_.begin() + node.succ_begin + node.succ_count);
        return true;
    }

    const CharSet& top_set(uint32_t s) const { return g_.char_sets[g_.elements[nodes_[s].pos].value]; }

    bool any_top_intersects(const Config& c, uint32_t lo, uint32_t hi) const {
        for (uint32_t i = 0; i < c.stacks_count; ++i) {
            const uint32_t s = config_stacks_[c.stacks_begin + i];
            if (s != kEmptyStack && top_set(s).intersects(lo, hi)) return true;
        }
        return false;
    }

    // Every stack of `c` whose top accepts `cp`, advanced.
    int32_t step(const Config& c, uint32_t cp) {
        std::vector<uint32_t> stacks;
        for (uint32_t i = 0; i < c.stacks_count; ++i) {
            const uint32_t s = config_stacks_[c.stacks_begin + i];
            if (s == kEmptyStack || !top_set(s).matches(cp)) continue;
            if (!successors(s, stacks)) return kDead;
        }
        std::sort(stacks.begin(), stacks.end());
        stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
        if (stacks.empty() || stacks.size() > kMaxStacks) return kDead;
        return make_config(stacks, nullptr, 0, 0);
    }

    int32_t compute(uint32_t config, uint8_t byte) {
        const Config c = configs_[config];  // a copy: configs_ may grow below
        uint8_t bytes[4];
        std::memcpy(bytes, c.pending, c.n_pending);
        bytes[c.n_pending] = byte;
        const int n = c.n_pending + 1;
        const int length = c.n_pending == 0 ? utf8_sequence_length(byte) : c.length;
        uint32_t lo = 0;
        uint32_t hi = 0;
        if (!utf8_prefix_interval(bytes, n, length, lo, hi)) return kDead;
        if (n == length) return step(c, lo);
        if (!any_top_intersects(c, lo, hi)) return kDead;
        std::vector<uint32_t> stacks(config_stacks_.begin() + c.stacks_begin,
                                     config_stacks_.begin() + c.stacks_begin + c.stacks_count);
        return make_config(stacks, bytes, static_cast<uint8_t>(n), static_cast<uint8_t>(length));
    }

    int32_t next_slow(uint32_t config, uint8_t byte) {
        const int32_t t = compute(config, byte);
        if (configs_[config].table < 0) {
            configs_[config].table = static_cast<int32_t>(transitions_.size() / 256);
            transitions_.resize(transitions_.size() + 256, kUnknown);
        }
        transitions_[static_cast<size_t>(configs_[config].table) * 256 + byte] = t;
        return t;
    }

    // Interns (sorted, distinct) stacks with pending bytes.
    int32_t make_config(const std::vector<uint32_t>& stacks, const uint8_t* pending, uint8_t n_pending,
                        uint8_t length) {
        std::string key(4 + stacks.size() * sizeof(uint32_t), '\0');
        key[0] = static_cast<char>(n_pending);
        for (uint8_t i = 0; i < n_pending; ++i) key[1 + i] = static_cast<char>(pending[i]);
        if (!stacks.empty()) std::memcpy(key.data() + 4, stacks.data(), stacks.size() * sizeof(uint32_t));
        auto it = config_index_.find(key);
        if (it != config_index_.end()) return static_cast<int32_t>(it->second);
        if (configs_.size() >= kMaxConfigs) return kDead;
        Config c;
        c.stacks_begin = static_cast<uint32_t>(config_stacks_.size());
        c.stacks_count = static_cast<uint32_t>(stacks.size());
        if (n_pending > 0) std::memcpy(c.pending, pending, n_pending);
        c.n_pending = n_pending;
        c.length = length;
        const bool has_empty = !stacks.empty() && stacks.front() == kEmptyStack;
        c.can_end = n_pending == 0 && has_empty;
        c.must_end = c.can_end && stacks.size() == 1;
        config_stacks_.insert(config_stacks_.end(), stacks.begin(), stacks.end());
        const auto id = static_cast<uint32_t>(configs_.size());
        configs_.push_back(c);
        config_index_.emplace(std::move(key), id);
        return static_cast<int32_t>(id);
    }

    const GrammarImpl& g_;
    std::vector<StackNode> nodes_;
    std::unordered_map<uint64_t, uint32_t> node_index_;
    std::vector<uint32_t> successors_;
    std::vector<uint32_t> visited_;  // per node: the epoch of the expansion that last saw it
    uint32_t epoch_ = 0;
    std::vector<uint32_t> work_;
    std::vector<uint32_t> expanded_;
    std::vector<Config> configs_;
    std::vector<uint32_t> config_stacks_;
    std::unordered_map<std::string, uint32_t> config_index_;
    std::vector<int32_t> transitions_;
};

std::shared_ptr<const GrammarVocabulary> GrammarVocabulary::build(const Tokenizer& tokenizer) {
    auto impl = std::make_shared<GrammarVocabularyImpl>();
    const int32_t n = tokenizer.n_vocab();
    impl->n_vocab = n;
    impl->pieces.resize(static_cast<size_t>(n));
    impl->eog.assign(static_cast<size_t>(n), 0);
    std::vector<TokenId> order;
    for (TokenId id = 0; id < n; ++id) {
        if (tokenizer.is_eog(id)) {
            impl->eog[static_cast<size_t>(id)] = 1;
            impl->eog_ids.push_back(id);
            continue;  // an end, never text, whatever it spells
        }
        impl->pieces[static_cast<size_t>(id)] = tokenizer.token_piece(id, false);
        if (!impl->pieces[static_cast<size_t>(id)].empty()) order.push_back(id);
    }
    const auto& pieces = impl->pieces;
    std::stable_sort(order.begin(), order.end(), [&](TokenId a, TokenId b) {
        return pieces[static_cast<size_t>(a)] < pieces[static_cast<size_t>(b)];
    });
    // Sorted pieces give the trie in pre-order: a piece comes before its extensions, and
    // pieces sharing a prefix are adjacent. `open` is the path to the last node made.
    auto& trie = impl->trie;
    std::vector<uint32_t> open;
    std::string_view previous;
    for (TokenId id : order) {
        const std::string_view piece = pieces[static_cast<size_t>(id)];
        size_t common = 0;
        while (common < open.size() && common < piece.size() && previous[common] == piece[common]) ++common;
        while (open.size() > common) {
            trie[open.back()].subtree_end = static_cast<uint32_t>(trie.size());
            open.pop_back();
        }
        for (size_t d = common; d < piece.size(); ++d) {
            GrammarTrieNode node;
            node.depth = static_cast<uint32_t>(d + 1);
            node.byte = static_cast<uint8_t>(piece[d]);
            node.tokens_begin = node.tokens_end = static_cast<uint32_t>(impl->trie_tokens.size());
            open.push_back(static_cast<uint32_t>(trie.size()));
            trie.push_back(node);
        }
        impl->trie_tokens.push_back(id);
        trie[open.back()].tokens_end = static_cast<uint32_t>(impl->trie_tokens.size());
        impl->max_depth = std::max(impl->max_depth, static_cast<uint32_t>(piece.size()));
        previous = piece;
    }
    while (!open.empty()) {
        trie[open.back()].subtree_end = static_cast<uint32_t>(trie.size());
        open.pop_back();
    }
    return std::make_shared<const GrammarVocabulary>(std::move(impl));
}

struct GrammarMatcher::State {
    State(Grammar g, std::shared_ptr<const GrammarVocabulary> v)
        : grammar(std::move(g)), vocabulary(std::move(v)), machine(grammar.impl()) {
        current = machine.initial();
    }

    bool advance(std::string_view bytes) {
        uint32_t at = current;
        for (char c : bytes) {
            const int32_t next = machine.next(at, static_cast<uint8_t>(c));
            if (next < 0) return false;
            at = static_cast<uint32_t>(next);
        }
        current = machine.compact_if_needed(at);
        return true;
    }

    Grammar grammar;
    std::shared_ptr<const GrammarVocabulary> vocabulary;
    GrammarMachine machine;
    uint32_t current = 0;
    bool ended = false;            // an end-of-generation token was accepted
    std::vector<uint8_t> allowed;  // mask() scratch, [n_vocab]
    std::vector<uint32_t> path;    // mask() scratch: the configuration at each trie depth
};

GrammarMatcher::GrammarMatcher(Grammar grammar, std::shared_ptr<const GrammarVocabulary> vocabulary)
    : state_(std::make_unique<State>(std::move(grammar), std::move(vocabulary))) {}
GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

void GrammarMatcher::mask(std::span<float> logits) const {
    State& s = *state_;
    const GrammarVocabularyImpl& v = s.vocabulary->impl();
    const size_t n_vocab = static_cast<size_t>(v.n_vocab);
    s.allowed.assign(n_vocab, 0);
    const Config& now = s.machine.config(s.current);
    const bool may_end = s.ended || now.can_end;
    if (!s.ended && !now.must_end) {
        // Depth-first over the trie: a node's configuration is its parent's advanced by its
        // byte; a dead one prunes the whole subtree.
        s.path.resize(v.max_depth + 1);
        s.path[0] = s.current;
        const GrammarTrieNode* nodes = v.trie.data();
        const size_t n_nodes = v.trie.size();
        for (size_t i = 0; i < n_nodes;) {
            const GrammarTrieNode& node = nodes[i];
            const int32_t next = s.machine.next(s.path[node.depth - 1], node.byte);
            if (next < 0) {
                i = node.subtree_end;
                continue;
            }
            s.path[node.depth] = static_cast<uint32_t>(next);
            for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) {
                s.allowed[static_cast<size_t>(v.trie_tokens[t])] = 1;
            }
            ++i;
        }
    }
    if (may_end) {
        for (TokenId id : v.eog_ids) s.allowed[static_cast<size_t>(id)] = 1;
    }
    constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < logits.size(); ++i) {
        if (i >= n_vocab || !s.allowed[i]) logits[i] = kMinusInf;
    }
}

bool GrammarMatcher::accept(TokenId id) {
    State& s = *state_;
    const GrammarVocabularyImpl& v = s.vocabulary->impl();
    if (id < 0 || id >= v.n_vocab || s.ended) return false;
    if (v.eog[static_cast<size_t>(id)]) {
        if (!can_end()) return false;
        s.ended = true;
        return true;
    }
    const std::string& piece = v.pieces[static_cast<size_t>(id)];
    if (piece.empty()) return false;  // control tokens are never part of the text
    return s.advance(piece);
}

bool GrammarMatcher::accept_text(std::string_view text) {
    if (state_->ended) return text.empty();
    return state_->advance(text);
}

bool GrammarMatcher::can_end() const {
    return state_->ended || state_->machine.config(state_->current).can_end;
}

bool GrammarMatcher::must_end() const {
    return state_->ended || state_->machine.config(state_->current).must_end;
}

}  // namespace powerhouse
