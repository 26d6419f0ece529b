// The 8-bit activation path of the decode products (kernels/matmul_q8.cu) against the CPU
// engine (backend/cpu/quant_dot.h), which is itself checked against llama.cpp:
//  - ph_quantize_activations writes exactly the CPU's activation blocks (Q8_0 values and
//    f16 scales, Q8_1's sums, Q8_K's values, scales and sums per 16), on random rows, rows
//    with ties for the largest magnitude, and zero blocks;
//  - ph_matmul_q8 for every quantized type against cpu::dot_rows on the same activations:
//    the integer sums per block are exact on both sides, so only the order of the float
//    additions differs (tolerance: 1e-5 of the sum of |products|); rows cut from a wider
//    matrix and strided outputs, 1 to 13 tokens;
//  - the argument checks, which run without a GPU;
//  - the wide kernel's lanes (matvec_lanes.cuh) run lane by lane on the CPU: every lane's
//    share of each span of 256 weights, summed as a warp sums them, against cpu::dot_rows,
//    with the rows of the types that start blocks at any even byte at every even
//    misalignment; no GPU needed (WideLanes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/quant_dot.h"
#include "kernels/gpu_test.h"
#include "kernels/kernel_test_support.h"
#include "matvec_lanes.cuh"
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
    // Widths of whole spans of 256 (the wide kernel, for the types that have it) and, for the
    // blocks of 32, one that is not (the per-chunk kernel).
    for (const int64_t in : {std::max<int64_t>(2 * bs, 256), int64_t{4352}, bs == 32 ? int64_t{4128} : int64_t{512}}) {
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
    // The fused launchers: a residual to add, a gate that exists, whole activation blocks.
    EXPECT_NE(ph_matmul_q8_residual(q4_k, bytes, 144, 1, 256, bytes, stride, 1, y, 1, nullptr, nullptr), 0);
    EXPECT_NE(ph_gate_quantize(q4_k, 7, x, x, y, 256, 1, bytes, stride, nullptr), 0);
    EXPECT_NE(ph_gate_quantize(q4_k, PH_GATE_SILU, x, nullptr, y, 256, 1, bytes, stride, nullptr), 0);
    EXPECT_NE(ph_rms_norm_quantize(q4_k, x, y, x, 288, 1, 1e-5f, bytes, 448, nullptr), 0);
    EXPECT_NE(ph_rms_norm_quantize(q4_k, x, y, nullptr, 256, 1, 1e-5f, bytes, stride, nullptr), 0);
    EXPECT_NE(ph_rms_norm_quantize(type_id(GgmlType::f16), x, y, x, 256, 1, 1e-5f, bytes, stride, nullptr), 0);
    // A set: one to PH_MAX_PRODUCTS products, each with a matrix and an output.
    const PhProduct good{bytes, 144, 1, y, 1, nullptr};
    const PhProduct sets[PH_MAX_PRODUCTS + 1] = {good, good, good, good};
    EXPECT_NE(ph_matmul_q8_set(q4_k, sets, 0, 256, bytes, stride, 1, nullptr), 0);
    EXPECT_NE(ph_matmul_q8_set(q4_k, sets, PH_MAX_PRODUCTS + 1, 256, bytes, stride, 1, nullptr), 0);
    EXPECT_NE(ph_matmul_q8_set(q4_k, nullptr, 1, 256, bytes, stride, 1, nullptr), 0);
    const PhProduct no_output[2] = {good, PhProduct{bytes, 144, 1, nullptr, 1, nullptr}};
    EXPECT_NE(ph_matmul_q8_set(q4_k, no_output, 2, 256, bytes, stride, 1, nullptr), 0);
    // Nothing to do is no error and touches nothing.
    EXPECT_EQ(ph_matmul_q8(q4_k, bytes, 144, 0, 256, bytes, stride, 1, y, 1, nullptr), 0);
    EXPECT_EQ(ph_rms_norm_quantize(q4_k, x, y, x, 256, 0, 1e-5f, bytes, stride, nullptr), 0);
    EXPECT_EQ(ph_quantize_activations(q4_k, x, 256, 256, 0, bytes, stride, nullptr), 0);
}

