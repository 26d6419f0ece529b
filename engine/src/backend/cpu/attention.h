// The KV cache and causal self-attention of the CPU backend.
//
// The cache holds, per layer and cache row, the keys and values of all KV heads
// ([n_layer][n_rows][n_head_kv * head_dim]) in F16, or in Q8_0 (blocks of 32 along each
// head, half the bytes) when asked for. The rows are the pool of KV blocks shared by the
// sequences (backend/kv_blocks.h): a batch's block tables say which rows hold which
// positions of which sequence.
//
// Numerics follow llama.cpp's CPU backend for the matching cache type:
//  - F16 (llama.cpp's default graph without flash attention): the query is rounded to F16,
//    q.k summed in f32, softmax in f32 with a double sum, the probabilities rounded to F16
//    before the product with V.
//  - Q8_0 (llama.cpp -ctk q8_0 -ctv q8_0, which needs flash attention): the query is
//    quantized to Q8_0 and q.k is an integer dot product per block; V rows are decoded to
//    f32 and accumulated with f32 probabilities.
//
// Work: with grouped-query attention the query heads of a KV head (its group) share its
// keys and values, so a job takes a tile of query vectors, a KV head's group for up to 16
// vectors in all (in a prompt, several consecutive rows of one sequence), and reads each
// cached key and value once for all of them, straight from the cache into the products.
// Contexts longer than one chunk (512 positions, at fixed places) are split across jobs
// (flash-decoding, split-K): a job scores one chunk, keeps its maximum, its sum of
// exponentials and its weighted values, and a second pass combines the chunks, so that a
// single token's attention keeps every thread busy and still reads the cache once. In a long
// context a job takes every KV head of its chunk, so that the rows stream in order.
//
// A row whose positions lie in one chunk gets the softmax described above, bit for bit as
// before tiles (q.k summed in the order of dot_rows' single-token F16 product); a row over
// several chunks gets weights relative to each chunk's maximum (the F16 rounding applies to
// those) scaled by exp(chunk max - max) / sum in the combine, a difference of float rounding.
// Which applies depends on the row's positions alone, so a row's result never depends on
// the batch it came in or the number of threads.
//
// Thread-safety: a KvCache is written by store() from one thread; attention() reads it
// from the pool's threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cpu/quant_dot.h"
#include "backend/cpu/thread_pool.h"
#include "backend/device_stage.h"
#include "platform/zeroed_pages.h"
#include "powerhouse/device_types.h"

namespace powerhouse::cpu {

class KvCache {
public:
    // head_dim must be a multiple of 32 for Q8_0.
    void init(KvCacheType type, uint32_t n_layer, uint32_t n_rows, uint32_t n_head_kv, uint32_t head_dim);

    KvCacheType type() const { return type_; }
    size_t bytes() const { return k_.size() + v_.size(); }  // reserved; resident as written
    size_t row_bytes() const { return row_bytes_; }  // one position of one layer, K or V

    // Writes the keys and values of one token ([n_head_kv * head_dim] f32 each) to a row.
    void store(uint32_t layer, int64_t row, const float* k, const float* v);
    // Copies rows [from, from + count) of every layer to rows [to, to + count).
    void copy_rows(int64_t from, int64_t to, int64_t count);

    const std::byte* k_row(uint32_t layer, int64_t row) const { return k_.data() + offset(layer, row); }
    const std::byte* v_row(uint32_t layer, int64_t row) const { return v_.data() + offset(layer, row); }

private:
    size_t offset(uint32_t layer, int64_t row) const {
        return (size_t{layer} * n_rows_ + static_cast<size_t>(row)) * row_bytes_;
    }

    KvCacheType type_ = KvCacheType::f16;
    uint32_t n_layer_ = 0;
    uint32_t n_rows_ = 0;
    size_t width_ = 0;      // n_head_kv * head_dim
    size_t row_bytes_ = 0;
    // [n_layer][n_rows][row_bytes]; a page is resident once a row in it is written.
    ZeroedPages k_, v_;
};

struct AttentionShape {
    uint32_t n_head = 0;
    uint32_t n_head_kv = 0;
    uint32_t head_dim = 0;
    float scale = 0;      // of q.k; 0: 1 / sqrt(head_dim)
    uint32_t window = 0;  // sliding window: only the last `window` positions; 0: all
    // Attention sinks (gpt-oss): per head, a logit that joins the softmax's denominator (and
    // its maximum) without a value; [n_head] f32, null: none.
    const float* sinks = nullptr;
    // False (an encoder): each row reads every position of its sequence up to the last that
    // any row of the batch holds (rows after it included), not only up to its own.
    bool causal = true;
};

// For each row of the batch (its keys and values already stored in the cache) and each
// head: out = softmax(q . K^T * scale) V over positions 0 .. its own of its sequence (the
// last `window` of them for a sliding-window layer; with shape.causal false, 0 .. the last
// position of its sequence in the batch), read through the sequence's block
// table. q, out: [n][n_head * head_dim] f32. `scratch` holds one vector per pool thread
// and one that the threads share (the chunks' partial results), resized as needed: per
// thread at most the scores of one query over the longest context, as the planner counts.
// Several chunked rows in one batch are done in rounds that keep the shared vector within a
// quarter of the scores of every head over the longest context.
void attention(ThreadPool& pool, KernelIsa isa, const KvCache& cache, uint32_t layer, const AttentionShape& shape,
               const float* q, float* out, const StageBatch& batch, std::vector<std::vector<float>>& scratch);
// One sequence held in cache rows 0, 1, 2 ...: the n tokens at positions first_pos ..
// first_pos + n - 1.
void attention(ThreadPool& pool, KernelIsa isa, const KvCache& cache, uint32_t layer, const AttentionShape& shape,
               const float* q, float* out, int n, uint32_t first_pos, std::vector<std::vector<float>>& scratch);

}  // namespace powerhouse::cpu
