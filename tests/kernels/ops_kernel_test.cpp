// The CUDA launchers of the decode step (kernels/powerhouse_kernels.h, after "Matrix
// products") against the engine's CPU code, called directly with device buffers:
//  - ph_matmul for every weight type against dequantize_row (tensor/dequantize.h) dotted
//    with the activations in double, rows cut from a wider matrix, strided x and y;
//  - ph_f32_to_f16 bit for bit against f32_to_f16 (tensor/half.h) on every f16 value, every
//    rounding tie and its neighbours, and random f32 bit patterns;
//  - ph_rms_norm, ph_swiglu against the CPU backend's plain kernels (backend/cpu/ops.h,
//    vec.h); ph_add, ph_scale, ph_add_bias (against cpu::scale and cpu::add_bias),
//    ph_accumulate exactly; ph_geglu against its formula in double, and against the CPU's
//    f16 GELU table (cpu::geglu) within the table's f16 rounding;
//  - ph_rope against the CPU backend's RoPE (cpu::rope, backend/cpu/ops.h), both layouts,
//    partial rotary, frequency factors, positions read from the device;
//  - ph_get_rows against dequantize_row, bit for bit;
//  - ph_argmax against a planted maximum, equal maxima, NaN and -inf.
// The KV cache and attention are in attention_kernel_test.cpp.
// Each tolerance is derived where it is used. Without a usable GPU these tests skip with
// the reason (gpu_test.h). The argument checks that every launcher (attention included)
// makes before touching the GPU run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/quant_dot.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/vec.h"
#include "backend/cuda/cuda_runtime.h"
#include "kernels/gpu_test.h"
#include "kernels/kernel_test_support.h"
#include "powerhouse/model_info.h"
#include "powerhouse_kernels.h"
#include "tensor/dequantize.h"
#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"