// --- Fused launches: the unfused launches' bits ------------------------------------------

// Floats as their bits, so that equality is bit equality (and NaN equals itself).
std::vector<uint32_t> bits_of(const std::vector<float>& v) {
    std::vector<uint32_t> out(v.size());
    std::memcpy(out.data(), v.data(), v.size() * 4);
    return out;
}

class FusedLaunches : public GpuTest {};

TEST_F(FusedLaunches, NormAndQuantizeEqualTheTwoLaunches) {
    std::mt19937 rng(909u);
    // 8448: wider than one read per thread (8192), the norm's second path.
    for (const GgmlType type : {GgmlType::q4_k, GgmlType::q8_0, GgmlType::q4_1}) {
        for (const int64_t in : {int64_t{256}, int64_t{4096}, int64_t{8448}}) {
            SCOPED_TRACE(std::string(type_traits(type).name) + ", width " + std::to_string(in));
            const int n_tokens = 3;
            const std::vector<float> x = uniform(static_cast<size_t>(in * n_tokens), -3.0f, 3.0f, rng);
            const std::vector<float> weight = uniform(static_cast<size_t>(in), 0.5f, 1.5f, rng);
            const size_t stride = ph_q8_activation_bytes(in);
            DeviceArray<float> x_dev(x), w_dev(weight);
            DeviceArray<float> y_two(x.size()), y_one(x.size());
            DeviceArray<uint8_t> act_two(stride * n_tokens), act_one(stride * n_tokens);
            ASSERT_TRUE(ran(ph_rms_norm(x_dev.get(), y_two.get(), w_dev.get(), in, n_tokens, 1e-5f, nullptr)));
            ASSERT_TRUE(ran(ph_quantize_activations(type_id(type), y_two.get(), in, in, n_tokens, act_two.get(),
                                                    stride, nullptr)));
            ASSERT_TRUE(ran(ph_rms_norm_quantize(type_id(type), x_dev.get(), y_one.get(), w_dev.get(), in, n_tokens,
                                                 1e-5f, act_one.get(), stride, nullptr)));
            EXPECT_EQ(bits_of(y_one.download()), bits_of(y_two.download()));
            EXPECT_TRUE(test::same_bytes(act_two.download(), act_one.download(), stride));
        }
    }
}

TEST_F(FusedLaunches, GateAndQuantizeEqualTheTwoLaunches) {
    std::mt19937 rng(910u);
    for (const int gate : {PH_GATE_SILU, PH_GATE_GELU}) {
        for (const GgmlType type : {GgmlType::q6_k, GgmlType::q4_0}) {
            const int64_t in = 1536;
            const int n_tokens = 5;
            SCOPED_TRACE(std::string(type_traits(type).name) + (gate == PH_GATE_SILU ? ", SwiGLU" : ", GeGLU"));
            std::vector<float> a = uniform(static_cast<size_t>(in * n_tokens), -12.0f, 12.0f, rng);
            const std::vector<float> b = uniform(a.size(), -2.0f, 2.0f, rng);
            a[7] = -10.0f;  // GeGLU's cut-offs
            a[8] = 10.0f;
            const size_t stride = ph_q8_activation_bytes(in);
            DeviceArray<float> a_dev(a), b_dev(b), y_two(a.size()), y_one(a.size());
            DeviceArray<uint8_t> act_two(stride * n_tokens), act_one(stride * n_tokens);
            const int64_t count = in * n_tokens;
            ASSERT_TRUE(ran(gate == PH_GATE_SILU ? ph_swiglu(a_dev.get(), b_dev.get(), y_two.get(), count, nullptr)
                                                 : ph_geglu(a_dev.get(), b_dev.get(), y_two.get(), count, nullptr)));
            ASSERT_TRUE(ran(ph_quantize_activations(type_id(type), y_two.get(), in, in, n_tokens, act_two.get(),
                                                    stride, nullptr)));
            ASSERT_TRUE(ran(ph_gate_quantize(type_id(type), gate, a_dev.get(), b_dev.get(), y_one.get(), in, n_tokens,
                                             act_one.get(), stride, nullptr)));
            EXPECT_EQ(bits_of(y_one.download()), bits_of(y_two.download()));
            EXPECT_TRUE(test::same_bytes(act_two.download(), act_one.download(), stride));
        }
    }
}

