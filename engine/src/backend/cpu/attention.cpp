#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/vec.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace powerhouse::cpu {

void KvCache::init(KvCacheType type, uint32_t n_layer, uint32_t n_rows, uint32_t n_head_kv, uint32_t head_dim) {
    type_ = type;
    n_layer_ = n_layer;
    n_rows_ = n_rows;
    width_ = size_t{n_head_kv} * head_dim;
    row_bytes_ = type == KvCacheType::q8_0 ? width_ / kQK * sizeof(BlockQ8_0) : width_ * sizeof(uint16_t);
    const size_t total = size_t{n_layer} * n_rows * row_bytes_;
    k_.assign(total, std::byte{0});
    v_.assign(total, std::byte{0});
}

void KvCache::copy_rows(int64_t from, int64_t to, int64_t count) {
    const size_t bytes = static_cast<size_t>(count) * row_bytes_;
    for (uint32_t l = 0; l < n_layer_; ++l) {
        std::memmove(k_.data() + offset(l, to), k_.data() + offset(l, from), bytes);
        std::memmove(v_.data() + offset(l, to), v_.data() + offset(l, from), bytes);
    }
}

void KvCache::store(uint32_t layer, int64_t row, const float* k, const float* v) {
    std::byte* kd = k_.data() + offset(layer, row);
    std::byte* vd = v_.data() + offset(layer, row);
    if (type_ == KvCacheType::q8_0) {
        // Q8_0 weights and Q8_0 activations are the same format: the activation quantizer
        // rounds as ggml's x86 (AVX2) quantize_row_q8_0 does, which llama.cpp's CPU backend
        // uses for the cache: scale 127 / amax, ties to even (its scalar reference rounds
        // ties away from zero).
        quantize_activations(GgmlType::q8_0, k, kd, static_cast<int64_t>(width_));
        quantize_activations(GgmlType::q8_0, v, vd, static_cast<int64_t>(width_));
        return;
    }
    for (size_t i = 0; i < width_; ++i) {
        const uint16_t kh = f32_to_f16(k[i]);
        const uint16_t vh = f32_to_f16(v[i]);
        std::memcpy(kd + 2 * i, &kh, 2);
        std::memcpy(vd + 2 * i, &vh, 2);
    }
}

void attention(ThreadPool& pool, KernelIsa isa, const KvCache& cache, uint32_t layer, const AttentionShape& shape,
               const float* q_all, float* out_all, const StageBatch& batch, std::vector<std::vector<float>>& scratch) {
    const uint32_t hd = shape.head_dim;
    const uint32_t group = shape.n_head / shape.n_head_kv;
    const size_t q_width = size_t{shape.n_head} * hd;
    const bool q8 = cache.type() == KvCacheType::q8_0;
    // K and V types as weight types of a dot product: the query is converted to the
    // matching activation format (F16 or Q8_0), exactly as llama.cpp's mul_mat does.
    const GgmlType k_type = q8 ? GgmlType::q8_0 : GgmlType::f16;
    const size_t head_bytes = q8 ? hd / kQK * sizeof(BlockQ8_0) : size_t{hd} * sizeof(uint16_t);
    uint32_t n_keys_max = 0;
    for (int t = 0; t < batch.n; ++t) n_keys_max = std::max(n_keys_max, static_cast<uint32_t>(batch.pos[t]) + 1);
    // Per thread: scores [n_keys_max], the converted query, bytes for its activation format.
    const size_t need = n_keys_max + hd + hd;
    if (scratch.size() < static_cast<size_t>(pool.size())) scratch.resize(static_cast<size_t>(pool.size()));
    for (auto& s : scratch) {
        if (s.size() < need) s.resize(need);
    }
    const float scale = shape.scale != 0 ? shape.scale : 1.0f / std::sqrt(static_cast<float>(hd));
    const uint32_t bs = batch.block_size;
    pool.parallel_chunks(static_cast<int64_t>(batch.n) * shape.n_head, [&](int64_t job, int thread) {
        float* scores = scratch[static_cast<size_t>(thread)].data();
        float* qconv = scores + n_keys_max;  // the query in k_type's activation format
        const auto t = static_cast<int>(job / shape.n_head);
        const auto h = static_cast<uint32_t>(job % shape.n_head);
        const uint32_t kvh = h / group;
        const int32_t* table = batch.table(t);
        const uint32_t n_keys = static_cast<uint32_t>(batch.pos[t]) + 1;  // causal: up to and including itself
        // A sliding window keeps only the last `window` positions.
        const uint32_t first = shape.window != 0 && n_keys > shape.window ? n_keys - shape.window : 0;
        const uint32_t count = n_keys - first;
        const float* q = q_all + static_cast<size_t>(t) * q_width + size_t{h} * hd;
        quantize_activations(isa, k_type, q, qconv, hd);
        // The keys a block at a time: within a block the rows follow each other.
        for (uint32_t p = first; p < n_keys;) {
            const uint32_t in_block = p % bs;
            const uint32_t run = std::min(bs - in_block, n_keys - p);
            const int64_t row = int64_t{table[p / bs]} * bs + in_block;
            dot_rows(isa, k_type, hd, cache.k_row(layer, row) + kvh * head_bytes, cache.row_bytes(),
                     static_cast<int>(run), qconv, 0, 1, scores + (p - first), 0);
            p += run;
        }
        float max = -INFINITY;
        for (uint32_t p = 0; p < count; ++p) {
            scores[p] *= scale;
            max = std::max(max, scores[p]);
        }
        if (shape.sinks != nullptr) max = std::max(max, shape.sinks[h]);
        double sum = exp_sum(isa, scores, count, max);
        if (shape.sinks != nullptr) sum += std::exp(shape.sinks[h] - max);
        const float inv = static_cast<float>(1.0 / sum);
        float* out = out_all + static_cast<size_t>(t) * q_width + size_t{h} * hd;
        std::fill_n(out, hd, 0.0f);
        for (uint32_t i = 0; i < count; ++i) {
            const uint32_t p = first + i;
            const int64_t row = int64_t{table[p / bs]} * bs + p % bs;
            const std::byte* v = cache.v_row(layer, row) + kvh * head_bytes;
            if (q8) {
                axpy_q8_0(isa, scores[i] * inv, v, out, hd);
            } else {
                const float weight = f16_to_f32(f32_to_f16(scores[i] * inv));  // as ggml: probabilities in F16
                axpy_f16(isa, weight, reinterpret_cast<const uint16_t*>(v), out, hd);
            }
        }
    });
}

void attention(ThreadPool& pool, KernelIsa isa, const KvCache& cache, uint32_t layer, const AttentionShape& shape,
               const float* q, float* out, int n, uint32_t first_pos, std::vector<std::vector<float>>& scratch) {
    const ContiguousBatch rows(n, first_pos);
    const StageBatch& batch = rows.batch();
    attention(pool, isa, cache, layer, shape, q, out, batch, scratch);
}

}  // namespace powerhouse::cpu