namespace powerhouse {

namespace {

using test::all_close;
using test::DeviceArray;
using test::GpuTest;
using test::ran;
using test::same_floats;
using test::type_id;
using test::uniform;

const std::vector<GgmlType>& kTypes = test::kKernelTypes;

// --- ph_matmul --------------------------------------------------------------------------------

class MatmulKernel : public GpuTest, public ::testing::WithParamInterface<GgmlType> {};

TEST_P(MatmulKernel, MatchesDequantizedRowsDottedInDouble) {
    const GgmlType type = GetParam();
    const TypeTraits& traits = type_traits(type);
    const auto bs = static_cast<int64_t>(traits.block_size);
    const int64_t rows = 37;  // one warp per row: not a multiple of any block of warps
    std::mt19937 rng(4242u + static_cast<uint32_t>(type));
    // 4608 is the one length whose MXFP4 rows (17-byte blocks) are whole 16-byte vectors,
    // so that MXFP4 also runs the staged kernel (the others take it at 1280 and 4352 too).
    for (const int64_t in : {2 * std::max<int64_t>(bs, 8), int64_t{1280}, int64_t{4352}, int64_t{4608}}) {
        // Each stored row holds `cut` elements, the `in` multiplied here, then `cut` more:
        // the column slice of a wider matrix that tensor split gives a rank (rows
        // row_stride apart, the slice starting `cut` elements in). Also the packed case.
        for (const bool slice : {false, true}) {
            const int64_t cut = slice ? (bs == 1 ? 8 : bs) : 0;
            const int64_t full = in + 2 * cut;
            const size_t row_stride = row_bytes(traits, static_cast<uint64_t>(full));
            const size_t offset = row_bytes(traits, static_cast<uint64_t>(cut));
            std::vector<uint8_t> w(row_stride * rows);
            std::vector<float> weights(static_cast<size_t>(rows * in));  // [rows][in] the decoded slice
            for (int64_t r = 0; r < rows; ++r) {
                const std::vector<float> values = uniform(static_cast<size_t>(full), -1.0f, 1.0f, rng);
                uint8_t* row = w.data() + static_cast<size_t>(r) * row_stride;
                quantize_row(type, values.data(), row, full);
                dequantize_row(type, row + offset, weights.data() + r * in, in);
            }
            DeviceArray<uint8_t> w_dev(w);
            for (const int n_tokens : {1, 3, 8, 13}) {
                SCOPED_TRACE("in " + std::to_string(in) + (slice ? ", column slice" : ", packed") + ", " +
                             std::to_string(n_tokens) + " tokens");
                // x: [n_tokens][x_stride], y: [n_tokens][y_stride]. The gaps of x hold NaN,
                // which would reach any output that read them; the gaps of y must keep
                // their sentinel.
                const int64_t x_stride = (in + 3) / 4 * 4 + 36;
                const int64_t y_stride = rows + 11;
                std::vector<float> x(static_cast<size_t>(n_tokens * x_stride), std::nanf(""));
                for (int t = 0; t < n_tokens; ++t) {
                    const std::vector<float> xt = uniform(static_cast<size_t>(in), -1.0f, 1.0f, rng);
                    std::copy(xt.begin(), xt.end(), x.begin() + t * x_stride);
                }
                const float sentinel = 1234.5f;
                DeviceArray<float> x_dev(x);
                DeviceArray<float> y_dev(std::vector<float>(static_cast<size_t>(n_tokens * y_stride), sentinel));
                ASSERT_TRUE(ran(ph_matmul(type_id(type), w_dev.get() + offset, row_stride, rows, in, x_dev.get(),
                                          x_stride, y_dev.get(), y_stride, n_tokens, nullptr)));
                const std::vector<float> y = y_dev.download();
                // The GPU sums f32 products with FMAs in its own order: its rounding error is
                // a few units of 2^-24 of the sum of |products|, far inside 1e-5 of it.
                std::vector<double> expected, tolerance;
                std::vector<float> actual;
                for (int t = 0; t < n_tokens; ++t) {
                    for (int64_t r = 0; r < y_stride; ++r) {
                        const float got = y[static_cast<size_t>(t * y_stride + r)];
                        if (r >= rows) {
                            ASSERT_EQ(got, sentinel) << "y written outside its rows: token " << t << ", element " << r;
                            continue;
                        }
                        double sum = 0, magnitude = 0;
                        for (int64_t i = 0; i < in; ++i) {
                            const double p = static_cast<double>(weights[static_cast<size_t>(r * in + i)]) *
                                             static_cast<double>(x[static_cast<size_t>(t * x_stride + i)]);
                            sum += p;
                            magnitude += std::fabs(p);
                        }
                        expected.push_back(sum);
                        tolerance.push_back(1e-5 * magnitude + 1e-6);
                        actual.push_back(got);
                    }
                }
                EXPECT_TRUE(all_close(expected, actual, tolerance));
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulKernel, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<GgmlType>& param_info) {
                             return std::string(type_traits(param_info.param).name);
                         });

// --- ph_f32_to_f16 ------------------------------------------------------------------------

float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// Every finite f16 value of both signs, the midpoint to the next one (a rounding tie, also
// into the subnormals and the overflow to inf at 65520) with its two f32 neighbours, edge
// values, and random finite f32 bit patterns of every exponent.
std::vector<float> f16_conversion_inputs(std::mt19937& rng) {
    std::vector<float> v = {0.0f,
                            -0.0f,
                            1.0f,
                            65504.0f,
                            65519.99f,
                            65520.0f,
                            -65520.0f,
                            65536.0f,
                            1e10f,
                            -3e38f,
                            FLT_MAX,
                            FLT_MIN,
                            from_bits(1),
                            -from_bits(1),
                            0x1p-24f,
                            0x1p-25f,
                            0x1.8p-25f,
                            0x1p-26f,
                            0x1p-14f,
                            0x1.ffcp-15f,
                            1.00048828125f,
                            1.00146484375f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
    for (uint32_t h = 0; h < 0x7c00u; ++h) {
        const float a = f16_to_f32(static_cast<uint16_t>(h));
        std::vector<float> around = {a};
        if (h + 1 < 0x7c00u) {
            const float mid = (a + f16_to_f32(static_cast<uint16_t>(h + 1))) / 2;  // exact in f32
            around.insert(around.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)});
        }
        for (const float f : around) {
            v.push_back(f);
            v.push_back(-f);
        }
    }
    for (int i = 0; i < 50000; ++i) {
        uint32_t u = static_cast<uint32_t>(rng());
        if ((u & 0x7f800000u) == 0x7f800000u) u &= ~0x00800000u;  // keep it finite
        v.push_back(from_bits(u));
    }
    return v;
}

class F16ConversionKernel : public GpuTest {};

TEST_F(F16ConversionKernel, RoundsToNearestEvenAsTheEngine) {
    std::mt19937 rng(16);
    std::vector<float> x = f16_conversion_inputs(rng);
    const size_t n_finite = x.size();
    for (const uint32_t nan : {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fa00000u}) x.push_back(from_bits(nan));
    DeviceArray<float> x_dev(x);
    DeviceArray<uint16_t> y_dev(x.size());
    ASSERT_TRUE(ran(ph_f32_to_f16(x_dev.get(), y_dev.get(), static_cast<int64_t>(x.size()), nullptr)));
    const std::vector<uint16_t> y = y_dev.download();
    size_t bad = 0;
    for (size_t i = 0; i < n_finite; ++i) {
        const uint16_t expected = f32_to_f16(x[i]);
        if (y[i] != expected && bad++ < 10) {
            ADD_FAILURE() << "f32 0x" << std::hex << std::bit_cast<uint32_t>(x[i]) << " (" << std::dec << x[i]
                          << "): expected f16 0x" << std::hex << expected << ", got 0x" << y[i];
        }
    }
    EXPECT_EQ(bad, 0u) << "of " << n_finite;
    // NaN payloads are not compared; a NaN stays a NaN.
    for (size_t i = n_finite; i < x.size(); ++i) {
        EXPECT_TRUE((y[i] & 0x7c00u) == 0x7c00u && (y[i] & 0x03ffu) != 0) << "NaN became 0x" << std::hex << y[i];
    }
}

// --- element-wise and normalization ---------------------------------------------------------

class ElementwiseKernel : public GpuTest {};

TEST_F(ElementwiseKernel, RmsNormMatchesCpuRow) {
    std::mt19937 rng(3);
    const int64_t rows = 3;
    for (const int64_t n : {int64_t{64}, int64_t{576}, int64_t{4096 + 32}}) {
        for (const bool in_place : {false, true}) {
            SCOPED_TRACE("n " + std::to_string(n) + (in_place ? ", in place" : ", out of place"));
            // Rows of very different magnitudes, so that each must take its own mean.
            std::vector<float> x = uniform(static_cast<size_t>(rows * n), -1.0f, 1.0f, rng);
            for (int64_t i = 0; i < n; ++i) {
                x[static_cast<size_t>(n + i)] *= 1e-3f;
                x[static_cast<size_t>(2 * n + i)] *= 50.0f;
            }
            const std::vector<float> weight = uniform(static_cast<size_t>(n), 0.5f, 1.5f, rng);
            const float eps = 1e-5f;
            std::vector<float> expected_f(x.size());
            cpu::rms_norm_rows(cpu::KernelIsa::scalar, x.data(), expected_f.data(), weight.data(), n, rows, eps);
            DeviceArray<float> x_dev(x);
            DeviceArray<float> w_dev(weight);
            DeviceArray<float> y_dev(x.size());
            float* y = in_place ? x_dev.get() : y_dev.get();
            ASSERT_TRUE(ran(ph_rms_norm(x_dev.get(), y, w_dev.get(), n, rows, eps, nullptr)));
            const std::vector<float> got = in_place ? x_dev.download() : y_dev.download();
            if (!in_place) {
                EXPECT_TRUE(same_floats(x, x_dev.download())) << "the input changed";
            }
            std::vector<double> expected(expected_f.begin(), expected_f.end());
            std::vector<double> tolerance(expected.size());
            for (size_t i = 0; i < expected.size(); ++i) tolerance[i] = 1e-5 * std::fabs(expected[i]) + 1e-30;
            EXPECT_TRUE(all_close(expected, got, tolerance));
        }
    }
}

// Sizes of the element-wise tests: one element, a vector tail, many blocks and a tail.
const int64_t kSizes[] = {1, 7, 1000003};

TEST_F(ElementwiseKernel, AddIsExactAlsoInPlace) {
    std::mt19937 rng(5);
    for (const int64_t n : kSizes) {
        SCOPED_TRACE("n " + std::to_string(n));
        const std::vector<float> a = uniform(static_cast<size_t>(n), -100.0f, 100.0f, rng);
        const std::vector<float> b = uniform(static_cast<size_t>(n), -1.0f, 1.0f, rng);
        std::vector<float> sum(a.size());
        for (size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i];
        DeviceArray<float> a_dev(a), b_dev(b), y_dev(a.size());
        ASSERT_TRUE(ran(ph_add(a_dev.get(), b_dev.get(), y_dev.get(), n, nullptr)));
        EXPECT_TRUE(same_floats(sum, y_dev.download())) << "y = a + b";
        ASSERT_TRUE(ran(ph_add(a_dev.get(), b_dev.get(), a_dev.get(), n, nullptr)));
        EXPECT_TRUE(same_floats(sum, a_dev.download())) << "a = a + b";
        a_dev.upload(a);
        ASSERT_TRUE(ran(ph_add(a_dev.get(), b_dev.get(), b_dev.get(), n, nullptr)));
        EXPECT_TRUE(same_floats(sum, b_dev.download())) << "b = a + b";
    }
}

TEST_F(ElementwiseKernel, ScaleIsExact) {
    std::mt19937 rng(6);
    for (const int64_t n : kSizes) {
        for (const float value : {0.125f, -3.3f, 0.0f}) {
            SCOPED_TRACE("n " + std::to_string(n) + ", value " + std::to_string(value));
            const std::vector<float> a = uniform(static_cast<size_t>(n), -10.0f, 10.0f, rng);
            std::vector<float> expected(a.size());
            cpu::scale(a.data(), expected.data(), value, a.size());
            DeviceArray<float> a_dev(a), y_dev(a.size());
            ASSERT_TRUE(ran(ph_scale(a_dev.get(), y_dev.get(), value, n, nullptr)));
            EXPECT_TRUE(same_floats(expected, y_dev.download()));
        }
    }
}

TEST_F(ElementwiseKernel, AddBiasIsExactOnEveryRow) {
    std::mt19937 rng(7);
    for (const auto& [width, rows] : {std::pair<int64_t, int64_t>{1, 7}, {4096 + 3, 5}, {576, 1}}) {
        SCOPED_TRACE("width " + std::to_string(width) + ", rows " + std::to_string(rows));
        const std::vector<float> y = uniform(static_cast<size_t>(width * rows), -5.0f, 5.0f, rng);
        const std::vector<float> bias = uniform(static_cast<size_t>(width), -1.0f, 1.0f, rng);
        std::vector<float> expected = y;
        cpu::add_bias(expected.data(), bias.data(), static_cast<size_t>(width), rows);
        DeviceArray<float> y_dev(y), bias_dev(bias);
        ASSERT_TRUE(ran(ph_add_bias(y_dev.get(), bias_dev.get(), width, rows, nullptr)));
        EXPECT_TRUE(same_floats(expected, y_dev.download()));
    }
}

TEST_F(ElementwiseKernel, AccumulateIsExact) {
    std::mt19937 rng(8);
    for (const int64_t n : kSizes) {
        SCOPED_TRACE("n " + std::to_string(n));
        const std::vector<float> dst = uniform(static_cast<size_t>(n), -3.0f, 3.0f, rng);
        const std::vector<float> src = uniform(static_cast<size_t>(n), -3.0f, 3.0f, rng);
        std::vector<float> expected(dst.size());
        for (size_t i = 0; i < dst.size(); ++i) expected[i] = dst[i] + src[i];
        DeviceArray<float> dst_dev(dst), src_dev(src);
        ASSERT_TRUE(ran(ph_accumulate(dst_dev.get(), src_dev.get(), n, nullptr)));
        EXPECT_TRUE(same_floats(expected, dst_dev.download()));
        EXPECT_TRUE(same_floats(src, src_dev.download())) << "src changed";
    }
}

TEST_F(ElementwiseKernel, SwigluMatchesCpu) {
    std::mt19937 rng(9);
    const size_t n = 100003;
    std::vector<float> a = {0.0f, -0.0f, 1e-3f, -1e-3f, 30.0f, -30.0f, -88.0f, 88.0f};
    const std::vector<float> rest = uniform(n - a.size(), -20.0f, 20.0f, rng);
    a.insert(a.end(), rest.begin(), rest.end());
    const std::vector<float> b = uniform(n, -3.0f, 3.0f, rng);
    std::vector<float> expected_f(n);
    cpu::swiglu(cpu::KernelIsa::scalar, a.data(), b.data(), expected_f.data(), n);
    DeviceArray<float> a_dev(a), b_dev(b), y_dev(n);
    ASSERT_TRUE(ran(ph_swiglu(a_dev.get(), b_dev.get(), y_dev.get(), static_cast<int64_t>(n), nullptr)));
    const std::vector<double> expected(expected_f.begin(), expected_f.end());
    std::vector<double> tolerance(n);
    // exp and a division differ by a few ulp between libm and the GPU; the absolute term
    // covers a far in the negative tail, where silu(a) is below 1e-7.
    for (size_t i = 0; i < n; ++i) tolerance[i] = 1e-5 * std::fabs(expected[i]) + 1e-7;
    EXPECT_TRUE(all_close(expected, y_dev.download(), tolerance));
}

TEST_F(ElementwiseKernel, GegluMatchesTanhFormulaAndSaturatesBeyondTen) {
    std::mt19937 rng(10);
    const size_t n = 100003;
    std::vector<float> a = {10.5f, -10.5f, 11.0f, -11.0f, 50.0f, -50.0f, 1e4f, -1e4f, 10.001f, -10.001f, 0.0f, -0.0f};
    for (float x = -12.0f; x < 12.0f; x += 0.0371f) a.push_back(x);
    const std::vector<float> rest = uniform(n - a.size(), -12.0f, 12.0f, rng);
    a.insert(a.end(), rest.begin(), rest.end());
    const std::vector<float> b = uniform(n, -3.0f, 3.0f, rng);
    DeviceArray<float> a_dev(a), b_dev(b), y_dev(n);
    ASSERT_TRUE(ran(ph_geglu(a_dev.get(), b_dev.get(), y_dev.get(), static_cast<int64_t>(n), nullptr)));
    const std::vector<float> y = y_dev.download();
    std::vector<double> expected, tolerance;
    std::vector<float> actual;
    for (size_t i = 0; i < n; ++i) {
        if (a[i] > 10.0f) {
            ASSERT_EQ(y[i], a[i] * b[i]) << "gelu(" << a[i] << ") must be exactly " << a[i];
        } else if (a[i] < -10.0f) {
            ASSERT_EQ(y[i], 0.0f) << "gelu(" << a[i] << ") must be exactly 0";
        } else {
            const double x = a[i];
            const double gelu = 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)));
            expected.push_back(gelu * b[i]);
            // 1e-5 relative, and absolute in units of |b|: where tanh is near -1 (x < -3)
            // an f32 1 + tanh keeps few digits, but gelu(x) there is below 1e-2.
            tolerance.push_back(1e-5 * (std::fabs(gelu * b[i]) + std::fabs(b[i])));
            actual.push_back(y[i]);
        }
    }
    EXPECT_TRUE(all_close(expected, actual, tolerance));