TEST_F(FusedLaunches, ProductWithResidualEqualsProductThenAdd) {
    std::mt19937 rng(911u);
    // Q4_K, Q6_K and Q4_0 take the wide kernel; Q5_0 (no wide lanes) the per-chunk one.
    for (const GgmlType type : {GgmlType::q4_k, GgmlType::q6_k, GgmlType::q4_0, GgmlType::q5_0}) {
        const TypeTraits& traits = type_traits(type);
        const int64_t rows = 67, in = 1024;
        const size_t row_stride = row_bytes(traits, static_cast<uint64_t>(in));
        std::vector<uint8_t> w(row_stride * rows);
        for (int64_t r = 0; r < rows; ++r) {
            const std::vector<float> values = uniform(static_cast<size_t>(in), -1.0f, 1.0f, rng);
            quantize_row(type, values.data(), w.data() + static_cast<size_t>(r) * row_stride, in);
        }
        DeviceArray<uint8_t> w_dev(w);
        for (const int n_tokens : {1, 3}) {
            SCOPED_TRACE(std::string(traits.name) + ", " + std::to_string(n_tokens) + " tokens");
            const std::vector<float> x = activation_rows(in, n_tokens, rng);
            const std::vector<float> residual = uniform(static_cast<size_t>(rows * n_tokens), -4.0f, 4.0f, rng);
            const size_t stride = ph_q8_activation_bytes(in);
            DeviceArray<float> x_dev(x);
            DeviceArray<uint8_t> act(stride * static_cast<size_t>(n_tokens));
            ASSERT_TRUE(ran(ph_quantize_activations(type_id(type), x_dev.get(), in, in, n_tokens, act.get(), stride,
                                                    nullptr)));
            // Two launches: the product into tmp, then residual + tmp.
            DeviceArray<float> tmp(residual.size()), two(residual);
            ASSERT_TRUE(ran(ph_matmul_q8(type_id(type), w_dev.get(), row_stride, rows, in, act.get(), stride, n_tokens,
                                         tmp.get(), rows, nullptr)));
            ASSERT_TRUE(ran(ph_add(two.get(), tmp.get(), two.get(), rows * n_tokens, nullptr)));
            // One, in place (the residual is y), and into another buffer.
            DeviceArray<float> in_place(residual), apart(residual.size()), kept(residual);
            ASSERT_TRUE(ran(ph_matmul_q8_residual(type_id(type), w_dev.get(), row_stride, rows, in, act.get(), stride,
                                                  n_tokens, in_place.get(), rows, in_place.get(), nullptr)));
            ASSERT_TRUE(ran(ph_matmul_q8_residual(type_id(type), w_dev.get(), row_stride, rows, in, act.get(), stride,
                                                  n_tokens, apart.get(), rows, kept.get(), nullptr)));
            const std::vector<uint32_t> want = bits_of(two.download());
            EXPECT_EQ(bits_of(in_place.download()), want);
            EXPECT_EQ(bits_of(apart.download()), want);
            EXPECT_EQ(bits_of(kept.download()), bits_of(residual)) << "the residual was written";
        }
    }
}

