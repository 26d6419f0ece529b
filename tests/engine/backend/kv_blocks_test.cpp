// The bookkeeping of the KV cache shared by sequences (backend/kv_blocks.h): blocks handed
// out as sequences grow and given back, prefixes shared with copy on write, cached prefixes
// dropped least recently used first, and the contiguous mode a stage without block tables
// needs.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "backend/kv_blocks.h"

namespace powerhouse {
namespace {

KvBlocksOptions paged(uint32_t blocks, uint32_t block_size = 4, uint32_t max_cached = 4) {
    KvBlocksOptions o;
    o.n_blocks = blocks;
    o.block_size = block_size;
    o.max_length = 1000;
    o.max_sequences = 8;
    o.max_cached = max_cached;
    return o;
}

std::vector<TokenId> iota_tokens(size_t n, TokenId first = 1) {
    std::vector<TokenId> t(n);
    std::iota(t.begin(), t.end(), first);
    return t;
}

// Reserves and appends `tokens` at the end of `seq`, as a decode would.
void grow(KvBlocks& kv, SeqId seq, std::span<const TokenId> tokens) {
    ASSERT_TRUE(kv.reserve(seq, static_cast<uint32_t>(tokens.size())));
    kv.append(seq, tokens);
}

TEST(KvBlocks, ASequenceTakesBlocksAsItGrowsAndGivesThemBack) {
    KvBlocks kv(paged(8));
    const SeqId s = kv.open().value();
    EXPECT_EQ(kv.blocks_needed(s, 5), 2u);
    grow(kv, s, iota_tokens(5));
    EXPECT_EQ(kv.length(s), 5u);
    EXPECT_EQ(kv.table(s).size(), 2u);
    EXPECT_EQ(kv.stats().free_blocks, 6u);
    EXPECT_EQ(kv.blocks_needed(s, 3), 0u) << "the second block has room for three more";
    EXPECT_EQ(kv.blocks_needed(s, 4), 1u);
    kv.truncate(s, 4);
    EXPECT_EQ(kv.table(s).size(), 1u);
    EXPECT_EQ(kv.stats().free_blocks, 7u);
    kv.close(s, false);
    EXPECT_EQ(kv.stats().free_blocks, 8u);
    EXPECT_EQ(kv.stats().sequences, 0u);
}

TEST(KvBlocks, AReserveThatCannotBeMetChangesNothing) {
    KvBlocks kv(paged(3));
    const SeqId a = kv.open().value();
    grow(kv, a, iota_tokens(8));
    const SeqId b = kv.open().value();
    Result<void> r = kv.reserve(b, 5);  // two blocks, one is free
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::out_of_memory);
    EXPECT_NE(r.error().message.find("KV cache is full"), std::string::npos) << r.error().message;
    EXPECT_TRUE(kv.table(b).empty());
    EXPECT_EQ(kv.stats().free_blocks, 1u);
    Result<void> too_long = kv.reserve(b, 1001);
    ASSERT_FALSE(too_long);
    EXPECT_EQ(too_long.error().code, ErrorCode::context_full);
}

TEST(KvBlocks, OpeningMoreSequencesThanAllowedFails) {
    KvBlocksOptions o = paged(8);
    o.max_sequences = 2;
    KvBlocks kv(o);
    ASSERT_TRUE(kv.open());
    ASSERT_TRUE(kv.open());
    EXPECT_FALSE(kv.open());
}

TEST(KvBlocks, ANewSequenceSharesWholeBlocksAndCopiesTheLastOne) {
    KvBlocks kv(paged(16));
    const SeqId a = kv.open().value();
    const std::vector<TokenId> prompt = iota_tokens(10);
    grow(kv, a, prompt);
    (void)kv.take_copies();
    const SeqId b = kv.open().value();
    std::vector<TokenId> other = iota_tokens(10);
    other.push_back(99);
    // Ten positions in common: blocks 0 and 1 shared, block 2 (positions 8, 9) copied.
    EXPECT_EQ(kv.adopt_prefix(b, other, 10), 10u);
    EXPECT_EQ(kv.length(b), 10u);
    const auto ta = kv.table(a), tb = kv.table(b);
    ASSERT_EQ(tb.size(), 3u);
    EXPECT_EQ(tb[0], ta[0]);
    EXPECT_EQ(tb[1], ta[1]);
    EXPECT_NE(tb[2], ta[2]);
    const std::vector<KvBlockCopy> copies = kv.take_copies();
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(copies[0].from, ta[2]);
    EXPECT_EQ(copies[0].to, tb[2]);
    EXPECT_EQ(kv.stats().shared_blocks, 2u);
    // Both go on writing into blocks of their own.
    grow(kv, a, iota_tokens(3, 50));
    grow(kv, b, iota_tokens(3, 60));
    EXPECT_TRUE(kv.take_copies().empty());
    EXPECT_NE(kv.table(a)[2], kv.table(b)[2]);
}

TEST(KvBlocks, WritingIntoASharedBlockCopiesItFirst) {
    KvBlocks kv(paged(16));
    const SeqId a = kv.open().value();
    grow(kv, a, iota_tokens(8));
    const SeqId b = kv.open().value();
    ASSERT_EQ(kv.adopt_prefix(b, iota_tokens(9), 8), 8u);  // two whole blocks, shared
    EXPECT_TRUE(kv.take_copies().empty());
    // b goes back to position 6: its block 1 is still a's too, and holds positions 4, 5.
    kv.truncate(b, 6);
    const int32_t shared = kv.table(b)[1];
    EXPECT_EQ(kv.blocks_needed(b, 1), 1u);
    grow(kv, b, iota_tokens(1, 77));
    const std::vector<KvBlockCopy> copies = kv.take_copies();
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(copies[0].from, shared);
    EXPECT_EQ(copies[0].to, kv.table(b)[1]);
    EXPECT_EQ(kv.table(a)[1], shared) << "a keeps its block";
}

TEST(KvBlocks, AFinishedSequenceStaysCachedAndIsFoundAgain) {
    KvBlocks kv(paged(16));
    const SeqId a = kv.open().value();
    grow(kv, a, iota_tokens(12));
    kv.close(a, true);
    KvStats st = kv.stats();
    EXPECT_EQ(st.cached_prefixes, 1u);
    EXPECT_EQ(st.cached_blocks, 3u);
    EXPECT_EQ(kv.available_blocks(), 16u) << "cached blocks can be handed out";
    const SeqId b = kv.open().value();
    std::vector<TokenId> next = iota_tokens(12);
    next.push_back(5);
    EXPECT_EQ(kv.adopt_prefix(b, next, 12), 12u);
    EXPECT_EQ(kv.stats().cached_blocks, 0u) << "now held by b too";
    // A prompt that only starts the same way gets the common part.
    const SeqId c = kv.open().value();
    std::vector<TokenId> branch = iota_tokens(6);
    branch.push_back(500);
    EXPECT_EQ(kv.adopt_prefix(c, branch, 6), 6u);
}

TEST(KvBlocks, CachedPrefixesGoLeastRecentlyUsedFirstWhenBlocksAreNeeded) {
    KvBlocks kv(paged(6, 4, 8));
    for (TokenId first : {100, 200, 300}) {  // three cached prefixes of two blocks each
        const SeqId s = kv.open().value();
        grow(kv, s, iota_tokens(8, first));
        kv.close(s, true);
    }
    EXPECT_EQ(kv.stats().free_blocks, 0u);
    // Use the oldest (100...) so that 200... is now the least recently used.
    const SeqId probe = kv.open().value();
    EXPECT_EQ(kv.adopt_prefix(probe, iota_tokens(8, 100), 4), 4u);
    kv.close(probe, false);
    const SeqId s = kv.open().value();
    grow(kv, s, iota_tokens(4, 900));  // one block: one cached prefix must go
    kv.close(s, false);
    const SeqId check = kv.open().value();
    EXPECT_EQ(kv.adopt_prefix(check, iota_tokens(8, 200), 7), 0u) << "the least recently used went";
    kv.close(check, false);
    const SeqId check2 = kv.open().value();
    EXPECT_EQ(kv.adopt_prefix(check2, iota_tokens(8, 100), 7), 7u);
}

TEST(KvBlocks, ALongerVersionOfACachedPrefixReplacesIt) {
    KvBlocks kv(paged(16));
    const SeqId a = kv.open().value();
    grow(kv, a, iota_tokens(5));
    kv.close(a, true);
    const SeqId b = kv.open().value();
    ASSERT_EQ(kv.adopt_prefix(b, iota_tokens(9), 8), 5u);
    grow(kv, b, iota_tokens(4, 6));
    kv.close(b, true);
    EXPECT_EQ(kv.stats().cached_prefixes, 1u);
}

TEST(KvBlocks, AtMostMaxCachedPrefixesAreKept) {
    KvBlocks kv(paged(32, 4, 2));
    for (TokenId first : {100, 200, 300}) {
        const SeqId s = kv.open().value();
        grow(kv, s, iota_tokens(4, first));
        kv.close(s, true);
    }
    EXPECT_EQ(kv.stats().cached_prefixes, 2u);
    EXPECT_EQ(kv.stats().free_blocks, 30u);
}

TEST(KvBlocks, ContiguousModeKeepsTheSequenceInThePoolsFirstBlocks) {
    KvBlocksOptions o = paged(8);
    o.contiguous = true;
    KvBlocks kv(o);
    EXPECT_EQ(kv.options().max_sequences, 1u);
    const SeqId a = kv.open().value();
    EXPECT_FALSE(kv.open()) << "one sequence at a time";
    grow(kv, a, iota_tokens(10));
    EXPECT_EQ(std::vector<int32_t>(kv.table(a).begin(), kv.table(a).end()), (std::vector<int32_t>{0, 1, 2}));
    kv.close(a, true);
    // The next conversation turn takes the cached sequence over, cut to the common part.
    const SeqId b = kv.open().value();
    std::vector<TokenId> turn = iota_tokens(6);
    turn.push_back(42);
    EXPECT_EQ(kv.adopt_prefix(b, turn, 6), 6u);
    EXPECT_EQ(std::vector<int32_t>(kv.table(b).begin(), kv.table(b).end()), (std::vector<int32_t>{0, 1}));
    EXPECT_TRUE(kv.take_copies().empty());
    grow(kv, b, iota_tokens(5, 40));
    EXPECT_EQ(std::vector<int32_t>(kv.table(b).begin(), kv.table(b).end()), (std::vector<int32_t>{0, 1, 2}));
    kv.close(b, true);
    // Another conversation: nothing in common, the cached one is dropped, blocks from 0.
    const SeqId c = kv.open().value();
    EXPECT_EQ(kv.adopt_prefix(c, iota_tokens(5, 900), 4), 0u);
    grow(kv, c, iota_tokens(5, 900));
    EXPECT_EQ(std::vector<int32_t>(kv.table(c).begin(), kv.table(c).end()), (std::vector<int32_t>{0, 1}));
}

// Random opens, adoptions, growth, truncation and closes: the holders of every block always
// add up, no block is held twice by one sequence, and every block comes back in the end.
TEST(KvBlocks, RandomUseKeepsTheCountsRight) {
    KvBlocks kv(paged(40, 4, 3));
    std::mt19937 rng(7);
    std::vector<SeqId> live;
    for (int step = 0; step < 3000; ++step) {
        const int what = static_cast<int>(rng() % 6);
        if (what == 0 && live.size() < 8) {
            const SeqId s = kv.open().value();
            std::vector<TokenId> prompt(rng() % 20 + 1);
            for (auto& t : prompt) t = static_cast<TokenId>(rng() % 3);  // few tokens: many shared prefixes
            kv.adopt_prefix(s, prompt, static_cast<uint32_t>(prompt.size() - 1));
            live.push_back(s);
        } else if (what <= 2 && !live.empty()) {
            const SeqId s = live[rng() % live.size()];
            std::vector<TokenId> more(rng() % 6 + 1);
            for (auto& t : more) t = static_cast<TokenId>(rng() % 3);
            if (kv.reserve(s, static_cast<uint32_t>(more.size()))) kv.append(s, more);
        } else if (what == 3 && !live.empty()) {
            const SeqId s = live[rng() % live.size()];
            kv.truncate(s, static_cast<uint32_t>(rng() % (kv.length(s) + 1)));
        } else if (what >= 4 && !live.empty()) {
            const size_t i = rng() % live.size();
            kv.close(live[i], rng() % 2 == 0);
            live.erase(live.begin() + static_cast<ptrdiff_t>(i));
        }
        (void)kv.take_copies();
        const KvStats st = kv.stats();
        ASSERT_LE(st.free_blocks + st.cached_blocks, 40u);
        for (SeqId s : live) {
            const auto t = kv.table(s);
            ASSERT_EQ(std::set<int32_t>(t.begin(), t.end()).size(), t.size()) << "step " << step;
            ASSERT_GE(t.size() * 4, kv.length(s));
        }
    }
    for (SeqId s : live) kv.close(s, false);
    kv.drop_cached();
    EXPECT_EQ(kv.stats().free_blocks, 40u);
}

}  // namespace
}  // namespace powerhouse