    // Against the CPU backend, which looks gelu up in ggml's table at the input rounded to
    // f16 and rounds the result to f16: |gelu'| <= 1.13, so the input's rounding (2^-11
    // relative) moves gelu by at most 1.13 * 2^-11 |x|, the output's by 2^-11 |gelu|; 2^-10
    // of |x| + |gelu| covers both, plus the GPU's own 1e-5 above, all in units of |b|.
    const cpu::GeluTable gelu;
    std::vector<float> cpu_y(n);
    cpu::geglu(gelu, a.data(), b.data(), cpu_y.data(), n);
    std::vector<double> cpu_expected(cpu_y.begin(), cpu_y.end());
    std::vector<double> cpu_tolerance(n);
    for (size_t i = 0; i < n; ++i) {
        const double g = std::fabs(static_cast<double>(gelu(a[i])));
        cpu_tolerance[i] = std::fabs(b[i]) * (std::ldexp(std::fabs(a[i]) + g, -10) + 2e-5);
    }
    EXPECT_TRUE(all_close(cpu_expected, y, cpu_tolerance)) << "against cpu::geglu";
}

// --- ph_rope ----------------------------------------------------------------------------------

class RopeKernel : public GpuTest {};

TEST_F(RopeKernel, MatchesCpuRope) {
    struct Shape {
        int head_dim, rope_dims;
        float base, freq_scale;
    };
    // Llama 3 (full rotary), and a partial rotary head (the last half of each head untouched).
    const Shape shapes[] = {{128, 128, 500000.0f, 1.0f}, {128, 64, 10000.0f, 0.25f}};
    const int64_t n_heads = 3;
    std::mt19937 rng(11);
    for (const Shape& s : shapes) {
        const std::vector<float> factors = uniform(static_cast<size_t>(s.rope_dims / 2), 1.0f, 32.0f, rng);
        DeviceArray<float> factors_dev(factors);
        for (const bool neox : {false, true}) {
            for (const bool with_factors : {false, true}) {
                for (const int32_t pos0 : {0, 1000}) {
                    for (const int n_tokens : {1, 5}) {
                        SCOPED_TRACE("head_dim " + std::to_string(s.head_dim) + ", rope_dims " +
                                     std::to_string(s.rope_dims) + (neox ? ", NeoX" : ", normal") +
                                     (with_factors ? ", freq_factors" : "") + ", pos0 " + std::to_string(pos0) + ", " +
                                     std::to_string(n_tokens) + " tokens");
                        const std::vector<float> x =
                            uniform(static_cast<size_t>(n_tokens * n_heads * s.head_dim), -1.0f, 1.0f, rng);
                        std::vector<float> expected_f = x;
                        const cpu::RopeShape shape{static_cast<uint32_t>(s.head_dim),
                                                   static_cast<uint32_t>(s.rope_dims),
                                                   neox,
                                                   s.base,
                                                   s.freq_scale,
                                                   with_factors ? factors.data() : nullptr};
                        cpu::rope(shape, expected_f.data(), n_heads, n_tokens, static_cast<uint32_t>(pos0));
                        DeviceArray<float> x_dev(x);
                        DeviceArray<int32_t> pos_dev(std::vector<int32_t>{pos0});
                        ASSERT_TRUE(ran(ph_rope(x_dev.get(), n_heads, n_tokens, s.head_dim, s.rope_dims, neox ? 1 : 0,
                                                s.base, s.freq_scale, with_factors ? factors_dev.get() : nullptr,
                                                pos_dev.get(), nullptr)));
                        const std::vector<float> got = x_dev.download();
                        // Angles reach 1004 rad, where an f32 ulp is 6e-5: the reference's own
                        // recurrence is 1.3e-4 off the exact angle, and a device powf one or two
                        // ulp off the host's theta_scale moves angles by up to 3e-4 (measured for
                        // these shapes). So 1e-5 plus 6e-7 per unit of position (6e-4 at 1004,
                        // for |x| <= 1); a wrong pair, frequency or position errs by far more.
                        const double tol = 1e-5 + 6e-7 * (pos0 + n_tokens - 1);
                        std::vector<double> expected, tolerance;
                        std::vector<float> actual;
                        for (size_t i = 0; i < x.size(); ++i) {
                            if (static_cast<int>(i % static_cast<size_t>(s.head_dim)) >= s.rope_dims) {
                                ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(x[i]))
                                    << "element " << i << " beyond rope_dims changed";
                                continue;
                            }
                            expected.push_back(expected_f[i]);
                            tolerance.push_back(tol);
                            actual.push_back(got[i]);
                        }
                        EXPECT_TRUE(all_close(expected, actual, tolerance));
                    }
                }
            }
        }
    }
}