TEST_F(FusedLaunches, ProductsOfOneInputInOneLaunchEqualTheirOwnLaunches) {
    std::mt19937 rng(913u);
    // Q4_K, Q6_K and Q8_0: the wide kernel (odd row counts leave a warp one row); Q5_0 (no
    // wide lanes): the per-chunk one.
    for (const GgmlType type : {GgmlType::q4_k, GgmlType::q6_k, GgmlType::q8_0, GgmlType::q5_0}) {
        const TypeTraits& traits = type_traits(type);
        const int64_t in = 512;
        const size_t row_stride = row_bytes(traits, static_cast<uint64_t>(in));
        const int64_t rows[3] = {40, 13, 7};
        std::vector<DeviceArray<uint8_t>> weights;
        for (const int64_t r : rows) {
            std::vector<uint8_t> w(row_stride * static_cast<size_t>(r));
            for (int64_t i = 0; i < r; ++i) {
                const std::vector<float> values = uniform(static_cast<size_t>(in), -1.0f, 1.0f, rng);
                quantize_row(type, values.data(), w.data() + static_cast<size_t>(i) * row_stride, in);
            }
            weights.emplace_back(w);
        }
        for (const int n_tokens : {1, 2, 9}) {
            SCOPED_TRACE(std::string(traits.name) + ", " + std::to_string(n_tokens) + " tokens");
            const std::vector<float> x = activation_rows(in, n_tokens, rng);
            const size_t stride = ph_q8_activation_bytes(in);
            DeviceArray<float> x_dev(x);
            DeviceArray<uint8_t> act(stride * static_cast<size_t>(n_tokens));
            ASSERT_TRUE(ran(ph_quantize_activations(type_id(type), x_dev.get(), in, in, n_tokens, act.get(), stride,
                                                    nullptr)));
            // The third adds a residual.
            const std::vector<float> residual = uniform(static_cast<size_t>(rows[2] * n_tokens), -2.0f, 2.0f, rng);
            std::vector<DeviceArray<float>> alone, together;
            for (int m = 0; m < 3; ++m) {
                const auto size = static_cast<size_t>(rows[m] * n_tokens);
                alone.emplace_back(m == 2 ? residual : std::vector<float>(size, 0.0f));
                together.emplace_back(m == 2 ? residual : std::vector<float>(size, 0.0f));
            }
            DeviceArray<float> res_dev(residual);
            PhProduct set[3];
            for (int m = 0; m < 3; ++m) {
                const auto um = static_cast<size_t>(m);
                const float* add = m == 2 ? res_dev.get() : nullptr;
                ASSERT_TRUE(ran(add != nullptr
                                    ? ph_matmul_q8_residual(type_id(type), weights[um].get(), row_stride, rows[m], in,
                                                            act.get(), stride, n_tokens, alone[um].get(), rows[m], add,
                                                            nullptr)
                                    : ph_matmul_q8(type_id(type), weights[um].get(), row_stride, rows[m], in,
                                                   act.get(), stride, n_tokens, alone[um].get(), rows[m], nullptr)));
                set[m] = PhProduct{weights[um].get(), row_stride, rows[m], together[um].get(), rows[m], add};
            }
            ASSERT_TRUE(ran(ph_matmul_q8_set(type_id(type), set, 3, in, act.get(), stride, n_tokens, nullptr)));
            for (size_t m = 0; m < 3; ++m) {
                EXPECT_EQ(bits_of(together[m].download()), bits_of(alone[m].download())) << "product " << m;
            }
        }
    }
}

