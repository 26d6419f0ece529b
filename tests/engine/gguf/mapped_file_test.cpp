// MappedFile::release_pages: the pages leave the process's resident memory and read back
// unchanged from the file; ranges outside the mapping are left alone.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/mapped_file.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

// The process's resident file-backed memory, in kB (/proc/self/status RssFile).
long rss_file_kb() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("RssFile:", 0) == 0) return std::stol(line.substr(8));
    }
    return -1;
}

TEST(MappedFile, ReleasedPagesLeaveTheProcessAndReadBackUnchanged) {
    test::TempDir dir;
    constexpr size_t kBytes = 16 << 20;
    std::string bytes(kBytes, '\0');
    for (size_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<char>((i * 7 + i / 4096) & 0xFF);
    test::write_file(dir / "data.bin", bytes);
    Result<MappedFile> file = MappedFile::open(dir / "data.bin");
    ASSERT_TRUE(file.ok()) << file.error().message;
    const std::byte* data = file->data();

    long sum = 0;
    for (size_t i = 0; i < kBytes; i += 4096) sum += static_cast<long>(data[i]);  // every page resident
    const long before = rss_file_kb();
    ASSERT_GE(before, 16 * 1024 - 64) << "the file's pages should be resident after reading them";
    // Unaligned ends: only the whole pages inside go.
    file->release_pages(data + 100, kBytes - 200);
    const long after = rss_file_kb();
    EXPECT_LE(after, before - 15 * 1024) << "before " << before << " kB, after " << after << " kB";
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(data), kBytes), bytes);
    EXPECT_GT(sum, 0);

    EXPECT_TRUE(file->contains(data, kBytes));
    EXPECT_TRUE(file->contains(data + kBytes - 1, 1));
    EXPECT_FALSE(file->contains(data + kBytes - 1, 2));
    EXPECT_FALSE(file->contains(data - 1, 1));
    // Bytes elsewhere (not the mapping's) are never touched.
    std::vector<std::byte> heap(1 << 20, std::byte{0x5A});
    file->release_pages(heap.data(), heap.size());
    for (std::byte b : heap) ASSERT_EQ(b, std::byte{0x5A});
}

}  // namespace
}  // namespace powerhouse