// YaRN (gpt-oss: factor 32 over an original context of 4096; here also a ramp that falls
// inside the head): ph_rope_yarn against cpu::rope with the same correction range.
TEST_F(RopeKernel, YarnMatchesCpuRope) {
    std::mt19937 rng(12);
    const int64_t n_heads = 3;
    struct Case {
        int head_dim;
        float base, factor;
        uint32_t orig_ctx;
    };
    for (const Case& c : {Case{64, 150000.0f, 32.0f, 4096}, Case{32, 10000.0f, 4.0f, 32}}) {
        float low = 0.0f, high = 0.0f;
        cpu::yarn_corr_dims(static_cast<uint32_t>(c.head_dim), c.orig_ctx, c.base, 32.0f, 1.0f, low, high);
        const float freq_scale = 1.0f / c.factor;
        const float attn_factor = 0.97f;  // any: it multiplies cos and sin
        for (const int32_t pos0 : {0, 777}) {
            SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + ", pos0 " + std::to_string(pos0));
            const int n_tokens = 4;
            const std::vector<float> x = uniform(static_cast<size_t>(n_tokens * n_heads * c.head_dim), -1.0f, 1.0f, rng);
            std::vector<float> expected_f = x;
            cpu::RopeShape shape{static_cast<uint32_t>(c.head_dim), static_cast<uint32_t>(c.head_dim), true, c.base,
                                 freq_scale, nullptr};
            shape.ext_factor = 1.0f;
            shape.attn_factor = attn_factor;
            shape.corr_low = low;
            shape.corr_high = high;
            cpu::rope(shape, expected_f.data(), n_heads, n_tokens, static_cast<uint32_t>(pos0));
            DeviceArray<float> x_dev(x);
            DeviceArray<int32_t> pos_dev(std::vector<int32_t>{pos0});
            ASSERT_TRUE(ran(ph_rope_yarn(x_dev.get(), n_heads, n_tokens, c.head_dim, c.head_dim, 1, c.base, freq_scale,
                                         nullptr, 1.0f, attn_factor, low, high, pos_dev.get(), nullptr)));
            // As MatchesCpuRope, the magnitude (up to 1.35) scaling the angle error with it.
            const double tol = 1.4 * (1e-5 + 6e-7 * (pos0 + n_tokens - 1));
            const std::vector<double> expected(expected_f.begin(), expected_f.end());
            EXPECT_TRUE(all_close(expected, x_dev.download(), std::vector<double>(x.size(), tol)));
        }
    }
}