// Rows off the wide kernel's 16-byte alignment take the per-chunk kernel (every type with
// wide lanes but Q6_K): the same result.
TEST_F(FusedLaunches, RowsOffSixteenBytesGiveTheSameProduct) {
    std::mt19937 rng(912u);
    for (const GgmlType type : {GgmlType::q4_k, GgmlType::q5_k, GgmlType::q8_0, GgmlType::q4_0, GgmlType::q4_1}) {
        const TypeTraits& traits = type_traits(type);
        const int64_t rows = 9, in = 768;
        const size_t row_stride = row_bytes(traits, static_cast<uint64_t>(in));
        std::vector<uint8_t> w(row_stride * rows + 4);
        for (int64_t r = 0; r < rows; ++r) {
            const std::vector<float> values = uniform(static_cast<size_t>(in), -1.0f, 1.0f, rng);
            quantize_row(type, values.data(), w.data() + 4 + static_cast<size_t>(r) * row_stride, in);
        }
        DeviceArray<uint8_t> w_dev(w);
        const std::vector<float> x = activation_rows(in, 1, rng);
        const size_t stride = ph_q8_activation_bytes(in);
        DeviceArray<float> x_dev(x);
        DeviceArray<uint8_t> act(stride);
        ASSERT_TRUE(ran(ph_quantize_activations(type_id(type), x_dev.get(), in, in, 1, act.get(), stride, nullptr)));
        DeviceArray<float> y(static_cast<size_t>(rows));
        ASSERT_EQ(ph_matmul_q8_usable(type_id(type), w_dev.get() + 4, row_stride), 1);
        ASSERT_TRUE(ran(ph_matmul_q8(type_id(type), w_dev.get() + 4, row_stride, rows, in, act.get(), stride, 1,
                                     y.get(), rows, nullptr)));
        std::vector<uint8_t> cpu_act(cpu::activation_bytes(type, in));
        cpu::quantize_activations(cpu::KernelIsa::scalar, type, x.data(), cpu_act.data(), in);
        std::vector<float> want(static_cast<size_t>(rows));
        cpu::dot_rows(cpu::KernelIsa::scalar, type, in, w.data() + 4, row_stride, static_cast<int>(rows),
                      cpu_act.data(), cpu_act.size(), 1, want.data(), static_cast<size_t>(rows));
        const std::vector<float> got = y.download();
        for (int64_t r = 0; r < rows; ++r) {
            EXPECT_NEAR(got[static_cast<size_t>(r)], want[static_cast<size_t>(r)],
                        1e-4 * (std::fabs(want[static_cast<size_t>(r)]) + 1.0))
                << traits.name << " row " << r;
        }
    }
}

// A set whose rows differ in 16-byte alignment: alone, the aligned products take the wide
// kernel and the other the per-chunk one, so the set launches each alone and every product
// keeps its own launch's bits.
TEST_F(FusedLaunches, ASetOfMixedAlignmentEqualsItsProductsAlone) {
    std::mt19937 rng(914u);
    for (const GgmlType type : {GgmlType::q4_k, GgmlType::q8_0}) {
        const TypeTraits& traits = type_traits(type);
        const int64_t in = 768;
        const size_t row_stride = row_bytes(traits, static_cast<uint64_t>(in));
        const int64_t rows[3] = {9, 5, 3};
        const size_t offset[3] = {0, 4, 0};  // the second product's rows start 4 bytes off 16
        std::vector<DeviceArray<uint8_t>> weights;
        for (int m = 0; m < 3; ++m) {
            std::vector<uint8_t> w(offset[m] + row_stride * static_cast<size_t>(rows[m]));
            for (int64_t r = 0; r < rows[m]; ++r) {
                const std::vector<float> values = uniform(static_cast<size_t>(in), -1.0f, 1.0f, rng);
                quantize_row(type, values.data(), w.data() + offset[m] + static_cast<size_t>(r) * row_stride, in);
            }
            weights.emplace_back(w);
        }
        for (const int n_tokens : {1, 3}) {
            SCOPED_TRACE(std::string(traits.name) + ", " + std::to_string(n_tokens) + " tokens");
            const std::vector<float> x = activation_rows(in, n_tokens, rng);
            const size_t stride = ph_q8_activation_bytes(in);
            DeviceArray<float> x_dev(x);
            DeviceArray<uint8_t> act(stride * static_cast<size_t>(n_tokens));
            ASSERT_TRUE(
                ran(ph_quantize_activations(type_id(type), x_dev.get(), in, in, n_tokens, act.get(), stride, nullptr)));
            std::vector<DeviceArray<float>> alone, together;
            PhProduct set[3];
            for (int m = 0; m < 3; ++m) {
                const auto um = static_cast<size_t>(m);
                const auto size = static_cast<size_t>(rows[m] * n_tokens);
                alone.emplace_back(std::vector<float>(size, 0.0f));
                together.emplace_back(std::vector<float>(size, 0.0f));
                const uint8_t* w = weights[um].get() + offset[m];
                ASSERT_TRUE(ran(ph_matmul_q8(type_id(type), w, row_stride, rows[m], in, act.get(), stride, n_tokens,
                                             alone[um].get(), rows[m], nullptr)));
                set[m] = PhProduct{w, row_stride, rows[m], together[um].get(), rows[m], nullptr};
            }
            ASSERT_TRUE(ran(ph_matmul_q8_set(type_id(type), set, 3, in, act.get(), stride, n_tokens, nullptr)));
            for (size_t m = 0; m < 3; ++m) {
                EXPECT_EQ(bits_of(together[m].download()), bits_of(alone[m].download())) << "product " << m;
            }
            // A bad product anywhere in such a set: an error, and no product was launched.
            DeviceArray<float> untouched(std::vector<float>(static_cast<size_t>(rows[0] * n_tokens), 7.0f));
            set[0].y = untouched.get();
            set[2].y = nullptr;
            EXPECT_NE(ph_matmul_q8_set(type_id(type), set, 3, in, act.get(), stride, n_tokens, nullptr), 0);
            ASSERT_TRUE(static_cast<bool>(cuda::cuda_synchronize()));
            EXPECT_EQ(untouched.download(), std::vector<float>(static_cast<size_t>(rows[0] * n_tokens), 7.0f));
        }
    }
}

