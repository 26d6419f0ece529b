// ZeroedPages: memory that reads as zeros and is resident only where written, and the KV
// cache built on it, which costs the positions a conversation has used, not its context.
// Resident memory is read from /proc/self/status (RssAnon), so the bounds leave room for
// what else the process touches meanwhile (sanitizers' shadow pages included).

#include "platform/zeroed_pages.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/attention.h"

namespace powerhouse {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Anonymous resident memory of this process, bytes.
size_t resident_anon() {
    std::ifstream status("/proc/self/status");
    std::string key;
    while (status >> key) {
        if (key == "RssAnon:") {
            size_t kb = 0;
            status >> kb;
            return kb * 1024;
        }
        std::getline(status, key);
    }
    ADD_FAILURE() << "no RssAnon in /proc/self/status";
    return 0;
}

TEST(ZeroedPages, ReadsAsZerosAndIsResidentOnlyWhereWritten) {
    const size_t before = resident_anon();
    ZeroedPages pages(512 * kMiB);
    ASSERT_EQ(pages.size(), 512 * kMiB);
    EXPECT_LT(resident_anon(), before + 16 * kMiB) << "sizing the buffer made it resident";

    // 64 MiB written, one byte per page: about 64 MiB more.
    const size_t written = 64 * kMiB;
    for (size_t at = 0; at < written; at += 4096) pages.data()[at] = std::byte{1};
    const size_t after = resident_anon();
    EXPECT_GT(after, before + written - 4 * kMiB);
    EXPECT_LT(after, before + written + 32 * kMiB);

    // Unwritten pages read as zeros, written ones keep what was written.
    for (size_t at = written; at < pages.size(); at += 1 << 20) EXPECT_EQ(pages.data()[at], std::byte{0});
    EXPECT_EQ(pages.data()[4096], std::byte{1});

    // Moving hands the pages over; the moved-from buffer is empty and releases nothing.
    ZeroedPages moved = std::move(pages);
    EXPECT_EQ(pages.size(), 0u);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
    EXPECT_EQ(pages.data(), nullptr);
    EXPECT_EQ(moved.data()[4096], std::byte{1});
    moved = ZeroedPages();
    EXPECT_LT(resident_anon(), after - written + 8 * kMiB) << "releasing did not return the pages";
}

TEST(ZeroedPages, AnArrayIsAllZerosUntilWritten) {
    ZeroedArray<float> values(1000);
    ASSERT_EQ(values.size(), 1000u);
    for (float v : values) EXPECT_EQ(v, 0.0f);
    values.data()[999] = 2.5f;
    EXPECT_EQ(*(values.end() - 1), 2.5f);
    values.clear();
    EXPECT_TRUE(values.empty());
    EXPECT_EQ(ZeroedArray<float>().data(), nullptr);
}

// A cache for 8192 positions of a SmolLM2-shaped model (30 layers, 3 KV heads of 64: 180 MiB
// for F16 K and V) costs what its stored positions take.
TEST(ZeroedPages, TheKvCacheIsResidentForTheStoredPositionsOnly) {
    const uint32_t layers = 30, rows = 8192, heads = 3, head_dim = 64;
    const size_t before = resident_anon();
    cpu::KvCache cache;
    cache.init(KvCacheType::f16, layers, rows, heads, head_dim);
    EXPECT_EQ(cache.bytes(), size_t{2} * layers * rows * heads * head_dim * sizeof(uint16_t));
    EXPECT_LT(resident_anon(), before + 16 * kMiB);

    // 1000 positions in every layer: 2 * 30 * 1000 * 384 bytes = 22 MiB.
    const std::vector<float> k(size_t{heads} * head_dim, 0.5f), v(size_t{heads} * head_dim, -0.25f);
    for (uint32_t l = 0; l < layers; ++l) {
        for (int64_t r = 0; r < 1000; ++r) cache.store(l, r, k.data(), v.data());
    }
    const size_t stored = size_t{2} * layers * 1000 * cache.row_bytes();
    const size_t after = resident_anon();
    EXPECT_GT(after, before + stored - 2 * kMiB);
    EXPECT_LT(after, before + stored + 32 * kMiB) << "the cache holds " << cache.bytes() / kMiB << " MiB in all";
}

}  // namespace
}  // namespace powerhouse
