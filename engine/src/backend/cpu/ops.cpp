#include "backend/cpu/ops.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/vec.h"
#include "tensor/half.h"

namespace powerhouse::cpu {

GeluTable::GeluTable() : values_(65536) {
    for (uint32_t i = 0; i < 65536; ++i) {
        const float x = f16_to_f32(static_cast<uint16_t>(i));
        const float g = 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * x * (1.0f + 0.044715f * x * x)));
        values_[i] = f16_to_f32(f32_to_f16(g));
    }
}

float GeluTable::operator()(float x) const {
    // Beyond +-10 ggml returns the limits exactly rather than the f16-rounded table value.
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return values_[f32_to_f16(x)];
}

void geglu(const GeluTable& gelu, const float* gate, const float* up, float* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = gelu(gate[i]) * up[i];
}

void scale(const float* a, float* dst, float value, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = a[i] * value;
}

float position_temperature(int32_t pos, float temperature, uint32_t length) {
    const float steps = std::floor(static_cast<float>(pos) / static_cast<float>(length));
    return static_cast<float>(std::log(static_cast<double>(steps) + 1.0) * temperature + 1.0);
}

void scale_by_position(float* data, size_t width, std::span<const int32_t> positions, float temperature,
                       uint32_t length) {
    for (size_t t = 0; t < positions.size(); ++t) {
        const float factor = position_temperature(positions[t], temperature, length);
        float* row = data + t * width;
        for (size_t i = 0; i < width; ++i) row[i] *= factor;
    }
}

void add_bias(float* data, const float* bias, size_t width, int64_t rows) {
    for (int64_t t = 0; t < rows; ++t) {
        float* row = data + static_cast<size_t>(t) * width;
        for (size_t i = 0; i < width; ++i) row[i] += bias[i];
    }
}

void rms_norm_rows(KernelIsa isa, const float* src, float* dst, const float* weight, int64_t width, int64_t rows,
                   float eps) {
    for (int64_t r = 0; r < rows; ++r) rms_norm_row(isa, src + r * width, dst + r * width, weight, width, eps);
}

void yarn_corr_dims(uint32_t rope_dims, uint32_t orig_ctx, float base, float beta_fast, float beta_slow,
                    float& low, float& high) {
    const float pi = 3.14159265358979323846f;
    const auto dim = [&](float rotations) {
        return static_cast<float>(rope_dims) *
               std::log(static_cast<float>(orig_ctx) / (rotations * 2.0f * pi)) / (2.0f * std::log(base));
    };
    low = std::max(0.0f, std::floor(dim(beta_fast)));
    high = std::min(static_cast<float>(rope_dims) - 1.0f, std::ceil(dim(beta_slow)));
}

void rope(const RopeShape& shape, float* data, int64_t n_heads, int n_tokens, uint32_t pos0) {
    std::vector<int32_t> positions(static_cast<size_t>(std::max(0, n_tokens)));
    for (size_t t = 0; t < positions.size(); ++t) positions[t] = static_cast<int32_t>(pos0 + t);
    rope(shape, data, n_heads, positions);
}

void rope(const RopeShape& shape, float* data, int64_t n_heads, std::span<const int32_t> positions) {
    const auto n_tokens = static_cast<int>(positions.size());
    const uint32_t dims = shape.rope_dims;
    const float theta_scale = std::pow(shape.base, -2.0f / static_cast<float>(dims));
    std::vector<float> cos_sin(dims);  // [rope_dims] f32: cos and sin of each pair's angle
    for (int t = 0; t < n_tokens; ++t) {
        float theta = static_cast<float>(positions[static_cast<size_t>(t)]);
        for (uint32_t i = 0; i < dims; i += 2) {
            const float ff = shape.freq_factors != nullptr ? shape.freq_factors[i / 2] : 1.0f;
            const float original = theta / ff;
            float angle = shape.freq_scale * original;
            float magnitude = shape.attn_factor;
            if (shape.ext_factor != 0.0f) {
                const float y = (static_cast<float>(i / 2) - shape.corr_low) /
                                std::max(0.001f, shape.corr_high - shape.corr_low);
                const float mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * shape.ext_factor;
                angle = angle * (1.0f - mix) + original * mix;
                magnitude *= 1.0f + 0.1f * std::log(1.0f / shape.freq_scale);
            }
            cos_sin[i] = std::cos(angle) * magnitude;
            cos_sin[i + 1] = std::sin(angle) * magnitude;
            theta *= theta_scale;
        }
        for (int64_t h = 0; h < n_heads; ++h) {
            float* x = data + (static_cast<int64_t>(t) * n_heads + h) * shape.head_dim;
            for (uint32_t i = 0; i < dims; i += 2) {
                const uint32_t i0 = shape.neox ? i / 2 : i;
                const uint32_t i1 = shape.neox ? i / 2 + dims / 2 : i + 1;
                const float x0 = x[i0];
                const float x1 = x[i1];
                x[i0] = x0 * cos_sin[i] - x1 * cos_sin[i + 1];
                x[i1] = x0 * cos_sin[i + 1] + x1 * cos_sin[i];
            }
        }
    }
}

}  // namespace powerhouse::cpu
