#include "backend/kv_blocks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

namespace powerhouse {

namespace {

uint32_t common_prefix(std::span<const TokenId> a, std::span<const TokenId> b, size_t limit) {
    const size_t n = std::min({a.size(), b.size(), limit});
    size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return static_cast<uint32_t>(i);
}

}  // namespace

KvBlocks::KvBlocks(const KvBlocksOptions& options) : options_(options) {
    options_.block_size = std::max<uint32_t>(1, options_.block_size);
    options_.max_sequences = std::max<uint32_t>(1, options_.max_sequences);
    if (options_.contiguous) {
        options_.max_sequences = 1;
        options_.max_cached = std::min<uint32_t>(options_.max_cached, 1);
    }
    refs_.assign(options_.n_blocks, 0);
    cached_refs_.assign(options_.n_blocks, 0);
    for (uint32_t b = 0; b < options_.n_blocks; ++b) free_.insert(static_cast<int32_t>(b));
}

KvBlocks::Seq& KvBlocks::live(SeqId seq) {
    auto it = live_.find(seq);
    assert(it != live_.end());
    return it->second;
}

const KvBlocks::Seq& KvBlocks::live(SeqId seq) const {
    auto it = live_.find(seq);
    assert(it != live_.end());
    return it->second;
}

Result<SeqId> KvBlocks::open(bool spare) {
    if (live_.size() >= options_.max_sequences + (spare && !options_.contiguous ? 1u : 0u)) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("{} sequences are running, the most this model was loaded for", live_.size()));
    }
    const SeqId id = next_id_++;
    live_.emplace(id, Seq{});
    return id;
}

uint32_t KvBlocks::length(SeqId seq) const { return static_cast<uint32_t>(live(seq).tokens.size()); }

std::span<const TokenId> KvBlocks::tokens(SeqId seq) const { return live(seq).tokens; }

std::span<const int32_t> KvBlocks::table(SeqId seq) const { return live(seq).table; }

int32_t KvBlocks::allocate() {
    while (free_.empty() && !cached_.empty()) evict_oldest();
    if (free_.empty()) return -1;
    const int32_t b = *free_.begin();
    free_.erase(free_.begin());
    refs_[static_cast<size_t>(b)] = 1;
    return b;
}

void KvBlocks::release(int32_t block) {
    uint32_t& r = refs_[static_cast<size_t>(block)];
    assert(r > 0);
    if (--r == 0) free_.insert(block);
}

void KvBlocks::release_all(Seq& s) {
    for (int32_t b : s.table) release(b);
    s.table.clear();
    s.tokens.clear();
}

void KvBlocks::evict_oldest() {
    Seq& s = cached_.back();
    for (int32_t b : s.table) --cached_refs_[static_cast<size_t>(b)];
    release_all(s);
    cached_.pop_back();
}

void KvBlocks::drop_cached() {
    while (!cached_.empty()) evict_oldest();
}

void KvBlocks::close(SeqId seq, bool keep) {
    auto it = live_.find(seq);
    if (it == live_.end()) return;
    Seq s = std::move(it->second);
    live_.erase(it);
    if (!keep || options_.max_cached == 0 || s.tokens.empty()) {
        release_all(s);
        return;
    }
    // Blocks reserved past the end are not part of the prefix.
    const size_t used = (s.tokens.size() + options_.block_size - 1) / options_.block_size;
    for (size_t i = used; i < s.table.size(); ++i) release(s.table[i]);
    s.table.resize(used);
    // A cached prefix of this sequence adds nothing: the same tokens give the same keys.
    for (auto c = cached_.begin(); c != cached_.end();) {
        const bool covered = c->tokens.size() <= s.tokens.size() &&
                             std::equal(c->tokens.begin(), c->tokens.end(), s.tokens.begin());
        if (covered || options_.contiguous) {
            for (int32_t b : c->table) --cached_refs_[static_cast<size_t>(b)];
            release_all(*c);
            c = cached_.erase(c);
        } else {
            ++c;
        }
    }
    for (int32_t b : s.table) ++cached_refs_[static_cast<size_t>(b)];
    cached_.push_front(std::move(s));
    while (cached_.size() > options_.max_cached) evict_oldest();
}

