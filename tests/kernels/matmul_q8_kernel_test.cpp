// The 8-bit activation path of the decode products (kernels/matmul_q8.cu) against the CPU
// engine (backend/cpu/quant_dot.h), which is itself checked against llama.cpp:
//  - ph_quantize_activations writes exactly the CPU's activation blocks (Q8_0 values and
//    f16 scales, Q8_1's sums, Q8_K's values, scales and sums per 16), on random rows, rows
//    with ties for the largest magnitude, and zero blocks;
//  - ph_matmul_q8 for every quantized type against cpu::dot_rows on the same activations:
//    the integer sums per block are exact on both sides, so only the order of the float
//    additions differs (tolerance: 1e-5 of the sum of |products|); rows cut from a wider
//    matrix and strided outputs, 1 to 13 tokens;
//  - the argument checks, which run without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/quant_dot.h"
#include "kernels/gpu_test.h"
#include "kernels/kernel_test_support.h"
#include "powerhouse_kernels.h"
#include "tensor/dequantize.h"
#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/quantize.h"

namespace powerhouse {

namespace {

using test::all_close;
using test::DeviceArray;
using test::GpuTest;
using test::ran;
using test::type_id;
using test::uniform;

const std::vector<GgmlType> kQ8Types = {GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0, GgmlType::q5_1,
                                        GgmlType::q8_0, GgmlType::mxfp4, GgmlType::q2_k, GgmlType::q3_k,
                                        GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k};

std::string type_name(const ::testing::TestParamInfo<GgmlType>& info) {
    return std::string(type_traits(info.param).name);
}

// The GPU's activation arrays of one token, as ph_quantize_activations lays them out.
struct GpuAct {
    std::vector<int8_t> q;
    std::vector<float> d, s;
    std::vector<int32_t> sum16;
};

GpuAct unpack(const std::vector<uint8_t>& bytes, size_t offset, int64_t in) {
    GpuAct a;
    const auto n = static_cast<size_t>(in);
    a.q.resize(n);
    a.d.resize(n / 32);
    a.s.resize(n / 32);
    a.sum16.resize(n / 16);
    std::memcpy(a.q.data(), bytes.data() + offset, n);
    std::memcpy(a.d.data(), bytes.data() + offset + n, n / 32 * 4);
    std::memcpy(a.s.data(), bytes.data() + offset + n + n / 8, n / 32 * 4);
    std::memcpy(a.sum16.data(), bytes.data() + offset + n + n / 4, n / 16 * 4);
    return a;
}

// The same arrays from the CPU engine's activation blocks.
GpuAct from_cpu(GgmlType weight_type, const std::vector<uint8_t>& blocks, int64_t in) {
    GpuAct a;
    const auto n = static_cast<size_t>(in);
    a.q.resize(n);
    a.d.resize(n / 32);
    a.s.assign(n / 32, 0.0f);
    a.sum16.resize(n / 16);
    const GgmlType act = cpu::activation_type(weight_type);
    if (act == GgmlType::q8_k) {
        for (size_t b = 0; b < n / 256; ++b) {
            cpu::BlockQ8_K block;
            std::memcpy(&block, blocks.data() + b * sizeof block, sizeof block);
            std::memcpy(a.q.data() + 256 * b, block.qs, 256);
            for (size_t j = 0; j < 8; ++j) a.d[8 * b + j] = block.d;
            for (size_t j = 0; j < 16; ++j) a.sum16[16 * b + j] = block.bsums[j];
        }
        return a;
    }
    const size_t block_bytes = act == GgmlType::q8_1 ? 36 : 34;
    for (size_t b = 0; b < n / 32; ++b) {
        const uint8_t* p = blocks.data() + b * block_bytes;
        uint16_t d = 0, s = 0;
        std::memcpy(&d, p, 2);
        a.d[b] = f16_to_f32(d);
        if (act == GgmlType::q8_1) {
            std::memcpy(&s, p + 2, 2);
            a.s[b] = f16_to_f32(s);
        }
        std::memcpy(a.q.data() + 32 * b, p + block_bytes - 32, 32);
        for (size_t h = 0; h < 2; ++h) {
            int sum = 0;
            for (size_t i = 0; i < 16; ++i) sum += a.q[32 * b + 16 * h + i];
            a.sum16[2 * b + h] = sum;
        }
    }
    return a;
}

// Rows of activations that exercise the rounding: random values, a block whose largest
// magnitude appears twice with opposite signs (Q8_K takes the first), values on exact
// halves of the scale, and a block of zeros.
std::vector<float> activation_rows(int64_t in, int n_tokens, std::mt19937& rng) {
    std::vector<float> x;
    for (int t = 0; t < n_tokens; ++t) {
        std::vector<float> row = uniform(static_cast<size_t>(in), -2.0f, 2.0f, rng);
        if (t == 1) {
            row[3] = -3.0f;
            row[200] = 3.0f;
            for (int i = 32; i < 64; ++i) row[static_cast<size_t>(i)] = static_cast<float>(i - 48) * 0.5f;
        }
        if (t == 2) {
            for (int i = 0; i < std::min<int64_t>(in, 256); ++i) row[static_cast<size_t>(i)] = 0.0f;
        }
        x.insert(x.end(), row.begin(), row.end());
    }
    return x;
}

class Q8Activations : public GpuTest, public ::testing::WithParamInterface<GgmlType> {};

TEST_P(Q8Activations, AreTheCpuEnginesBytes) {
    const GgmlType type = GetParam();
    std::mt19937 rng(77u + static_cast<uint32_t>(type));
    for (const int64_t in : {int64_t{512}, int64_t{4352}}) {
        const int n_tokens = 3;
        const std::vector<float> x = activation_rows(in, n_tokens, rng);
        const size_t stride = ph_q8_activation_bytes(in) + 16;  // a gap between tokens
        DeviceArray<float> x_dev(x);
        DeviceArray<uint8_t> act_dev(std::vector<uint8_t>(stride * n_tokens, 0xAB));
        ASSERT_TRUE(ran(ph_quantize_activations(type_id(type), x_dev.get(), in, in, n_tokens, act_dev.get(), stride,
                                                nullptr)));
        const std::vector<uint8_t> bytes = act_dev.download();
        for (int t = 0; t < n_tokens; ++t) {
            SCOPED_TRACE("in " + std::to_string(in) + ", token " + std::to_string(t));
            std::vector<uint8_t> blocks(cpu::activation_bytes(type, in));
            cpu::quantize_activations(cpu::KernelIsa::scalar, type, x.data() + t * in, blocks.data(), in);
            const GpuAct want = from_cpu(type, blocks, in);
            const GpuAct got = unpack(bytes, static_cast<size_t>(t) * stride, in);
            EXPECT_EQ(got.q, want.q);
            EXPECT_EQ(got.d, want.d);
            EXPECT_EQ(got.sum16, want.sum16);
            if (cpu::activation_type(type) == GgmlType::q8_1) {
                EXPECT_EQ(got.s, want.s);
            }
            for (size_t i = ph_q8_activation_bytes(in); i < stride; ++i) {
                ASSERT_EQ(bytes[static_cast<size_t>(t) * stride + i], 0xAB) << "written past the token's bytes";
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(QuantizedTypes, Q8Activations, ::testing::ValuesIn(kQ8Types), type_name);

class MatmulQ8Kernel : public GpuTest, public ::testing::WithParamInterface<GgmlType> {};

TEST_P(MatmulQ8Kernel, MatchesTheCpuEnginesDotProducts) {
    const GgmlType type = GetParam();
    const TypeTraits& traits = type_traits(type);
    const auto bs = static_cast<int64_t>(traits.block_size);
    const int64_t rows = 37;  // four rows per thread block: not a multiple of it
    std::mt19937 rng(5151u + static_cast<uint32_t>(type));
    for (const int64_t in : {std::max<int64_t>(2 * bs, 256), int64_t{4352}}) {
        // Packed rows, and the column slice of a wider matrix that tensor split gives a
        // rank: rows row_stride apart, starting one block in (rows of Q4_0 then start at
        // an odd multiple of 2 bytes, MXFP4 at any byte).
        for (const bool slice : {false, true}) {
            const int64_t cut = slice ? bs : 0;
            const int64_t full = in + 2 * cut;
            const size_t row_stride = row_bytes(traits, static_cast<uint64_t>(full));
            const size_t offset = row_bytes(traits, static_cast<uint64_t>(cut));
            std::vector<uint8_t> w(row_stride * rows);
            std::vector<float> decoded(static_cast<size_t>(rows * in));
            for (int64_t r = 0; r < rows; ++r) {
                const std::vector<float> values = uniform(static_cast<size_t>(full), -1.0f, 1.0f, rng);
                uint8_t* row = w.data() + static_cast<size_t>(r) * row_stride;
                quantize_row(type, values.data(), row, full);
                dequantize_row(type, row + offset, decoded.data() + r * in, in);
            }
            DeviceArray<uint8_t> w_dev(w);
            ASSERT_EQ(ph_matmul_q8_usable(type_id(type), w_dev.get() + offset, row_stride), 1);
            for (const int n_tokens : {1, 3, 8, 13}) {
                SCOPED_TRACE("in " + std::to_string(in) + (slice ? ", column slice" : ", packed") + ", " +
                             std::to_string(n_tokens) + " tokens");
                const std::vector<float> x = activation_rows(in, n_tokens, rng);
                const size_t act_stride = ph_q8_activation_bytes(in);
                DeviceArray<float> x_dev(x);
                DeviceArray<uint8_t> act_dev(act_stride * static_cast<size_t>(n_tokens));
                const int64_t y_stride = rows + 5;
                const float sentinel = 1234.5f;
                DeviceArray<float> y_dev(std::vector<float>(static_cast<size_t>(n_tokens * y_stride), sentinel));
                ASSERT_TRUE(ran(ph_quantize_activations(type_id(type), x_dev.get(), in, in, n_tokens, act_dev.get(),
                                                        act_stride, nullptr)));
                ASSERT_TRUE(ran(ph_matmul_q8(type_id(type), w_dev.get() + offset, row_stride, rows, in, act_dev.get(),
                                             act_stride, n_tokens, y_dev.get(), y_stride, nullptr)));
                const std::vector<float> y = y_dev.download();

                // The CPU engine on the same rows and activations.
                const size_t cpu_act_bytes = cpu::activation_bytes(type, in);
                std::vector<uint8_t> cpu_act(cpu_act_bytes * static_cast<size_t>(n_tokens));
                for (int t = 0; t < n_tokens; ++t) {
                    cpu::quantize_activations(cpu::KernelIsa::scalar, type, x.data() + t * in,
                                              cpu_act.data() + cpu_act_bytes * static_cast<size_t>(t), in);
                }
                std::vector<float> want(static_cast<size_t>(n_tokens * rows));
                cpu::dot_rows(cpu::KernelIsa::scalar, type, in, w.data() + offset, row_stride, static_cast<int>(rows),
                              cpu_act.data(), cpu_act_bytes, n_tokens, want.data(), static_cast<size_t>(rows));

                std::vector<double> expected, tolerance;
                std::vector<float> actual;
                for (int t = 0; t < n_tokens; ++t) {
                    for (int64_t r = 0; r < y_stride; ++r) {
                        const float got = y[static_cast<size_t>(t * y_stride + r)];
                        if (r >= rows) {
                            ASSERT_EQ(got, sentinel) << "y written outside its rows: token " << t << ", element " << r;
                            continue;
                        }
                        double magnitude = 0;
                        for (int64_t i = 0; i < in; ++i) {
                            magnitude += std::fabs(static_cast<double>(decoded[static_cast<size_t>(r * in + i)]) *
                                                   static_cast<double>(x[static_cast<size_t>(t * in + i)]));
                        }
                        expected.push_back(want[static_cast<size_t>(t * rows + r)]);
                        tolerance.push_back(1e-5 * magnitude + 1e-6);
                        actual.push_back(got);
                    }
                }
                EXPECT_TRUE(all_close(expected, actual, tolerance));
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(QuantizedTypes, MatmulQ8Kernel, ::testing::ValuesIn(kQ8Types), type_name);

// Without a GPU too: what the launchers refuse before touching the device.
TEST(MatmulQ8Arguments, RefusedBeforeAnyLaunch) {
    const uint32_t q4_k = type_id(GgmlType::q4_k);
    const uint32_t q4_1 = type_id(GgmlType::q4_1);
    alignas(16) static uint8_t bytes[1024];
    float* y = reinterpret_cast<float*>(bytes);
    const float* x = reinterpret_cast<const float*>(bytes);
    const size_t stride = ph_q8_activation_bytes(256);
    EXPECT_EQ(stride, 384u);
    EXPECT_EQ(ph_q8_activation_bytes(0), 0u);
    // Float types and unknown ids have no 8-bit path.
    EXPECT_EQ(ph_matmul_q8_usable(type_id(GgmlType::f16), bytes, 512), 0);
    EXPECT_EQ(ph_matmul_q8_usable(9999, bytes, 512), 0);
    // Alignment: Q4_1's 4-byte loads, MXFP4's byte loads.
    EXPECT_EQ(ph_matmul_q8_usable(q4_1, bytes + 2, 40), 0);
    EXPECT_EQ(ph_matmul_q8_usable(q4_1, bytes, 42), 0);
    EXPECT_EQ(ph_matmul_q8_usable(q4_1, bytes + 4, 40), 1);
    EXPECT_EQ(ph_matmul_q8_usable(type_id(GgmlType::mxfp4), bytes + 1, 17), 1);
    // A K-quant's activations come in blocks of 256; the stride must hold a token, in
    // 16-byte steps, and the activations must be 16-byte aligned.
    EXPECT_NE(ph_quantize_activations(q4_k, x, 288, 288, 1, bytes, 448, nullptr), 0);
    EXPECT_NE(ph_quantize_activations(q4_k, x, 256, 256, 1, bytes, stride - 16, nullptr), 0);
    EXPECT_NE(ph_quantize_activations(q4_k, x, 256, 256, 1, bytes, stride + 8, nullptr), 0);
    EXPECT_NE(ph_quantize_activations(q4_k, x, 256, 256, 1, bytes + 8, stride, nullptr), 0);
    EXPECT_NE(ph_quantize_activations(q4_k, nullptr, 256, 256, 1, bytes, stride, nullptr), 0);
    EXPECT_NE(ph_quantize_activations(q4_k, x, 255, 256, 1, bytes, stride, nullptr), 0);
    EXPECT_NE(ph_quantize_activations(type_id(GgmlType::f32), x, 256, 256, 1, bytes, stride, nullptr), 0);
    EXPECT_NE(ph_matmul_q8(q4_k, bytes, 144, 1, 256, bytes, stride, 1, nullptr, 1, nullptr), 0);
    EXPECT_NE(ph_matmul_q8(q4_k, bytes, 144, 4, 256, bytes, stride, 1, y, 3, nullptr), 0);
    EXPECT_NE(ph_matmul_q8(q4_k, bytes, 144, 1, 288, bytes, stride, 1, y, 1, nullptr), 0);
    EXPECT_NE(ph_matmul_q8(q4_1, bytes + 2, 40, 1, 64, bytes, stride, 1, y, 1, nullptr), 0);
    EXPECT_NE(ph_matmul_q8(q4_k, bytes, 144, -1, 256, bytes, stride, 1, y, 1, nullptr), 0);
    // Nothing to do is no error and touches nothing.
    EXPECT_EQ(ph_matmul_q8(q4_k, bytes, 144, 0, 256, bytes, stride, 1, y, 1, nullptr), 0);
    EXPECT_EQ(ph_quantize_activations(q4_k, x, 256, 256, 0, bytes, stride, nullptr), 0);
}

}  // namespace

}  // namespace powerhouse