// Q and K in one launch: each buffer the bits of its own launch (a 4-head Q, a 2-head K, as
// grouped attention has them).
TEST_F(RopeKernel, PairInOneLaunchEqualsTwoLaunches) {
    std::mt19937 rng(13);
    const int head_dim = 64, n_tokens = 3;
    const std::vector<float> q = uniform(static_cast<size_t>(n_tokens * 4 * head_dim), -1.0f, 1.0f, rng);
    const std::vector<float> k = uniform(static_cast<size_t>(n_tokens * 2 * head_dim), -1.0f, 1.0f, rng);
    DeviceArray<int32_t> pos_dev(std::vector<int32_t>{41});
    const PhRows rows{pos_dev.get(), 0, nullptr, nullptr, 0, 1};
    DeviceArray<float> q_two(q), k_two(k), q_one(q), k_one(k);
    for (float* x : {q_two.get(), k_two.get()}) {
        const int64_t heads = x == q_two.get() ? 4 : 2;
        ASSERT_TRUE(ran(ph_rope_rows(x, heads, n_tokens, head_dim, head_dim, 1, 10000.0f, 0.5f, nullptr, 1.0f, 0.9f,
                                     3.0f, 20.0f, rows, nullptr)));
    }
    ASSERT_TRUE(ran(ph_rope_rows_pair(q_one.get(), 4, k_one.get(), 2, n_tokens, head_dim, head_dim, 1, 10000.0f, 0.5f,
                                      nullptr, 1.0f, 0.9f, 3.0f, 20.0f, rows, nullptr)));
    const auto bits = [](const std::vector<float>& v) {
        std::vector<uint32_t> out(v.size());
        std::memcpy(out.data(), v.data(), v.size() * 4);
        return out;
    };
    EXPECT_EQ(bits(q_one.download()), bits(q_two.download()));
    EXPECT_EQ(bits(k_one.download()), bits(k_two.download()));
    // A second buffer needs its pointer.
    EXPECT_NE(ph_rope_rows_pair(q_one.get(), 4, nullptr, 2, n_tokens, head_dim, head_dim, 1, 10000.0f, 0.5f, nullptr,
                                1.0f, 0.9f, 3.0f, 20.0f, rows, nullptr),
              0);
}

// Llama 4's attention temperature (Mistral 3) against the CPU's scale_by_position, at
// positions on both sides of several steps of the length, read from the device.
TEST_F(RopeKernel, ScaleByPositionMatchesCpu) {
    std::mt19937 rng(17);
    const std::vector<int32_t> positions = {0, 3, 4, 7, 8, 15, 16, 99, 1000, 65535};
    const int64_t width = 300;  // more than one thread block's width, not a multiple of it
    const std::vector<float> x = uniform(positions.size() * width, -2.0f, 2.0f, rng);
    std::vector<float> expected = x;
    cpu::scale_by_position(expected.data(), width, positions, 0.1f, 4);
    DeviceArray<int32_t> pos_dev(positions);
    DeviceArray<float> x_dev(x);
    const PhRows rows{pos_dev.get(), 1, nullptr, nullptr, 0, 1};
    ASSERT_TRUE(
        ran(ph_scale_by_position(x_dev.get(), width, static_cast<int>(positions.size()), 0.1f, 4, rows, nullptr)));
    // One product by a factor computed the same way: within an ulp of each value (the f32
    // logarithm's rounding may differ by one unit from the CPU's).
    std::vector<double> tol(expected.size());
    for (size_t i = 0; i < tol.size(); ++i) tol[i] = 2.0 * std::abs(expected[i]) * FLT_EPSILON;
    EXPECT_TRUE(all_close(std::vector<double>(expected.begin(), expected.end()), x_dev.download(), tol));
    // The first `length` positions are left alone; the step past them is 1 + 0.1 ln 2.
    EXPECT_EQ(cpu::position_temperature(3, 0.1f, 4), 1.0f);
    EXPECT_FLOAT_EQ(cpu::position_temperature(4, 0.1f, 4), static_cast<float>(1.0 + 0.1 * std::log(2.0)));
    EXPECT_NE(ph_scale_by_position(x_dev.get(), width, 1, 0.1f, 0, rows, nullptr), 0) << "length 0";
}

// --- ph_get_rows ------------------------------------------------------------------------------

class GetRowsKernel : public GpuTest, public ::testing::WithParamInterface<GgmlType> {};