// --- The wide kernel's lanes on the CPU ----------------------------------------------------

// Storage that starts 16-byte aligned, as cudaMalloc's does: load16_a2 reads the aligned
// sixteen bytes around what it loads.
struct alignas(16) Aligned16 {
    uint8_t bytes[16];
};

uint8_t* aligned_bytes(std::vector<Aligned16>& storage, size_t n) {
    storage.assign((n + 15) / 16 + 1, Aligned16{});
    return storage.front().bytes;
}

TEST(WideLanes, Load16A2ShiftsEveryEvenOffset) {
    std::vector<Aligned16> storage;
    uint8_t* bytes = aligned_bytes(storage, 64);
    for (int i = 0; i < 64; ++i) bytes[i] = static_cast<uint8_t>(3 * i + 1);
    for (int off = 0; off <= 30; off += 2) {
        const kernels::lanes::Bytes16 got = kernels::lanes::load16_a2(bytes + off);
        uint8_t want[16];
        std::memcpy(want, bytes + off, 16);
        EXPECT_EQ(std::memcmp(got.w, want, 16), 0) << "offset " << off;
    }
}

// One row's product as the wide kernel computes it: lane l of the warp takes spans of 256
// weights l / 8, l / 8 + 4, ... with its piece j = l % 8 of each; the lanes' sums are then
// added as __shfl_xor_sync's butterfly adds them.
template <class L>
float wide_row(const uint8_t* row, const uint8_t* act, int64_t in) {
    const int64_t spans = in / 256;
    float lanes_sum[32] = {};
    for (int lane = 0; lane < 32; ++lane) {
        const int j = lane % 8;
        for (int64_t b = lane / 8; b < spans; b += 4) {
            const kernels::lanes::LaneWeights w = L::load(row + b * L::kBlockBytes, j);
            const kernels::lanes::LaneAct a = kernels::lanes::load_act<L>(act, in, b, j);
            lanes_sum[lane] += L::dot(w, a);
        }
    }
    for (int o = 16; o > 0; o /= 2) {
        float next[32];
        for (int lane = 0; lane < 32; ++lane) next[lane] = lanes_sum[lane] + lanes_sum[lane ^ o];
        std::copy(next, next + 32, lanes_sum);
    }
    return lanes_sum[0];
}

