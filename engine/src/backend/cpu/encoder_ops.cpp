#include "backend/cpu/encoder_ops.h"

#include <cmath>

#include "tensor/dequantize.h"

namespace powerhouse::cpu {

void layer_norm_rows(const float* src, float* dst, const float* weight, int64_t width, int64_t rows, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* x = src + r * width;
        float* y = dst + r * width;
        double sum = 0.0;
        for (int64_t i = 0; i < width; ++i) sum += static_cast<double>(x[i]);
        const float mean = static_cast<float>(sum) / static_cast<float>(width);
        double squares = 0.0;
        for (int64_t i = 0; i < width; ++i) {
            const float centred = x[i] - mean;
            y[i] = centred;
            squares += static_cast<double>(centred * centred);
        }
        const auto variance = static_cast<float>(squares / static_cast<double>(width));
        const float scale = 1.0f / std::sqrt(variance + eps);
        for (int64_t i = 0; i < width; ++i) y[i] = (y[i] * scale) * weight[i];
    }
}

void gelu(const GeluTable& table, const float* src, float* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = table(src[i]);
}

void add_rows(const RowTable& table, std::span<const int32_t> row_of, float* data, float* scratch) {
    const auto w = static_cast<size_t>(table.width);
    for (size_t t = 0; t < row_of.size(); ++t) {
        const std::byte* src = table.data + table.row_stride * static_cast<uint64_t>(row_of[t]);
        const float* row = reinterpret_cast<const float*>(src);
        if (table.type != GgmlType::f32) {
            dequantize_row(table.type, src, scratch, table.width);
            row = scratch;
        }
        float* dst = data + t * w;
        for (size_t i = 0; i < w; ++i) dst[i] += row[i];
    }
}

}  // namespace powerhouse::cpu
