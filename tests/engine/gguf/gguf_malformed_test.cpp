// Malformed GGUF files: every defect gets an error that names the field and its byte
// offset, and nothing crashes, hangs or allocates more than the file's size. This suite
// also runs under AddressSanitizer and UndefinedBehaviorSanitizer (scripts/test).
#include <gtest/gtest.h>

#include <random>
#include <span>

#include "engine/gguf/raw_gguf.h"
#include "gguf/gguf_file.h"

namespace powerhouse {
namespace {

using test::ByteSink;
using test::RawGguf;
using test::RawTensor;

Result<GgufFile> parse(const std::string& bytes) {
    return GgufFile::parse(std::as_bytes(std::span(bytes.data(), bytes.size())), "bad.gguf");
}
// A parsed file views its bytes: parsing a temporary would leave it dangling.
Result<GgufFile> parse(std::string&& bytes) = delete;

// The parse fails with a format error whose message contains every fragment.
void expect_error(const std::string& bytes, std::initializer_list<std::string_view> fragments) {
    Result<GgufFile> file = parse(bytes);
    ASSERT_FALSE(file.ok()) << "a malformed file was accepted";
    EXPECT_EQ(file.error().code, ErrorCode::format);
    for (std::string_view f : fragments) {
        EXPECT_NE(file.error().message.find(f), std::string::npos)
            << "message: " << file.error().message << "\nmissing: " << f;
    }
    EXPECT_EQ(file.error().message.rfind("bad.gguf: ", 0), 0u) << file.error().message;
}

std::string at(uint64_t offset) { return "(at byte " + std::to_string(offset) + ")"; }

// A small valid file: two key/values and two tensors with data.
RawGguf valid_file() {
    RawGguf g;
    g.kv_string("general.architecture", "llama");
    g.kv_u32("llama.block_count", 1);
    g.tensor({"a", {4, 2}, 0, 0});   // F32, 32 bytes
    g.tensor({"b", {32}, 8, 32});    // Q8_0, one block of 34 bytes
    g.data = std::string(66, '\x01');
    return g;
}

TEST(GgufMalformed, ValidControlFileParses) {
    const std::string bytes = valid_file().build();
    Result<GgufFile> file = parse(bytes);
    ASSERT_TRUE(file.ok()) << file.error().message;
    EXPECT_EQ(file->tensors().size(), 2u);
    EXPECT_EQ(file->tensors()[1].n_bytes, 34u);
}

TEST(GgufMalformed, Version2IsRead) {
    RawGguf g = valid_file();
    g.version = 2;  // same layout as v3 for little-endian files
    const std::string bytes = g.build();  // the parsed file views these bytes: keep them alive
    Result<GgufFile> file = parse(bytes);
    ASSERT_TRUE(file.ok()) << file.error().message;
    EXPECT_EQ(file->version(), 2u);
    EXPECT_EQ(file->metadata().get_string("general.architecture"), "llama");
}

TEST(GgufMalformed, EmptyInput) { expect_error("", {"header", "truncated", at(0)}); }

TEST(GgufMalformed, BadMagic) {
    RawGguf g = valid_file();
    g.magic = 0x12345678;
    expect_error(g.build(), {"magic", "not a GGUF", at(0)});
}

TEST(GgufMalformed, OldGgmlMagicIsExplained) {
    RawGguf g = valid_file();
    std::memcpy(&g.magic, "tjgg", 4);
    expect_error(g.build(), {"GGML/GGJT", at(0)});
}

TEST(GgufMalformed, UnsupportedVersions) {
    for (uint32_t version : {0u, 1u, 4u, 0xFFFFFFFFu}) {
        RawGguf g = valid_file();
        g.version = version;
        expect_error(g.build(), {"version " + std::to_string(version), "not supported", at(4)});
    }
    RawGguf big_endian = valid_file();
    big_endian.version = 0x03000000;
    expect_error(big_endian.build(), {"big-endian", at(4)});
}

TEST(GgufMalformed, CountsOfMinusOneOrPastTheFile) {
    RawGguf g = valid_file();
    g.tensor_count = UINT64_MAX - 1;  // -2 as int64; UINT64_MAX means "automatic" in RawGguf
    expect_error(g.build(), {"tensor count", "cannot fit", at(8)});
    RawGguf h = valid_file();
    h.kv_count = static_cast<uint64_t>(-2);
    expect_error(h.build(), {"metadata count", "cannot fit", at(16)});
    // A count that fits the file's size but not its contents: runs into the tensor infos
    // and then off the end.
    RawGguf k = valid_file();
    k.kv_count = 5;
    const std::string bytes = k.build();
    Result<GgufFile> file = parse(bytes);
    ASSERT_FALSE(file.ok());
    EXPECT_NE(file.error().message.find("metadata entry"), std::string::npos) << file.error().message;
}

TEST(GgufMalformed, StringLengthPastTheFile) {
    for (uint64_t length : {uint64_t{1000}, uint64_t{1} << 63, UINT64_MAX}) {
        RawGguf g;
        g.kv("general.name", 8, ByteSink().put(length).bytes + "abc");
        expect_error(g.build(), {"metadata entry 0 ('general.name')", "string value length", "past the end",
                                 at(24 + 8 + 12 + 4)});
    }
}

TEST(GgufMalformed, KeyLengthPastTheFileOrEmpty) {
    std::string bytes = RawGguf().build().substr(0, 16) + ByteSink().put<uint64_t>(1).bytes;
    bytes += ByteSink().put<uint64_t>(uint64_t{1} << 63).bytes + "key and some more bytes";
    expect_error(bytes, {"metadata entry 0", "key length", at(24)});

    RawGguf g;
    g.kv("", 4, ByteSink().put<uint32_t>(1).bytes);
    expect_error(g.build(), {"key is empty", at(24)});
}

TEST(GgufMalformed, ArrayLengthsPastTheFile) {
    // u32 array claiming 2^62 elements; strings array claiming 2^63 strings.
    RawGguf g;
    g.kv("a", 9, ByteSink().put<uint32_t>(4).put<uint64_t>(uint64_t{1} << 62).put<uint32_t>(7).bytes);
    expect_error(g.build(), {"('a')", "array of", "uint32", at(24 + 9 + 4 + 4)});
    RawGguf h;
    h.kv("a", 9, ByteSink().put<uint32_t>(8).put<uint64_t>(uint64_t{1} << 63).bytes);
    expect_error(h.build(), {"('a')", "array length", "cannot fit", at(24 + 9 + 4 + 4)});
    RawGguf k;  // a string inside the array whose length runs off the end
    k.kv("a", 9, ByteSink().put<uint32_t>(8).put<uint64_t>(2).str("ok").put<uint64_t>(999).bytes);
    expect_error(k.build(), {"string 1 of the array length 999", "past the end"});
}

TEST(GgufMalformed, NestedArraysAreRefused) {
    RawGguf g;
    g.kv("a", 9, ByteSink().put<uint32_t>(9).put<uint64_t>(1).put<uint32_t>(4).put<uint64_t>(1).put<uint32_t>(5).bytes);
    expect_error(g.build(), {"nested arrays", at(24 + 9 + 4)});
}

TEST(GgufMalformed, UnknownValueTypes) {
    RawGguf g;
    g.kv("a", 13, ByteSink().put<uint32_t>(0).bytes);
    expect_error(g.build(), {"unknown value type 13", at(24 + 9)});
    RawGguf h;
    h.kv("a", 9, ByteSink().put<uint32_t>(0xFFFFFFFF).put<uint64_t>(0).bytes);
    expect_error(h.build(), {"unknown array element type 4294967295", at(24 + 9 + 4)});
    RawGguf k;
    k.kv("a", 7, ByteSink().put<uint8_t>(2).bytes);
    expect_error(k.build(), {"bool value is 2", at(24 + 9 + 4)});
}

TEST(GgufMalformed, DuplicateKeys) {
    RawGguf g;
    g.kv_u32("general.alignment", 32);
    g.kv_u32("general.alignment", 64);
    expect_error(g.build(), {"duplicate key", "metadata entry 1 ('general.alignment')", at(24 + 33)});
}

RawGguf one_tensor(RawTensor t, std::string data = std::string(64, '\0')) {
    RawGguf g;
    g.tensor(std::move(t));
    g.data = std::move(data);
    return g;
}

TEST(GgufMalformed, UnknownOrRemovedTensorTypes) {
    for (uint32_t type : {4u, 5u, 31u, 99u, 0xFFFFFFFFu}) {
        expect_error(one_tensor({"t", {32}, type, 0}).build(),
                     {"tensor 0 ('t')", "unknown tensor type " + std::to_string(type), at(24 + 9 + 4 + 8)});
    }
}

TEST(GgufMalformed, DimensionCount) {
    expect_error(one_tensor({"t", {}, 0, 0}).build(), {"n_dims is 0", at(33)});
    expect_error(one_tensor({"t", {1, 1, 1, 1, 1}, 0, 0}).build(), {"n_dims is 5", at(33)});
}

TEST(GgufMalformed, ZeroNegativeAndOverflowingDimensions) {
    expect_error(one_tensor({"t", {4, 0}, 0, 0}).build(), {"dimension 1 is 0", at(33 + 4 + 8)});
    expect_error(one_tensor({"t", {static_cast<uint64_t>(-4)}, 0, 0}).build(),
                 {"dimension 0 is", "negative", at(33 + 4)});
    expect_error(one_tensor({"t", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0}).build(),
                 {"product of the dimensions overflows", at(33 + 4 + 8)});
    // Elements fit in int64 but bytes do not: 2^62 F32 elements are 2^64 bytes.
    expect_error(one_tensor({"t", {uint64_t{1} << 31, uint64_t{1} << 31}, 0, 0}).build(),
                 {"size in bytes overflows", at(33)});
}

TEST(GgufMalformed, RowNotAMultipleOfTheBlockSize) {
    expect_error(one_tensor({"t", {33, 2}, 2, 0}).build(), {"row length 33", "Q4_0 block size 32"});
    expect_error(one_tensor({"t", {128}, 12, 0}).build(), {"row length 128", "Q4_K block size 256"});
}

TEST(GgufMalformed, BadAlignments) {
    for (uint32_t alignment : {0u, 3u, 48u, 1u << 21, 1u << 31}) {
        RawGguf g = valid_file();
        g.kv_u32("general.alignment", alignment);
        expect_error(g.build(), {"general.alignment is " + std::to_string(alignment), "power of two"});
    }
    RawGguf g = valid_file();
    g.kv_string("general.alignment", "32");
    expect_error(g.build(), {"general.alignment has type string, expected uint32"});
}

TEST(GgufMalformed, NonDefaultAlignmentIsUsed) {
    RawGguf g;
    g.kv_u32("general.alignment", 64);
    g.alignment = 64;
    g.tensor({"a", {4}, 0, 0});
    g.tensor({"b", {4}, 0, 64});
    g.data = std::string(80, '\x02');
    const std::string bytes = g.build();
    Result<GgufFile> file = parse(bytes);
    ASSERT_TRUE(file.ok()) << file.error().message;
    EXPECT_EQ(file->alignment(), 64u);
    EXPECT_EQ(file->data_offset() % 64, 0u);
    RawGguf h;
    h.kv_u32("general.alignment", 64);
    h.alignment = 64;
    h.tensor({"a", {4}, 0, 32});
    h.data = std::string(128, '\0');
    expect_error(h.build(), {"data offset 32 is not a multiple of the alignment 64"});
}

TEST(GgufMalformed, TensorDataOutOfOrderOverlappingOrPastTheEnd) {
    RawGguf out_of_order;
    out_of_order.tensor({"a", {8}, 0, 32});
    out_of_order.tensor({"b", {8}, 0, 0});
    out_of_order.data = std::string(64, '\0');
    expect_error(out_of_order.build(), {"tensor 1 ('b')", "out of order"});

    RawGguf overlapping;
    overlapping.tensor({"a", {16}, 0, 0});  // 64 bytes
    overlapping.tensor({"b", {8}, 0, 32});
    overlapping.data = std::string(128, '\0');
    expect_error(overlapping.build(), {"tensor 1 ('b')", "overlaps", "'a' (64)"});

    RawGguf past_end;
    past_end.tensor({"a", {8}, 0, 0});
    past_end.tensor({"b", {8}, 0, 32});
    past_end.data = std::string(40, '\0');
    expect_error(past_end.build(), {"tensor 1 ('b')", "past the end of the data section"});

    RawGguf huge_offset;
    huge_offset.tensor({"a", {8}, 0, uint64_t{1} << 63});
    huge_offset.data = std::string(32, '\0');
    expect_error(huge_offset.build(), {"tensor 0 ('a')", "past the end"});
}

TEST(GgufMalformed, DuplicateAndBadTensorNames) {
    RawGguf dup;
    dup.tensor({"w", {8}, 0, 0});
    dup.tensor({"w", {8}, 0, 32});
    dup.data = std::string(64, '\0');
    expect_error(dup.build(), {"tensor 1 ('w')", "duplicate tensor name"});
    expect_error(one_tensor({"", {8}, 0, 0}).build(), {"tensor name is empty", at(24)});
    expect_error(one_tensor({std::string(5000, 'x'), {8}, 0, 0}).build(), {"name length 5000", "limit"});
}

TEST(GgufMalformed, DataSectionStartPastTheEnd) {
    RawGguf g = one_tensor({"t", {8}, 0, 0}, "");
    std::string bytes = g.build();
    ASSERT_EQ(bytes.size(), 64u);  // 57 bytes of header and tensor info, padded
    bytes.resize(60);              // cut inside the alignment padding
    expect_error(bytes, {"data section would start", "truncated"});
}

TEST(GgufMalformed, VocabularyOnlyFileNeedsNoDataSection) {
    RawGguf g;
    g.kv_string("tokenizer.ggml.model", "gpt2");
    std::string bytes = g.build();
    while (!bytes.empty() && bytes.back() == '\0') bytes.pop_back();  // no padding at all
    Result<GgufFile> file = parse(bytes);
    ASSERT_TRUE(file.ok()) << file.error().message;
    EXPECT_EQ(file->metadata().get_string("tokenizer.ggml.model"), "gpt2");
}

TEST(GgufMalformed, TruncationAtEveryByte) {
    RawGguf g = valid_file();
    g.kv("list", 9, ByteSink().put<uint32_t>(8).put<uint64_t>(2).str("x").str("yz").bytes);
    g.kv("f", 12, ByteSink().put<double>(1.5).bytes);
    const std::string bytes = g.build();
    const uint64_t data_end = bytes.size();  // the last tensor ends exactly at the end
    ASSERT_TRUE(parse(bytes).ok());
    for (size_t n = 0; n < data_end; ++n) {
        const std::string prefix = bytes.substr(0, n);
        Result<GgufFile> file = parse(prefix);
        ASSERT_FALSE(file.ok()) << "prefix of " << n << " bytes was accepted";
        EXPECT_EQ(file.error().code, ErrorCode::format);
        EXPECT_NE(file.error().message.find("(at byte "), std::string::npos) << file.error().message;
    }
}

// Random corruption of a valid file: whatever the bytes, the parser either accepts or
// reports an error, and every tensor it accepts lies inside the buffer.
TEST(GgufMalformed, RandomCorruptionNeverCrashes) {
    RawGguf g = valid_file();
    g.kv("list", 9, ByteSink().put<uint32_t>(5).put<uint64_t>(3).put<int32_t>(1).put<int32_t>(2).put<int32_t>(3).bytes);
    const std::string original = g.build();
    std::mt19937_64 rng(1234);
    int accepted = 0;
    for (int round = 0; round < 20000; ++round) {
        std::string bytes = original;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int f = 0; f < flips; ++f) {
            bytes[rng() % bytes.size()] = static_cast<char>(rng());
        }
        Result<GgufFile> file = parse(bytes);
        if (!file.ok()) continue;
        ++accepted;
        for (const GgufTensorInfo& t : file->tensors()) {
            const auto* begin = reinterpret_cast<const std::byte*>(bytes.data());
            ASSERT_GE(t.data, begin);
            ASSERT_LE(t.data + t.n_bytes, begin + bytes.size());
        }
    }
    EXPECT_GT(accepted, 0);  // flips inside tensor data keep the file valid
}

}  // namespace
}  // namespace powerhouse