TEST_P(GetRowsKernel, DecodesTheChosenRowsAsDequantizeRow) {
    const GgmlType type = GetParam();
    const TypeTraits& traits = type_traits(type);
    const int64_t n_rows = 50;
    const std::vector<int32_t> ids = {0, 49, 7, 7};
    std::mt19937 rng(12u + static_cast<uint32_t>(type));
    for (const int64_t width : {int64_t{512}, int64_t{4352}}) {
        const size_t packed = row_bytes(traits, static_cast<uint64_t>(width));
        for (const size_t stride : {packed, packed + 64}) {
            SCOPED_TRACE("width " + std::to_string(width) + ", rows " + std::to_string(stride) + " bytes apart");
            std::vector<uint8_t> table(stride * n_rows);
            for (int64_t r = 0; r < n_rows; ++r) {
                const std::vector<float> values = uniform(static_cast<size_t>(width), -2.0f, 2.0f, rng);
                quantize_row(type, values.data(), table.data() + static_cast<size_t>(r) * stride, width);
            }
            std::vector<float> expected(ids.size() * static_cast<size_t>(width));
            for (size_t t = 0; t < ids.size(); ++t) {
                dequantize_row(type, table.data() + static_cast<size_t>(ids[t]) * stride,
                               expected.data() + t * static_cast<size_t>(width), width);
            }
            DeviceArray<uint8_t> table_dev(table);
            DeviceArray<int32_t> ids_dev(ids);
            DeviceArray<float> y_dev(expected.size());
            ASSERT_TRUE(ran(ph_get_rows(type_id(type), table_dev.get(), stride, ids_dev.get(),
                                        static_cast<int>(ids.size()), width, y_dev.get(), nullptr)));
            EXPECT_TRUE(same_floats(expected, y_dev.download()));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GetRowsKernel, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<GgmlType>& param_info) {
                             return std::string(type_traits(param_info.param).name);
                         });

// --- ph_argmax ----------------------------------------------------------------------------------

class ArgmaxKernel : public GpuTest {};

TEST_F(ArgmaxKernel, FindsThePlantedMaximumAndTheFirstOfEquals) {
    std::mt19937 rng(13);
    for (const int n : {1, 49152, 128256}) {
        struct Case {
            std::string name;
            std::vector<float> x;
            int32_t expected;
        };
        std::vector<Case> cases;
        const auto un = static_cast<size_t>(n);
        const auto at = [&](int i) { return static_cast<size_t>(std::clamp(i, 0, n - 1)); };
        {
            Case c{"random with a planted maximum", uniform(un, -10.0f, 10.0f, rng), 0};
            c.expected = static_cast<int32_t>(at(static_cast<int>(rng() % un)));
            c.x[static_cast<size_t>(c.expected)] = 10.5f;
            cases.push_back(std::move(c));
        }
        cases.push_back({"all equal", std::vector<float>(un, -3.5f), 0});
        {
            Case c{"all negative, maximum last", uniform(un, -1000.0f, -500.0f, rng), n - 1};
            c.x[un - 1] = -1.0f;
            cases.push_back(std::move(c));
        }
        {
            Case c{"maximum first", uniform(un, -1.0f, 1.0f, rng), 0};
            c.x[0] = 2.0f;
            cases.push_back(std::move(c));
        }
        // Equal maxima near each other, far apart, and in the last element.
        for (const auto& [i, j] : {std::pair{40, 41}, std::pair{5, n - 3}, std::pair{n / 2 + 17, n - 1}}) {
            Case c{"equal maxima at " + std::to_string(at(i)) + " and " + std::to_string(at(j)),
                   uniform(un, 0.0f, 1.0f, rng), static_cast<int32_t>(std::min(at(i), at(j)))};
            c.x[at(i)] = 7.0f;
            c.x[at(j)] = 7.0f;
            cases.push_back(std::move(c));
        }
        // As the sampler's argmax: NaN and -inf are never chosen, and -1 says none was.
        cases.push_back({"all NaN", std::vector<float>(un, std::nanf("")), -1});
        cases.push_back({"all -inf", std::vector<float>(un, -INFINITY), -1});
        {
            Case c{"NaN first, maximum last", std::vector<float>(un, -2.0f), n - 1};
            c.x[0] = std::nanf("");
            if (n > 1) c.x[un - 1] = -1.0f;
            if (n == 1) c.expected = -1;
            cases.push_back(std::move(c));
        }
        for (const Case& c : cases) {
            SCOPED_TRACE("n " + std::to_string(n) + ", " + c.name);
            DeviceArray<float> x_dev(c.x);
            DeviceArray<int32_t> out(std::vector<int32_t>{-7});
            ASSERT_TRUE(ran(ph_argmax(x_dev.get(), n, out.get(), nullptr)));
            EXPECT_EQ(out.download()[0], c.expected);
        }
    }
}

// --- argument checks (before any GPU work, so they run everywhere) -------------------------

TEST(KernelSupport, MatmulHandlesTheDequantizeTypes) {
    for (uint32_t id = 0; id < 64; ++id) {
        EXPECT_EQ(ph_matmul_supported(id), ph_dequantize_supported(id)) << "type id " << id;
    }
    EXPECT_EQ(ph_matmul_supported(99), 0);
    for (const GgmlType type : kTypes) EXPECT_EQ(ph_matmul_supported(type_id(type)), 1) << type_traits(type).name;
}

// Launchers given a bad argument must refuse before launching: cudaErrorInvalidValue, or
// for a type without a kernel cudaErrorNotSupported. Every other argument is valid: on a
// machine with a GPU the pointers are real device memory (so that a missing check fails
// the test instead of faulting), elsewhere they are never dereferenced.
class KernelArguments : public ::testing::Test {
protected:
    void SetUp() override {
        if (cuda::cuda_available()) {
            device_ = std::make_unique<DeviceArray<uint8_t>>(std::vector<uint8_t>(kBytes, 0));
            base_ = device_->get();
        } else {
            host_.assign(kBytes, 0);
            base_ = host_.data();
        }
    }

    // Distinct, 256-byte aligned, zero-filled regions of 1 MiB.
    template <class T>
    T* region(int index) {
        return reinterpret_cast<T*>(base_ + static_cast<size_t>(index) * (size_t{1} << 20));
    }

    static constexpr size_t kBytes = size_t{16} << 20;
    std::unique_ptr<DeviceArray<uint8_t>> device_;
    std::vector<uint8_t> host_;
    uint8_t* base_ = nullptr;
};

constexpr int kInvalid = cudaErrorInvalidValue;

::testing::AssertionResult refused_type(int status) {
    if (status == cudaErrorInvalidValue || status == cudaErrorNotSupported) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "returned " << status;
}

TEST_F(KernelArguments, MatmulRefusesBadArguments) {
    const auto q4 = type_id(GgmlType::q4_0);
    void* w = region<void>(0);
    float* x = region<float>(1);
    float* y = region<float>(2);
    const size_t rs = 8 * sizeof(BlockQ4_0);  // rows of 256 elements
    EXPECT_TRUE(refused_type(ph_matmul(99, w, rs, 37, 256, x, 256, y, 37, 1, nullptr)));
    EXPECT_EQ(ph_matmul(type_id(GgmlType::q8_1), w, rs, 37, 256, x, 256, y, 37, 1, nullptr), cudaErrorNotSupported);
    EXPECT_EQ(ph_matmul(q4, w, rs, -1, 256, x, 256, y, 37, 1, nullptr), kInvalid) << "rows";
    EXPECT_EQ(ph_matmul(q4, w, rs, 37, -256, x, 256, y, 37, 1, nullptr), kInvalid) << "in";
    EXPECT_EQ(ph_matmul(q4, w, rs, 37, 100, x, 256, y, 37, 1, nullptr), kInvalid) << "in not whole blocks";
    EXPECT_EQ(ph_matmul(q4, w, rs, 37, 256, x, 256, y, 37, -1, nullptr), kInvalid) << "n_tokens";
    EXPECT_EQ(ph_matmul(q4, nullptr, rs, 37, 256, x, 256, y, 37, 1, nullptr), kInvalid) << "w";
    EXPECT_EQ(ph_matmul(q4, w, rs, 37, 256, nullptr, 256, y, 37, 1, nullptr), kInvalid) << "x";
    EXPECT_EQ(ph_matmul(q4, w, rs, 37, 256, x, 256, nullptr, 37, 1, nullptr), kInvalid) << "y";
}

TEST_F(KernelArguments, ElementwiseRefuseNegativeSizesAndNullPointers) {
    float* a = region<float>(0);
    float* b = region<float>(1);
    float* y = region<float>(2);
    auto* h = region<uint16_t>(3);
    EXPECT_EQ(ph_f32_to_f16(a, h, -1, nullptr), kInvalid);
    EXPECT_EQ(ph_f32_to_f16(nullptr, h, 16, nullptr), kInvalid);
    EXPECT_EQ(ph_f32_to_f16(a, nullptr, 16, nullptr), kInvalid);
    EXPECT_EQ(ph_rms_norm(a, y, b, -64, 1, 1e-5f, nullptr), kInvalid);
    EXPECT_EQ(ph_rms_norm(a, y, b, 64, -1, 1e-5f, nullptr), kInvalid);
    EXPECT_EQ(ph_rms_norm(nullptr, y, b, 64, 1, 1e-5f, nullptr), kInvalid);
    EXPECT_EQ(ph_rms_norm(a, nullptr, b, 64, 1, 1e-5f, nullptr), kInvalid);
    EXPECT_EQ(ph_rms_norm(a, y, nullptr, 64, 1, 1e-5f, nullptr), kInvalid);
    EXPECT_EQ(ph_add(a, b, y, -1, nullptr), kInvalid);
    EXPECT_EQ(ph_add(nullptr, b, y, 16, nullptr), kInvalid);
    EXPECT_EQ(ph_add(a, nullptr, y, 16, nullptr), kInvalid);
    EXPECT_EQ(ph_add(a, b, nullptr, 16, nullptr), kInvalid);
    EXPECT_EQ(ph_scale(a, y, 2.0f, -1, nullptr), kInvalid);
    EXPECT_EQ(ph_scale(nullptr, y, 2.0f, 16, nullptr), kInvalid);
    EXPECT_EQ(ph_scale(a, nullptr, 2.0f, 16, nullptr), kInvalid);
    EXPECT_EQ(ph_add_bias(y, b, -16, 1, nullptr), kInvalid);
    EXPECT_EQ(ph_add_bias(y, b, 16, -1, nullptr), kInvalid);
    EXPECT_EQ(ph_add_bias(nullptr, b, 16, 1, nullptr), kInvalid);
    EXPECT_EQ(ph_add_bias(y, nullptr, 16, 1, nullptr), kInvalid);
    for (const auto glu : {&ph_swiglu, &ph_geglu}) {
        EXPECT_EQ(glu(a, b, y, -1, nullptr), kInvalid);
        EXPECT_EQ(glu(nullptr, b, y, 16, nullptr), kInvalid);
        EXPECT_EQ(glu(a, nullptr, y, 16, nullptr), kInvalid);
        EXPECT_EQ(glu(a, b, nullptr, 16, nullptr), kInvalid);
    }
    EXPECT_EQ(ph_accumulate(y, a, -1, nullptr), kInvalid);
    EXPECT_EQ(ph_accumulate(nullptr, a, 16, nullptr), kInvalid);
    EXPECT_EQ(ph_accumulate(y, nullptr, 16, nullptr), kInvalid);
}

TEST_F(KernelArguments, RopeGetRowsAndArgmaxRefuseBadArguments) {
    float* x = region<float>(0);
    auto* pos0 = region<int32_t>(1);
    EXPECT_EQ(ph_rope(x, -3, 1, 128, 128, 0, 1e4f, 1.0f, nullptr, pos0, nullptr), kInvalid) << "n_heads";
    EXPECT_EQ(ph_rope(x, 3, -1, 128, 128, 0, 1e4f, 1.0f, nullptr, pos0, nullptr), kInvalid) << "n_tokens";
    EXPECT_EQ(ph_rope(nullptr, 3, 1, 128, 128, 0, 1e4f, 1.0f, nullptr, pos0, nullptr), kInvalid) << "x";
    EXPECT_EQ(ph_rope(x, 3, 1, 128, 128, 0, 1e4f, 1.0f, nullptr, nullptr, nullptr), kInvalid) << "pos0";

    const void* table = region<void>(2);
    auto* ids = region<int32_t>(3);
    float* y = region<float>(4);
    const auto f16 = type_id(GgmlType::f16);
    EXPECT_TRUE(refused_type(ph_get_rows(99, table, 512, ids, 4, 256, y, nullptr)));
    EXPECT_EQ(ph_get_rows(f16, table, 512, ids, -4, 256, y, nullptr), kInvalid) << "n";
    EXPECT_EQ(ph_get_rows(f16, table, 512, ids, 4, -256, y, nullptr), kInvalid) << "width";
    EXPECT_EQ(ph_get_rows(f16, nullptr, 512, ids, 4, 256, y, nullptr), kInvalid) << "table";
    EXPECT_EQ(ph_get_rows(f16, table, 512, nullptr, 4, 256, y, nullptr), kInvalid) << "ids";
    EXPECT_EQ(ph_get_rows(f16, table, 512, ids, 4, 256, nullptr, nullptr), kInvalid) << "y";

    auto* out = region<int32_t>(5);
    EXPECT_EQ(ph_argmax(x, -1, out, nullptr), kInvalid) << "n";
    EXPECT_EQ(ph_argmax(nullptr, 16, out, nullptr), kInvalid) << "x";
    EXPECT_EQ(ph_argmax(x, 16, nullptr, nullptr), kInvalid) << "out";
    EXPECT_EQ(ph_set_i32(nullptr, 5, nullptr), kInvalid) << "dst";
}

TEST_F(KernelArguments, KvStoreAndAttentionRefuseBadArguments) {
    // A valid call: 8 query heads over 2 KV heads of 64, 16 positions of Q8_0 rows.
    const float* k = region<float>(0);
    const float* v = region<float>(1);
    void* k_cache = region<void>(2);
    void* v_cache = region<void>(3);
    auto* pos0 = region<int32_t>(4);
    const size_t rb = 4 * sizeof(BlockQ8_0);
    EXPECT_TRUE(refused_type(ph_kv_store(2, k, v, k_cache, v_cache, rb, 128, 1, pos0, nullptr))) << "kv_type";
    EXPECT_EQ(ph_kv_store(PH_KV_Q8_0, k, v, k_cache, v_cache, rb, -128, 1, pos0, nullptr), kInvalid) << "width";
    EXPECT_EQ(ph_kv_store(PH_KV_Q8_0, k, v, k_cache, v_cache, rb, 100, 1, pos0, nullptr), kInvalid)
        << "Q8_0 width not whole blocks";
    EXPECT_EQ(ph_kv_store(PH_KV_Q8_0, k, v, k_cache, v_cache, rb, 128, -1, pos0, nullptr), kInvalid) << "n_tokens";
    EXPECT_EQ(ph_kv_store(PH_KV_Q8_0, nullptr, v, k_cache, v_cache, rb, 128, 1, pos0, nullptr), kInvalid) << "k";
    EXPECT_EQ(ph_kv_store(PH_KV_Q8_0, k, nullptr, k_cache, v_cache, rb, 128, 1, pos0, nullptr), kInvalid) << "v";
    EXPECT_EQ(ph_kv_store(PH_KV_Q8_0, k, v, nullptr, v_cache, rb, 128, 1, pos0, nullptr), kInvalid) << "k_cache";
    EXPECT_EQ(ph_kv_store(PH_KV_Q8_0, k, v, k_cache, nullptr, rb, 128, 1, pos0, nullptr), kInvalid) << "v_cache";
    EXPECT_EQ(ph_kv_store(PH_KV_Q8_0, k, v, k_cache, v_cache, rb, 128, 1, nullptr, nullptr), kInvalid) << "pos0";

    const float* q = region<float>(5);
    float* out = region<float>(6);
    float* partial = region<float>(7);
    const auto attend = [&](int kv_type, const float* q_, const void* kc, const void* vc, float* o, int n_tokens,
                            int head_dim, int n_splits, float* p, const int32_t* pos) {
        return ph_attention(kv_type, q_, kc, vc, rb, o, n_tokens, 8, 2, head_dim, 0.125f, 0, 16, n_splits, p, pos,
                            nullptr);
    };
    EXPECT_TRUE(refused_type(attend(2, q, k_cache, v_cache, out, 1, 64, 2, partial, pos0))) << "kv_type";
    EXPECT_EQ(attend(PH_KV_Q8_0, q, k_cache, v_cache, out, 1, 40, 2, partial, pos0), kInvalid)
        << "Q8_0 cache, head_dim 40: not whole blocks";
    EXPECT_EQ(attend(PH_KV_Q8_0, q, k_cache, v_cache, out, 1, 288, 2, partial, pos0), kInvalid) << "head_dim 288";
    EXPECT_EQ(attend(PH_KV_F16, q, k_cache, v_cache, out, 1, 288, 2, partial, pos0), kInvalid) << "F16 head_dim 288";
    EXPECT_EQ(attend(PH_KV_F16, q, k_cache, v_cache, out, 1, 0, 2, partial, pos0), kInvalid) << "head_dim 0";
    EXPECT_EQ(attend(PH_KV_Q8_0, q, k_cache, v_cache, out, -1, 64, 2, partial, pos0), kInvalid) << "n_tokens";
    EXPECT_EQ(attend(PH_KV_Q8_0, q, k_cache, v_cache, out, 1, 64, 0, partial, pos0), kInvalid) << "n_splits 0";
    EXPECT_EQ(attend(PH_KV_Q8_0, nullptr, k_cache, v_cache, out, 1, 64, 2, partial, pos0), kInvalid) << "q";
    EXPECT_EQ(attend(PH_KV_Q8_0, q, nullptr, v_cache, out, 1, 64, 2, partial, pos0), kInvalid) << "k_cache";
    EXPECT_EQ(attend(PH_KV_Q8_0, q, k_cache, nullptr, out, 1, 64, 2, partial, pos0), kInvalid) << "v_cache";
    EXPECT_EQ(attend(PH_KV_Q8_0, q, k_cache, v_cache, nullptr, 1, 64, 2, partial, pos0), kInvalid) << "out";
    EXPECT_EQ(attend(PH_KV_Q8_0, q, k_cache, v_cache, out, 1, 64, 2, nullptr, pos0), kInvalid) << "partial";
    EXPECT_EQ(attend(PH_KV_Q8_0, q, k_cache, v_cache, out, 1, 64, 2, partial, nullptr), kInvalid) << "pos0";
}

}  // namespace
}  // namespace powerhouse