uint32_t KvBlocks::adopt_prefix(SeqId seq, std::span<const TokenId> prompt, uint32_t limit) {
    Seq& s = live(seq);
    if (!s.tokens.empty() || !s.table.empty()) return 0;
    // The longest common beginning, among cached prefixes first (the most recent wins ties),
    // then live sequences (not in contiguous mode: their blocks cannot move).
    uint32_t best = 0;
    auto best_cached = cached_.end();
    const Seq* best_live = nullptr;
    for (auto c = cached_.begin(); c != cached_.end(); ++c) {
        const uint32_t n = common_prefix(c->tokens, prompt, limit);
        if (n > best) best = n, best_cached = c;
    }
    if (!options_.contiguous) {
        for (const auto& [id, other] : live_) {
            if (id == seq) continue;
            const uint32_t n = common_prefix(other.tokens, prompt, limit);
            if (n > best) best = n, best_cached = cached_.end(), best_live = &other;
        }
    }
    if (best == 0) return 0;
    if (options_.contiguous) {
        // Take the cached sequence over: its blocks are already the first of the pool.
        for (int32_t b : best_cached->table) --cached_refs_[static_cast<size_t>(b)];
        s = std::move(*best_cached);
        cached_.erase(best_cached);
        truncate(seq, best);
        return best;
    }
    if (best_cached != cached_.end()) cached_.splice(cached_.begin(), cached_, best_cached);  // used now
    const std::vector<int32_t> source = best_live != nullptr ? best_live->table : cached_.front().table;
    const uint32_t bs = options_.block_size;
    const uint32_t whole = best / bs;
    for (uint32_t i = 0; i < whole; ++i) {
        hold(source[i]);
        s.table.push_back(source[i]);
    }
    uint32_t taken = whole * bs;
    if (best % bs != 0) {
        // The block the prefix ends in is copied, so that both can go on writing.
        const int32_t from = source[whole];
        hold(from);  // kept while the pool may drop cached prefixes to find a block
        const int32_t to = allocate();
        if (to >= 0) {
            copies_.push_back({from, to});
            s.table.push_back(to);
            taken = best;
        }
        release(from);
    }
    s.tokens.assign(prompt.begin(), prompt.begin() + taken);
    return taken;
}

void KvBlocks::truncate(SeqId seq, uint32_t n) {
    Seq& s = live(seq);
    if (n >= s.tokens.size()) return;
    s.tokens.resize(n);
    const size_t keep = (n + options_.block_size - 1) / options_.block_size;
    for (size_t i = keep; i < s.table.size(); ++i) release(s.table[i]);
    s.table.resize(std::min(keep, s.table.size()));
}

uint32_t KvBlocks::blocks_needed(SeqId seq, uint32_t n) const {
    const Seq& s = live(seq);
    if (n == 0) return 0;
    const uint32_t bs = options_.block_size;
    const size_t len = s.tokens.size();
    const size_t end_block = (len + n + bs - 1) / bs;
    uint32_t need = 0;
    for (size_t b = len / bs; b < end_block; ++b) {
        if (b >= s.table.size() || refs_[static_cast<size_t>(s.table[b])] > 1) ++need;
    }
    return need;
}

uint32_t KvBlocks::available_blocks() const {
    uint32_t n = static_cast<uint32_t>(free_.size());
    for (size_t b = 0; b < refs_.size(); ++b) {
        if (refs_[b] > 0 && refs_[b] == cached_refs_[b]) ++n;
    }
    return n;
}

Result<void> KvBlocks::reserve(SeqId seq, uint32_t n) {
    Seq& s = live(seq);
    const size_t len = s.tokens.size();
    if (len + n > options_.max_length) {
        return make_error(ErrorCode::context_full,
                          fmt::format("the context is full: {} tokens held, {} more asked, the context holds {}", len,
                                      n, options_.max_length));
    }
    const uint32_t need = blocks_needed(seq, n);
    if (need > available_blocks()) {
        return make_error(ErrorCode::out_of_memory,
                          fmt::format("the KV cache is full: {} more blocks of {} positions needed, {} free of {}",
                                      need, options_.block_size, available_blocks(), options_.n_blocks));
    }
    if (options_.contiguous && s.table.empty()) drop_cached();  // block i must be block i of the pool
    const uint32_t bs = options_.block_size;
    const size_t end_block = (len + n + bs - 1) / bs;
    for (size_t b = len / bs; b < end_block; ++b) {
        if (b < s.table.size()) {
            const int32_t old = s.table[b];
            if (refs_[static_cast<size_t>(old)] <= 1) continue;
            const int32_t fresh = allocate();
            assert(fresh >= 0);
            if (b * bs < len) copies_.push_back({old, fresh});  // positions below len are kept
            release(old);
            s.table[b] = fresh;
        } else {
            const int32_t fresh = allocate();
            assert(fresh >= 0);
            s.table.push_back(fresh);
        }
    }
    return {};
}

void KvBlocks::append(SeqId seq, std::span<const TokenId> tokens) {
    Seq& s = live(seq);
    assert(s.tokens.size() + tokens.size() <= s.table.size() * options_.block_size);
    s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
}

std::vector<KvBlockCopy> KvBlocks::take_copies() {
    std::vector<KvBlockCopy> out;
    out.swap(copies_);
    return out;
}

KvStats KvBlocks::stats() const {
    KvStats st;
    st.block_size = options_.block_size;
    st.total_blocks = options_.n_blocks;
    st.free_blocks = static_cast<uint32_t>(free_.size());
    for (size_t b = 0; b < refs_.size(); ++b) {
        if (refs_[b] > 0 && refs_[b] == cached_refs_[b]) ++st.cached_blocks;
        if (refs_[b] > 1) ++st.shared_blocks;
    }
    st.sequences = static_cast<uint32_t>(live_.size());
    st.cached_prefixes = static_cast<uint32_t>(cached_.size());
    return st;
}

}  // namespace powerhouse