template <class L>
void check_wide_lanes(GgmlType type, size_t misalign) {
    const TypeTraits& traits = type_traits(type);
    std::mt19937 rng(404u + static_cast<uint32_t>(type) + static_cast<uint32_t>(misalign));
    const int64_t rows = 5;
    for (const int64_t in : {int64_t{256}, int64_t{1280}, int64_t{4352}}) {
        SCOPED_TRACE(std::string(traits.name) + ", in " + std::to_string(in) + ", rows " + std::to_string(misalign) +
                     " bytes past 16-byte alignment");
        const size_t row_stride = row_bytes(traits, static_cast<uint64_t>(in));
        std::vector<Aligned16> w_storage;
        uint8_t* w = aligned_bytes(w_storage, misalign + row_stride * rows) + misalign;
        std::vector<float> decoded(static_cast<size_t>(rows * in));
        for (int64_t r = 0; r < rows; ++r) {
            const std::vector<float> values = uniform(static_cast<size_t>(in), -1.0f, 1.0f, rng);
            quantize_row(type, values.data(), w + static_cast<size_t>(r) * row_stride, in);
            dequantize_row(type, w + static_cast<size_t>(r) * row_stride, decoded.data() + r * in, in);
        }
        const std::vector<float> x = activation_rows(in, 3, rng);
        const size_t cpu_bytes = cpu::activation_bytes(type, in);
        for (int t = 0; t < 3; ++t) {
            std::vector<uint8_t> blocks(cpu_bytes);
            cpu::quantize_activations(cpu::KernelIsa::scalar, type, x.data() + t * in, blocks.data(), in);
            // The GPU's activation layout of the same blocks.
            const GpuAct a = from_cpu(type, blocks, in);
            std::vector<Aligned16> act_storage;
            uint8_t* act = aligned_bytes(act_storage, ph_q8_activation_bytes(in));
            std::memcpy(act, a.q.data(), a.q.size());
            std::memcpy(act + in, a.d.data(), a.d.size() * 4);
            std::memcpy(act + in + in / 8, a.s.data(), a.s.size() * 4);
            std::memcpy(act + in + in / 4, a.sum16.data(), a.sum16.size() * 4);
            std::vector<float> want(static_cast<size_t>(rows));
            cpu::dot_rows(cpu::KernelIsa::scalar, type, in, w, row_stride, static_cast<int>(rows), blocks.data(),
                          cpu_bytes, 1, want.data(), static_cast<size_t>(rows));
            for (int64_t r = 0; r < rows; ++r) {
                double magnitude = 0;
                for (int64_t i = 0; i < in; ++i) {
                    magnitude += std::fabs(static_cast<double>(decoded[static_cast<size_t>(r * in + i)]) *
                                           static_cast<double>(x[static_cast<size_t>(t * in + i)]));
                }
                const float got = wide_row<L>(w + static_cast<size_t>(r) * row_stride, act, in);
                EXPECT_NEAR(got, want[static_cast<size_t>(r)], 1e-5 * magnitude + 1e-6)
                    << "token " << t << ", row " << r;
            }
        }
    }
}

TEST(WideLanes, Q4_KMatchesTheCpuEngine) {
    check_wide_lanes<kernels::lanes::Q4_KLanes>(GgmlType::q4_k, 0);
}

TEST(WideLanes, Q5_KMatchesTheCpuEngine) {
    check_wide_lanes<kernels::lanes::Q5_KLanes>(GgmlType::q5_k, 0);
}

// Q6_K's super-blocks start at any even byte: every even misalignment of the row. The blocks
// of 32 take the wide kernel for 16-byte aligned rows only; inside a span their blocks
// start at even bytes.
TEST(WideLanes, Q6_KMatchesTheCpuEngineAtEveryEvenMisalignment) {
    for (size_t misalign = 0; misalign < 16; misalign += 2) {
        check_wide_lanes<kernels::lanes::Q6_KLanes>(GgmlType::q6_k, misalign);
    }
}

TEST(WideLanes, Q8_0MatchesTheCpuEngine) {
    check_wide_lanes<kernels::lanes::Q8_0Lanes>(GgmlType::q8_0, 0);
}

TEST(WideLanes, Q4_0MatchesTheCpuEngine) {
    check_wide_lanes<kernels::lanes::Q4_0Lanes>(GgmlType::q4_0, 0);
}

TEST(WideLanes, Q4_1MatchesTheCpuEngine) {
    check_wide_lanes<kernels::lanes::Q4_1Lanes>(GgmlType::q4_1, 0);
}

}  // namespace

}  // namespace powerhouse
