// The CUDA dequantize kernels against the CPU reference (tensor/dequantize.h), bit for
// bit: f32 output must equal dequantize_row exactly, f16 output must equal f32_to_f16 of
// it. Random blocks of every type, many sizes (partial tiles, one block, many tiles),
// unaligned sources and destinations, every 16-bit pattern of F16 and BF16, and the
// `gguf` Python fixtures.
//
// Without a usable GPU the GPU tests skip with the reason ("no NVIDIA driver found").
// POWERHOUSE_REQUIRE_GPU=1 (set by scripts/device-check on the GPU machine) turns those
// skips into failures, so a broken driver setup cannot pass as "all skipped". The
// CudaRuntime and argument tests run everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_runtime.h"
#include "backend/cuda/dequantize_cuda.h"
#include "engine/tensor/quant_fixture.h"
#include "kernels/gpu_test.h"
#include "tensor/dequantize.h"
#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace powerhouse {

namespace {

using cuda::DequantOutput;

const std::vector<GgmlType>& kTypes = test::kKernelTypes;

using test::gpu_required;
using test::GpuTest;

// --- random input ----------------------------------------------------------------------

// A random finite f16 (any sign, subnormals included): the scales of real blocks.
uint16_t random_finite_f16(std::mt19937& rng) {
    auto h = static_cast<uint16_t>(rng());
    if ((h & 0x7c00u) == 0x7c00u) h = static_cast<uint16_t>(h & ~0x4000u);
    return h;
}

// Byte offsets of the f16 fields (scales, mins) of each block type.
std::vector<size_t> f16_field_offsets(GgmlType type) {
    switch (type) {
        case GgmlType::q4_0:
            return {offsetof(BlockQ4_0, d)};
        case GgmlType::q4_1:
            return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
        case GgmlType::q5_0:
            return {offsetof(BlockQ5_0, d)};
        case GgmlType::q5_1:
            return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
        case GgmlType::q8_0:
            return {offsetof(BlockQ8_0, d)};
        case GgmlType::q2_k:
            return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
        case GgmlType::q3_k:
            return {offsetof(BlockQ3_K, d)};
        case GgmlType::q4_k:
            return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
        case GgmlType::q5_k:
            return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
        case GgmlType::q6_k:
            return {offsetof(BlockQ6_K, d)};
        default:
            return {};
    }
}

// f32 values that sit on the edges of f16 rounding: overflow, ties, subnormals, NaNs.
std::vector<float> f16_edge_values() {
    const auto bits = [](uint32_t u) {
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    };
    return {0.0f,
            -0.0f,
            1.0f,
            65504.0f,
            65519.99f,
            65520.0f,
            -65520.0f,
            65536.0f,
            0x1p-24f,
            0x1p-25f,
            0x1.8p-25f,
            0x1.0p-26f,
            0x1p-14f,
            0x1.ffcp-15f,
            1.00048828125f /* 1 + 2^-11: tie to even (down) */,
            1.00146484375f /* 1 + 3 * 2^-11: tie to even (up) */,
            bits(0x7f800000u),
            bits(0xff800000u),
            bits(0x7fc00000u),
            bits(0xffc00001u),
            bits(0x7f800001u) /* NaN whose payload would vanish */,
            bits(0x7fa00000u) /* signalling */};
}

// n elements of `type`: random bytes with finite f16 scales for the quantized types;
// for the float types random bit patterns (NaN and inf included) mixed with values in and
// around the f16 range, led by the edge values above.
std::vector<uint8_t> random_row(GgmlType type, int64_t n, std::mt19937& rng) {
    const TypeTraits& traits = type_traits(type);
    std::vector<uint8_t> bytes(row_bytes(traits, static_cast<uint64_t>(n)));
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    if (type == GgmlType::f32) {
        const std::vector<float> edges = f16_edge_values();
        std::uniform_real_distribution<float> exponent(-30.0f, 20.0f);
        for (int64_t i = 0; i < n; ++i) {
            float v;
            if (static_cast<size_t>(i) < edges.size()) {
                v = edges[static_cast<size_t>(i)];
            } else if (i % 4 == 0) {
                continue;  // keep the random bits
            } else {
                v = std::exp2(exponent(rng)) * (rng() % 2 ? 1.0f : -1.0f);
            }
            std::memcpy(bytes.data() + 4 * i, &v, 4);
        }
    }
    const std::vector<size_t> fields = f16_field_offsets(type);
    for (size_t block = 0; !fields.empty() && block < bytes.size(); block += traits.type_size) {
        for (const size_t offset : fields) {
            const uint16_t h = random_finite_f16(rng);
            std::memcpy(bytes.data() + block + offset, &h, 2);
        }
    }
    return bytes;
}

// --- comparison ------------------------------------------------------------------------

template <class T>
::testing::AssertionResult same_bits(const std::vector<T>& expected, const std::vector<T>& actual, int block_size) {
    if (expected.size() != actual.size()) {
        return ::testing::AssertionFailure() << "sizes differ: " << expected.size() << " vs " << actual.size();
    }
    if (std::memcmp(expected.data(), actual.data(), expected.size() * sizeof(T)) == 0) {
        return ::testing::AssertionSuccess();
    }
    size_t mismatches = 0;
    size_t first = expected.size();
    for (size_t i = 0; i < expected.size(); ++i) {
        if (std::memcmp(&expected[i], &actual[i], sizeof(T)) != 0) {
            if (first == expected.size()) first = i;
            ++mismatches;
        }
    }
    uint32_t e = 0;
    uint32_t a = 0;
    std::memcpy(&e, &expected[first], sizeof(T));
    std::memcpy(&a, &actual[first], sizeof(T));
    std::ostringstream msg;
    msg << mismatches << " of " << expected.size() << " elements differ; first at " << first << " (block "
        << first / static_cast<size_t>(block_size) << ", element " << first % static_cast<size_t>(block_size)
        << "): expected 0x" << std::hex << std::setfill('0') << std::setw(2 * sizeof(T)) << e << ", got 0x"
        << std::setw(2 * sizeof(T)) << a;
    return ::testing::AssertionFailure() << msg.str();
}

std::vector<float> cpu_reference(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n) {
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(type, bytes.data(), out.data(), n);
    return out;
}

std::vector<uint16_t> to_f16(const std::vector<float>& values) {
    std::vector<uint16_t> out(values.size());
    for (size_t i = 0; i < values.size(); ++i) out[i] = f32_to_f16(values[i]);
    return out;
}

// Decodes `bytes` on the GPU with the source placed src_offset bytes and the destination
// dst_offset elements past the start of their buffers (to reach the unaligned paths).
template <class Out>
Result<std::vector<Out>> run_gpu(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n, size_t src_offset,
                                 size_t dst_offset) {
    const DequantOutput output = sizeof(Out) == 4 ? DequantOutput::f32 : DequantOutput::f16;
    auto src = cuda::DeviceBuffer::allocate(bytes.size() + src_offset);
    if (!src) return std::move(src).error();
    auto dst = cuda::DeviceBuffer::allocate((static_cast<size_t>(n) + dst_offset) * sizeof(Out));
    if (!dst) return std::move(dst).error();
    PH_TRY(src->upload(bytes.data(), bytes.size(), src_offset));
    auto* src_ptr = static_cast<const uint8_t*>(src->data()) + src_offset;
    auto* dst_ptr = static_cast<Out*>(dst->data()) + dst_offset;
    PH_TRY(cuda::dequantize_device(type, src_ptr, dst_ptr, output, n));
    PH_TRY(cuda::cuda_synchronize());
    std::vector<Out> out(static_cast<size_t>(n));
    PH_TRY(dst->download(out.data(), out.size() * sizeof(Out), dst_offset * sizeof(Out)));
    return out;
}

// One input decoded four ways (f32/f16 through the convenience API and through device
// buffers at the given offsets), each checked against the CPU reference.
void check_row(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n, size_t src_offset, size_t dst_offset) {
    const int block_size = static_cast<int>(type_traits(type).block_size);
    const std::vector<float> expected = cpu_reference(type, bytes, n);
    const std::vector<uint16_t> expected_f16 = to_f16(expected);
    if (src_offset == 0 && dst_offset == 0) {
        std::vector<float> got;
        const auto r = cuda::dequantize_on_device(type, bytes.data(), n, got);
        ASSERT_TRUE(r.ok()) << r.error().message;
        EXPECT_TRUE(same_bits(expected, got, block_size)) << "f32 output";
        std::vector<uint16_t> got_f16;
        const auto r16 = cuda::dequantize_on_device_f16(type, bytes.data(), n, got_f16);
        ASSERT_TRUE(r16.ok()) << r16.error().message;
        EXPECT_TRUE(same_bits(expected_f16, got_f16, block_size)) << "f16 output";
        return;
    }
    auto got = run_gpu<float>(type, bytes, n, src_offset, dst_offset);
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_TRUE(same_bits(expected, *got, block_size)) << "f32 output";
    auto got_f16 = run_gpu<uint16_t>(type, bytes, n, src_offset, dst_offset);
    ASSERT_TRUE(got_f16.ok()) << got_f16.error().message;
    EXPECT_TRUE(same_bits(expected_f16, *got_f16, block_size)) << "f16 output";
}

// --- GPU tests, one instance per type ------------------------------------------------------

class DequantizeKernel : public GpuTest, public ::testing::WithParamInterface<GgmlType> {};

TEST_P(DequantizeKernel, RandomBlocksMatchCpuReference) {
    const GgmlType type = GetParam();
    const int64_t block_size = type_traits(type).block_size;
    std::mt19937 rng(1234u + static_cast<uint32_t>(type));
    // Tiles hold 2048 elements (64 blocks of 32, 8 super-blocks of 256); the float types
    // go 8 elements per thread. These counts hit one block, partial and whole tiles, and
    // many tiles with a tail.
    for (const int64_t n_blocks : {1, 3, 7, 8, 9, 64, 65, 1003, 8197}) {
        SCOPED_TRACE("blocks: " + std::to_string(n_blocks));
        const int64_t n = n_blocks * block_size;
        check_row(type, random_row(type, n, rng), n, 0, 0);
        if (HasFatalFailure()) return;
    }
}

TEST_P(DequantizeKernel, ManyRowsInOneCall) {
    // A weight matrix [37, 4096] decoded by one call: rows are whole blocks, back to back.
    const GgmlType type = GetParam();
    std::mt19937 rng(99u + static_cast<uint32_t>(type));
    const int64_t n = 37 * 4096;
    check_row(type, random_row(type, n, rng), n, 0, 0);
}

TEST_P(DequantizeKernel, UnalignedSourceAndDestination) {
    const GgmlType type = GetParam();
    const int64_t n = 1003 * static_cast<int64_t>(type_traits(type).block_size);
    std::mt19937 rng(7u + static_cast<uint32_t>(type));
    const std::vector<uint8_t> bytes = random_row(type, n, rng);
    // (source bytes, destination elements): 16-byte aligned buffers moved off alignment.
    const std::pair<size_t, size_t> offsets[] = {{16, 0}, {2, 0}, {4, 0}, {1, 0}, {0, 1}, {0, 2}, {6, 3}};
    for (const auto& [src_offset, dst_offset] : offsets) {
        SCOPED_TRACE("source offset " + std::to_string(src_offset) + " bytes, destination offset " +
                     std::to_string(dst_offset) + " elements");
        check_row(type, bytes, n, src_offset, dst_offset);
        if (HasFatalFailure()) return;
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantizeKernel, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<GgmlType>& param_info) {
                             return std::string(type_traits(param_info.param).name);
                         });

// --- GPU tests over fixed inputs ---------------------------------------------------------

class DequantizeKernelFixed : public GpuTest {};

TEST_F(DequantizeKernelFixed, Every16BitPatternOfF16AndBf16) {
    std::vector<uint8_t> bytes(2 * 65536);
    for (uint32_t h = 0; h < 65536; ++h) {
        bytes[2 * h] = static_cast<uint8_t>(h & 0xff);
        bytes[2 * h + 1] = static_cast<uint8_t>(h >> 8);
    }
    for (const GgmlType type : {GgmlType::f16, GgmlType::bf16}) {
        SCOPED_TRACE(std::string(type_traits(type).name));
        check_row(type, bytes, 65536, 0, 0);
    }
    // f16 -> f32 -> f16 gives back every pattern, NaN payloads included.
    std::vector<uint16_t> got;
    const auto r = cuda::dequantize_on_device_f16(GgmlType::f16, bytes.data(), 65536, got);
    ASSERT_TRUE(r.ok()) << r.error().message;
    for (uint32_t h = 0; h < 65536; ++h) ASSERT_EQ(got[h], h) << "pattern 0x" << std::hex << h;
}

TEST_F(DequantizeKernelFixed, MatchesGgufFixtureBitForBit) {
    // tests/data/quants/dequantize.bin: rows encoded and decoded by the `gguf` package.
    const auto records = test::load_quant_fixture("dequantize.bin");
    ASSERT_FALSE(records.empty());
    for (const test::QuantRecord& rec : records) {
        SCOPED_TRACE(rec.describe());
        const auto traits = type_traits(rec.type_id);
        ASSERT_TRUE(traits.has_value());
        const auto n = static_cast<int64_t>(rec.values.size());
        std::vector<float> got;
        const auto r = cuda::dequantize_on_device(traits->type, rec.data.data(), n, got);
        ASSERT_TRUE(r.ok()) << r.error().message;
        EXPECT_TRUE(same_bits(rec.values, got, static_cast<int>(traits->block_size)));
    }
}

TEST_F(DequantizeKernelFixed, EmptyInputLaunchesNothing) {
    std::vector<float> got(3, 1.0f);
    const auto r = cuda::dequantize_on_device(GgmlType::q4_k, nullptr, 0, got);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(got.empty());
}

// --- tests that need no GPU ------------------------------------------------------------

TEST(CudaRuntime, QueryGivesDevicesOrAReason) {
    const cuda::CudaVersions versions = cuda::cuda_versions();
    EXPECT_GE(versions.runtime, 12000) << "built with CUDA " << cuda::format_cuda_version(versions.runtime);
    auto devices = cuda::cuda_devices();
    if (!devices) {
        // No GPU here: a clean error with a reason, not a crash.
        const std::string& message = devices.error().message;
        std::cout << "[ no GPU   ] " << message << "\n";
        EXPECT_FALSE(gpu_required()) << message;
        EXPECT_FALSE(message.empty());
        EXPECT_EQ(cuda::cuda_available().error().message, message);
        if (versions.driver == 0) {
            EXPECT_EQ(message.rfind("no NVIDIA driver found", 0), 0u) << message;
        }
        EXPECT_FALSE(cuda::cuda_device_count().ok());
        EXPECT_FALSE(cuda::cuda_device_info(0).ok());
        return;
    }
    ASSERT_FALSE(devices->empty());
    EXPECT_GT(versions.driver, 0);
    for (const cuda::CudaDeviceInfo& d : *devices) {
        std::cout << "[ GPU " << d.index << "    ] " << d.name << ", sm_" << d.compute_major << d.compute_minor << ", "
                  << d.multiprocessors << " SMs, " << d.total_memory / (1u << 20) << " MiB ("
                  << d.free_memory / (1u << 20) << " free), " << d.pci_bus_id << ", " << d.uuid << ", peak "
                  << cuda::peak_memory_bandwidth(d) / 1e9 << " GB/s; driver CUDA "
                  << cuda::format_cuda_version(versions.driver) << "\n";
        EXPECT_FALSE(d.name.empty());
        EXPECT_EQ(d.uuid.size(), 40u) << d.uuid;
        EXPECT_EQ(d.uuid.rfind("GPU-", 0), 0u) << d.uuid;
        EXPECT_FALSE(d.pci_bus_id.empty());
        EXPECT_GE(d.compute_major, 5);
        EXPECT_GT(d.total_memory, 0u);
        EXPECT_GT(d.free_memory, 0u);
        EXPECT_LE(d.free_memory, d.total_memory);
    }
    const auto past_the_end = cuda::cuda_device_info(static_cast<int>(devices->size()));
    ASSERT_FALSE(past_the_end.ok());
    EXPECT_EQ(past_the_end.error().code, ErrorCode::invalid_argument);
}

TEST(DequantizeCuda, KernelsCoverEveryReferenceType) {
    for (uint32_t id = 0; id < 64; ++id) {
        const auto traits = type_traits(id);
        if (!traits) continue;
        EXPECT_EQ(cuda::has_dequantize_kernel(traits->type), traits->has_reference) << traits->name;
    }
    EXPECT_EQ(kTypes.size(), 14u);
}

TEST(DequantizeCuda, RejectsBadArgumentsBeforeTouchingTheGpu) {
    std::vector<float> out;
    const std::vector<uint8_t> bytes(4096);
    auto r = cuda::dequantize_on_device(GgmlType::q4_0, bytes.data(), 31, out);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(r.error().message.find("block size 32"), std::string::npos) << r.error().message;

    r = cuda::dequantize_on_device(GgmlType::q4_k, bytes.data(), -256, out);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);

    for (const GgmlType type : {GgmlType::q8_1, GgmlType::iq2_xxs, GgmlType::i32, GgmlType::nvfp4}) {
        r = cuda::dequantize_on_device(type, bytes.data(), 256, out);
        ASSERT_FALSE(r.ok()) << type_traits(type).name;
        EXPECT_EQ(r.error().code, ErrorCode::unsupported) << r.error().message;
    }
    std::vector<uint16_t> out16;
    const auto r16 = cuda::dequantize_on_device_f16(GgmlType::q6_k, bytes.data(), 100, out16);
    ASSERT_FALSE(r16.ok());
    EXPECT_EQ(r16.error().code, ErrorCode::invalid_argument);
}

TEST(DequantizeCuda, WithoutAGpuReportsWhy) {
    const auto available = cuda::cuda_available();
    if (available) GTEST_SKIP() << "a GPU is present";
    std::vector<float> out;
    const std::vector<uint8_t> bytes(18 * 4);
    const auto r = cuda::dequantize_on_device(GgmlType::q4_0, bytes.data(), 128, out);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, available.error().message);
}

}  // namespace
}  // namespace powerhouse
