#include "tokenizer/bpe.h"

#include <fmt/format.h>

#include <limits>
#include <string>
#include <unordered_map>

#include "tokenizer/byte_level.h"

namespace powerhouse {
namespace {

constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";

// Symbol texts: the vocabulary's token ids, then ids for strings that only merges mention.
class Interner {
public:
    explicit Interner(const Vocab& vocab) : vocab_(vocab) {}
    uint32_t intern(std::string_view text) {
        if (const auto id = vocab_.find(text)) return static_cast<uint32_t>(*id);
        const auto it = extra_.find(std::string(text));
        if (it != extra_.end()) return it->second;
        const auto id = static_cast<uint32_t>(vocab_.n_tokens) + static_cast<uint32_t>(extra_.size());
        extra_.emplace(std::string(text), id);
        return id;
    }

private:
    const Vocab& vocab_;
    std::unordered_map<std::string, uint32_t> extra_;
};

// Lowest rank first, then leftmost.
MergeCandidate candidate(uint32_t rank, uint32_t left, uint32_t right, uint32_t size) {
    return {(uint64_t{rank} << 32) | left, right, size};
}

}  // namespace

Result<BpeModel> BpeModel::build(const Vocab& vocab, const GgufMetadata& metadata) {
    const GgufArray* merges = metadata.get_array(kMergesKey);
    if (merges == nullptr || merges->element_type != GgufValueType::string) {
        return make_error(ErrorCode::format,
                          fmt::format("{} {}: a byte-level BPE vocabulary needs its merge list", kMergesKey,
                                      metadata.contains(kMergesKey) ? "is not an array of strings" : "is missing"));
    }
    if (merges->strings.size() >= std::numeric_limits<uint32_t>::max()) {
        return make_error(ErrorCode::format, fmt::format("{} has too many entries", kMergesKey));
    }
    BpeModel model;
    model.n_vocab_ = static_cast<uint32_t>(vocab.n_tokens);
    Interner interner(vocab);
    for (int b = 0; b < 256; ++b) {
        model.byte_symbol_[static_cast<size_t>(b)] = interner.intern(gpt2_byte_text(static_cast<uint8_t>(b)));
    }
    model.merges_.reserve(merges->strings.size());
    std::string joined;
    for (size_t rank = 0; rank < merges->strings.size(); ++rank) {
        const std::string_view merge = merges->strings[rank];
        // The separator is the first space after the first character: "Ġ Ġ" splits at 2.
        const size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string_view::npos;
        if (space == std::string_view::npos) continue;
        const std::string_view left = merge.substr(0, space);
        const std::string_view right = merge.substr(space + 1);
        if (right.empty()) continue;
        joined.assign(left);
        joined += right;
        const uint32_t left_id = interner.intern(left);
        const uint32_t right_id = interner.intern(right);
        const uint32_t result = interner.intern(joined);
        // A repeated pair keeps its first (best) rank.
        model.merges_.insert(left_id, right_id, PairTable::Value{static_cast<uint32_t>(rank), result});
    }
    return model;
}

void BpeModel::encode_word(const Vocab& vocab, std::string_view word, std::vector<TokenId>& out,
                           BpeScratch& scratch) const {
    if (word.empty()) return;
    const auto* bytes = reinterpret_cast<const uint8_t*>(word.data());
    if (word.size() == 1) {
        const BpeScratch::Symbol single{byte_symbol_[bytes[0]], 0, 1, -1, -1};
        emit_symbol(vocab, word, single, out, scratch);
        return;
    }
    if (vocab.pre.ignore_merges) {  // Llama 3: a word that is a token is taken whole
        scratch.spelled.clear();
        for (uint8_t b : std::string_view(word)) scratch.spelled += gpt2_byte_text(b);
        if (const auto id = vocab.find_mergeable(scratch.spelled)) {
            out.push_back(*id);
            return;
        }
    }

    auto& symbols = scratch.symbols;
    auto& queue = scratch.queue;
    const size_t n = word.size();
    symbols.resize(n);
    for (size_t i = 0; i < n; ++i) {
        symbols[i] = {byte_symbol_[bytes[i]], static_cast<uint32_t>(i), 1, static_cast<int32_t>(i) - 1,
                      i + 1 < n ? static_cast<int32_t>(i + 1) : -1};
    }
    queue.clear();
    for (size_t i = 0; i + 1 < n; ++i) {
        if (const PairTable::Value* merge = merges_.find(symbols[i].id, symbols[i + 1].id)) {
            queue.append(candidate(merge->rank, static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1), 2));
        }
    }
    queue.start();
    const auto propose = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const auto& l = symbols[static_cast<size_t>(left)];
        const auto& r = symbols[static_cast<size_t>(right)];
        if (const PairTable::Value* merge = merges_.find(l.id, r.id)) {
            queue.push(
                candidate(merge->rank, static_cast<uint32_t>(left), static_cast<uint32_t>(right), l.len + r.len));
        }
    };

    while (!queue.empty()) {
        const MergeCandidate c = queue.pop();
        auto& left = symbols[c.left()];
        if (left.len == 0 || left.next != static_cast<int32_t>(c.right)) continue;
        auto& right = symbols[c.right];
        if (left.len + right.len != c.size) continue;  // a neighbour changed since it was proposed
        left.id = merges_.find(left.id, right.id)->result;
        left.len += right.len;
        right.len = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = static_cast<int32_t>(c.left());
        propose(left.prev, static_cast<int32_t>(c.left()));
        propose(static_cast<int32_t>(c.left()), left.next);
    }
    for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
        emit_symbol(vocab, word, symbols[static_cast<size_t>(i)], out, scratch);
    }
}

void BpeModel::emit_symbol(const Vocab& vocab, std::string_view word, const BpeScratch::Symbol& symbol,
                           std::vector<TokenId>& out, BpeScratch& scratch) const {
    if (symbol.id < n_vocab_ &&
        !vocab.has_attr(static_cast<TokenId>(symbol.id), token_attr::control | token_attr::unknown)) {
        out.push_back(static_cast<TokenId>(symbol.id));
        return;
    }
    // Not a token (a merge whose result the vocabulary lacks): the reference looks up each
    // byte of the symbol's GPT-2 spelling as a one-byte token and drops those it cannot find.
    scratch.spelled.clear();
    for (uint8_t b : word.substr(symbol.start, symbol.len)) scratch.spelled += gpt2_byte_text(b);
    for (char c : scratch.spelled) {
        if (const auto id = vocab.find_mergeable(std::string_view(&c, 1))) out.push_back(*id);
    }
}

}  // namespace powerhouse
