#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/vec.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace powerhouse::cpu {

namespace {

// Query vectors per KV head that one job takes at once: its group of query heads, for as
// many rows of one sequence as keep within this many (at least one row), so that each key
// and value read from the cache serves all of them.
constexpr uint32_t kTileQueries = 16;
// Positions per chunk. Chunks are fixed stretches of positions, [c * kChunk, (c + 1) *
// kChunk), and whether a row's softmax is whole (all of its positions in one chunk) or
// combined from chunks depends on its positions alone: a row's result does not depend on
// the batch around it, the tiles or the threads (perplexity over a text is the same for
// every batch size). 512 positions make 64 jobs of a token at 32k, and keep a job's scores
// in the second-level cache.
constexpr uint32_t kChunk = 512;
// Cache rows a run takes at most: every KV head's part of them is read before the next run,
// so that the rows pass once, in order.
constexpr uint32_t kSubRows = 4;
// How far ahead of the run being computed its rows are asked for (into the second-level
// cache): the kernels' loads, spread over several heads' rows, keep too few misses in
// flight for the hardware prefetchers to follow; on a 2-core EPYC (one thread, SmolLM2's
// shape) this took a single token's pass over 32k positions from 3.5 to 2.3 ms per layer.
constexpr size_t kPrefetchBytes = 8192;

// Consecutive batch rows of one sequence at consecutive positions.
struct Tile {
    int row = 0;
    int rows = 0;
    uint32_t lo = 0, hi = 0;  // the positions any of them reads: [lo, hi)
    uint32_t first_chunk = 0, n_chunks = 0;
    bool combined = false;  // a row reads more than one chunk
    size_t partials = 0;    // then: where its partial results start in its round's, in floats
};

struct Job {
    uint32_t tile, chunk;       // chunk: counted from the tile's first
    uint32_t kv_begin, kv_end;  // its KV heads
    uint32_t q_begin, q_end;    // its query vectors of each (all but in short contexts)
};

// The jobs of one pass over the pool, and the combines after it: consecutive tiles whose
// partial results fit the budget.
struct Round {
    std::vector<Job> jobs;
    std::vector<uint32_t> combines;  // tiles
    size_t shared_floats = 0;
};

// One call of attention(): the tiles and the work of a job. A job takes one chunk of one
// tile for every KV head, so that it reads whole cache rows, one after the other; where
// that leaves too few jobs for the threads (a short context) each KV head is a job. The
// scratch stays within the planner's figure for attention (the scores of every head over
// the context, plan/planner.cpp): a quarter for the chunks' partial results, the rest for
// the threads, and never less per thread than one query's scores over the longest context
// (what the CPU stage allocates); where a tile's scores do not fit in that, a job takes
// fewer of the tile's query vectors.
class AttentionRun {
public:
    AttentionRun(KernelIsa isa, const KvCache& cache, uint32_t layer, const AttentionShape& shape, const float* q,
                 float* out, const StageBatch& batch, int n_threads);

    size_t thread_floats() const { return thread_floats_; }
    const std::vector<Round>& rounds() const { return rounds_; }

    void work(const Job& job, float* scratch, float* shared) const;
    void combine(uint32_t tile, float* scratch, const float* shared) const;

private:
    // The positions batch row t reads: [first, n_keys): up to its own, or (not causal) up to
    // the last of its sequence in the batch.
    uint32_t n_keys(int t) const {
        return shape_.causal ? static_cast<uint32_t>(batch_.pos[t]) + 1 : keys_end_[static_cast<size_t>(t)];
    }
    uint32_t first(int t) const {
        const uint32_t n = n_keys(t);
        return shape_.window != 0 && n > shape_.window ? n - shape_.window : 0;
    }
    bool whole(int t) const { return first(t) / kChunk == (n_keys(t) - 1) / kChunk; }
    // Query vector qi of KV head g's tile: row qi / group, head g * group + qi % group.
    int row_of(const Tile& tile, uint32_t qi) const { return tile.row + static_cast<int>(qi / group_); }
    uint32_t head_of(uint32_t g, uint32_t qi) const { return g * group_ + qi % group_; }
    float* output(int t, uint32_t h) const { return out_ + static_cast<size_t>(t) * q_width_ + size_t{h} * hd_; }
    size_t partial_stride() const { return hd_ + 2; }  // max, sum, then the weighted values
    // Tile's partial result of its chunk c, KV head g, query vector 0: [n_chunks][n_head_kv][nq].
    size_t partial_at(const Tile& tile, uint32_t chunk, uint32_t g) const {
        const size_t nq = static_cast<size_t>(tile.rows) * group_;
        return tile.partials + (size_t{chunk} * shape_.n_head_kv + g) * nq * partial_stride();
    }
    // Calls fn(position, run, cache row) for runs of consecutive cache rows covering
    // positions [from, to) of tile's sequence, at most kSubRows each, prefetching the keys
    // (or values) kPrefetchBytes ahead.
    template <class Fn>
    void for_runs(const Tile& tile, uint32_t from, uint32_t to, bool keys, Fn&& fn) const;

    KernelIsa isa_;
    const KvCache& cache_;
    uint32_t layer_;
    AttentionShape shape_;
    const float* q_;
    float* out_;
    const StageBatch& batch_;
    uint32_t hd_, group_;
    size_t q_width_;
    bool q8_;
    size_t head_bytes_;  // one head of one cache row
    size_t q8_stride_;   // one query as Q8_0 blocks
    float scale_;
    uint32_t stride_ = 0;  // of a query's scores: the longest chunk of any tile
    std::vector<uint32_t> keys_end_;  // not causal: per row, its sequence's last position + 1
    std::vector<Tile> tiles_;
    std::vector<Round> rounds_;
    size_t thread_floats_ = 0;
};

AttentionRun::AttentionRun(KernelIsa isa, const KvCache& cache, uint32_t layer, const AttentionShape& shape,
                           const float* q, float* out, const StageBatch& batch, int n_threads)
    : isa_(isa),
      cache_(cache),
      layer_(layer),
      shape_(shape),
      q_(q),
      out_(out),
      batch_(batch),
      hd_(shape.head_dim),
      group_(shape.n_head / shape.n_head_kv),
      q_width_(size_t{shape.n_head} * shape.head_dim),
      q8_(cache.type() == KvCacheType::q8_0),
      head_bytes_(q8_ ? hd_ / kQK * sizeof(BlockQ8_0) : size_t{hd_} * sizeof(uint16_t)),
      q8_stride_(hd_ / kQK * sizeof(BlockQ8_0)),
      scale_(shape.scale != 0 ? shape.scale : 1.0f / std::sqrt(static_cast<float>(shape.head_dim))) {
    if (!shape.causal) {
        keys_end_.assign(static_cast<size_t>(batch.n), 0);
        for (int t = 0; t < batch.n; ++t) {
            uint32_t end = 0;
            for (int u = 0; u < batch.n; ++u) {
                if (batch.seq[u] == batch.seq[t]) end = std::max(end, static_cast<uint32_t>(batch.pos[u]) + 1);
            }
            keys_end_[static_cast<size_t>(t)] = end;
        }
    }
    const int max_rows = static_cast<int>(std::max(1u, kTileQueries / group_));
    uint32_t most_keys = 0;
    for (int t = 0; t < batch.n;) {
        Tile tile{t, 1, first(t), n_keys(t)};
        tile.combined = !whole(t);
        while (t + tile.rows < batch.n && tile.rows < max_rows && batch.seq[t + tile.rows] == batch.seq[t] &&
               batch.pos[t + tile.rows] == batch.pos[t + tile.rows - 1] + 1) {
            tile.hi = n_keys(t + tile.rows);
            tile.combined = tile.combined || !whole(t + tile.rows);
            ++tile.rows;
        }
        tile.first_chunk = tile.lo / kChunk;
        tile.n_chunks = (tile.hi - 1) / kChunk - tile.first_chunk + 1;
        stride_ = std::max(stride_, std::min(tile.hi - tile.lo, kChunk));
        most_keys = std::max(most_keys, tile.hi);
        tiles_.push_back(tile);
        t += tile.rows;
    }
    // Rounds: tiles whose partial results fit in a quarter of the scores of every head over
    // the longest context (the planner's bound for attention).
    const size_t budget = size_t{shape.n_head} * most_keys / 4;
    const auto threads = static_cast<size_t>(std::max(1, n_threads));
    // Floats per thread: what one query's scores over the longest context took before tiles
    // (what the CPU stage allocates), or three quarters of the planner's figure shared by
    // the threads, whichever is more.
    const size_t cap = std::max(most_keys + 2 * size_t{hd_}, 3 * budget / threads);
    const size_t per_query = stride_ + 2 * size_t{hd_};
    size_t most_queries = 0;
    for (const Tile& tile : tiles_) most_queries = std::max(most_queries, static_cast<size_t>(tile.rows) * group_);
    const auto queries_per_job = static_cast<uint32_t>(std::clamp<size_t>(cap / per_query, 1, most_queries));
    for (uint32_t i = 0; i < tiles_.size();) {
        Round round;
        const uint32_t begin = i;
        size_t pieces = 0;
        uint32_t most_chunks = 0;
        for (; i < tiles_.size(); ++i) {
            Tile& tile = tiles_[i];
            const size_t nq = static_cast<size_t>(tile.rows) * group_;
            const size_t floats = tile.combined ? size_t{tile.n_chunks} * shape.n_head_kv * nq * partial_stride() : 0;
            if (i > begin && round.shared_floats + floats > budget) break;
            tile.partials = round.shared_floats;
            round.shared_floats += floats;
            if (tile.combined) round.combines.push_back(i);
            pieces += tile.n_chunks;
            most_chunks = std::max(most_chunks, tile.n_chunks);
        }
        // Whole rows when the cache is long enough to stream, the jobs are enough and the
        // scratch allows.
        const bool stream =
            most_chunks > 1 && pieces >= 2 * threads && size_t{shape.n_head_kv} * most_queries * per_query <= cap;
        const uint32_t heads = stream ? shape.n_head_kv : 1;
        // Chunk by chunk, so that the threads read about the same part of the cache at a
        // time (in a prompt, every tile reads the first chunks).
        for (uint32_t c = 0; c < most_chunks; ++c) {
            for (uint32_t t = begin; t < i; ++t) {
                if (c >= tiles_[t].n_chunks) continue;
                const auto nq = static_cast<uint32_t>(tiles_[t].rows) * group_;
                for (uint32_t g = 0; g < shape.n_head_kv; g += heads) {
                    for (uint32_t q0 = 0; q0 < nq; q0 += queries_per_job) {
                        round.jobs.push_back({t, c, g, g + heads, q0, std::min(nq, q0 + queries_per_job)});
                    }
                }
            }
        }
        rounds_.push_back(std::move(round));
    }
    // Per thread, for each KV head and query vector of a job: scores [stride], weighted
    // values and converted queries [head_dim] (Q8_0 blocks take fewer bytes than floats);
    // a combine's weights per chunk.
    size_t most_chunks = 0;
    for (const Tile& tile : tiles_) most_chunks = std::max<size_t>(most_chunks, tile.n_chunks);
    thread_floats_ =
        std::max(std::min(size_t{shape.n_head_kv} * most_queries, std::max<size_t>(cap / per_query, 1)) * per_query,
                 most_chunks);
}

template <class Fn>
void AttentionRun::for_runs(const Tile& tile, uint32_t from, uint32_t to, bool keys, Fn&& fn) const {
    const int32_t* table = batch_.table(tile.row);
    const uint32_t bs = batch_.block_size;
    const auto ahead = static_cast<uint32_t>(std::max<size_t>(kSubRows, kPrefetchBytes / cache_.row_bytes()));
    for (uint32_t p = from; p < to;) {
        const uint32_t in_block = p % bs;
        const uint32_t run = std::min({bs - in_block, to - p, kSubRows});
        if (const uint32_t next = p + ahead; next < to) {
            const int64_t row = int64_t{table[next / bs]} * bs + next % bs;
            const std::byte* bytes = keys ? cache_.k_row(layer_, row) : cache_.v_row(layer_, row);
            const size_t n = size_t{std::min({bs - next % bs, to - next, run})} * cache_.row_bytes();
            for (size_t at = 0; at < n; at += 64) __builtin_prefetch(bytes + at, 0, 2);
        }
        fn(p, run, int64_t{table[p / bs]} * bs + in_block);
        p += run;
    }
}

void AttentionRun::work(const Job& job, float* scratch, float* shared) const {
    const Tile& tile = tiles_[job.tile];
    const uint32_t nq = job.q_end - job.q_begin;  // query vectors per KV head
    const uint32_t n_heads = job.kv_end - job.kv_begin;
    const uint32_t c0 = std::max(tile.lo, (tile.first_chunk + job.chunk) * kChunk);
    const uint32_t c1 = std::min(tile.hi, (tile.first_chunk + job.chunk + 1) * kChunk);
    const uint32_t len = c1 - c0;
    // KV head g's query vector qi is number (g - kv_begin) * nq + qi - q_begin of each of these.
    float* scores = scratch;                               // [stride]: scores, then weights
    float* acc = scores + size_t{n_heads} * nq * stride_;  // [hd]: the weighted values
    float* queries = acc + size_t{n_heads} * nq * hd_;     // [hd] f32 (F16 cache) or Q8_0 blocks
    auto* queries_q8 = reinterpret_cast<std::byte*>(queries);
    const auto vec = [&](float* base, uint32_t g, uint32_t qi, size_t width) {
        return base + (size_t{g - job.kv_begin} * nq + qi - job.q_begin) * width;
    };

    // The queries as the keys' dot products take them (llama.cpp's numerics, attention.h):
    // rounded to F16, or quantized to Q8_0.
    for (uint32_t g = job.kv_begin; g < job.kv_end; ++g) {
        for (uint32_t qi = job.q_begin; qi < job.q_end; ++qi) {
            const float* q = q_ + static_cast<size_t>(row_of(tile, qi)) * q_width_ + size_t{head_of(g, qi)} * hd_;
            if (q8_) {
                quantize_activations(isa_, GgmlType::q8_0, q,
                                     queries_q8 + (size_t{g - job.kv_begin} * nq + qi - job.q_begin) * q8_stride_, hd_);
            } else {
                float* dst = vec(queries, g, qi, hd_);
                std::copy(q, q + hd_, dst);
                scale_round_f16(isa_, dst, hd_, 1.0f);
            }
        }
    }
    // Scores: each run of keys is read once for all query vectors.
    for_runs(tile, c0, c1, true, [&](uint32_t p, uint32_t run, int64_t row) {
        const std::byte* k = cache_.k_row(layer_, row);
        for (uint32_t g = job.kv_begin; g < job.kv_end; ++g) {
            float* dst = vec(scores, g, job.q_begin, stride_) + (p - c0);
            if (q8_) {
                dot_tile_q8_0(isa_, queries_q8 + size_t{g - job.kv_begin} * nq * q8_stride_, q8_stride_,
                              static_cast<int>(nq), k + g * head_bytes_, cache_.row_bytes(), static_cast<int>(run), hd_,
                              dst, stride_);
            } else {
                dot_tile_f16(isa_, vec(queries, g, job.q_begin, hd_), hd_, static_cast<int>(nq), k + g * head_bytes_,
                             cache_.row_bytes(), static_cast<int>(run), hd_, dst, stride_);
            }
        }
    });
    // Softmax over the positions each query reads in this chunk; the others weigh 0. A row
    // that reads one chunk gets the whole softmax (sinks included) with normalized weights,
    // as llama.cpp's; a row that reads several gets weights relative to the chunk's maximum,
    // and combine() scales each chunk's sum.
    for (uint32_t g = job.kv_begin; g < job.kv_end; ++g) {
        for (uint32_t qi = job.q_begin; qi < job.q_end; ++qi) {
            const int t = row_of(tile, qi);
            const uint32_t h = head_of(g, qi);
            const bool single = whole(t);
            const uint32_t a = std::clamp(first(t), c0, c1) - c0;
            const uint32_t b = std::clamp(n_keys(t), c0, c1) - c0;
            float* s = vec(scores, g, qi, stride_);
            float max = -INFINITY;
            double sum = 0;
            if (a < b) {
                max = scale_max(isa_, s + a, b - a, scale_);
                if (single && shape_.sinks != nullptr) max = std::max(max, shape_.sinks[h]);
                sum = exp_sum(isa_, s + a, b - a, max);
            }
            std::fill(s, s + a, 0.0f);
            std::fill(s + b, s + len, 0.0f);
            float weight = 1.0f;
            if (single) {
                if (a >= b) continue;  // its chunk is another
                if (shape_.sinks != nullptr) sum += std::exp(shape_.sinks[h] - max);
                weight = static_cast<float>(1.0 / sum);
            } else {
                float* part = shared + partial_at(tile, job.chunk, g) + size_t{qi} * partial_stride();
                part[0] = max;
                part[1] = static_cast<float>(sum);
            }
            if (!q8_) {
                scale_round_f16(isa_, s + a, b - a, weight);  // as ggml: the probabilities in F16
            } else if (weight != 1.0f) {
                scale_max(isa_, s + a, b - a, weight);
            }
        }
    }
    // Weighted values: each run of values is read once for all query vectors.
    std::fill(acc, acc + size_t{n_heads} * nq * hd_, 0.0f);
    for_runs(tile, c0, c1, false, [&](uint32_t p, uint32_t run, int64_t row) {
        const std::byte* v = cache_.v_row(layer_, row);
        for (uint32_t g = job.kv_begin; g < job.kv_end; ++g) {
            const float* w = vec(scores, g, job.q_begin, stride_) + (p - c0);
            (q8_ ? accumulate_tile_q8_0 : accumulate_tile_f16)(
                isa_, w, stride_, static_cast<int>(nq), v + g * head_bytes_, cache_.row_bytes(), static_cast<int>(run),
                hd_, vec(acc, g, job.q_begin, hd_), hd_);
        }
    });
    for (uint32_t g = job.kv_begin; g < job.kv_end; ++g) {
        for (uint32_t qi = job.q_begin; qi < job.q_end; ++qi) {
            const int t = row_of(tile, qi);
            const float* src = vec(acc, g, qi, hd_);
            if (!whole(t)) {
                std::copy(src, src + hd_, shared + partial_at(tile, job.chunk, g) + size_t{qi} * partial_stride() + 2);
            } else if (first(t) < c1 && n_keys(t) > c0) {
                std::copy(src, src + hd_, output(t, head_of(g, qi)));
            }
        }
    }
}

// Flash-decoding's last step, for the rows that read several chunks: each chunk's weighted
// values, scaled by exp(its max - the overall max) over the overall sum.
void AttentionRun::combine(uint32_t tile_index, float* scratch, const float* shared) const {
    const Tile& tile = tiles_[tile_index];
    const auto nq = static_cast<uint32_t>(tile.rows) * group_;
    const size_t chunk_stride = size_t{shape_.n_head_kv} * nq * partial_stride();
    float* weights = scratch;  // [n_chunks]
    for (uint32_t g = 0; g < shape_.n_head_kv; ++g) {
        for (uint32_t qi = 0; qi < nq; ++qi) {
            if (whole(row_of(tile, qi))) continue;
            const uint32_t h = head_of(g, qi);
            const float* part = shared + partial_at(tile, 0, g) + size_t{qi} * partial_stride();
            float max = shape_.sinks != nullptr ? shape_.sinks[h] : -INFINITY;
            for (uint32_t c = 0; c < tile.n_chunks; ++c) {
                if (part[c * chunk_stride + 1] > 0) max = std::max(max, part[c * chunk_stride]);
            }
            double sum = shape_.sinks != nullptr ? std::exp(static_cast<double>(shape_.sinks[h] - max)) : 0.0;
            for (uint32_t c = 0; c < tile.n_chunks; ++c) {
                const float* p = part + c * chunk_stride;
                weights[c] = p[1] > 0 ? std::exp(p[0] - max) : 0.0f;  // a chunk the row does not read: none
                sum += static_cast<double>(weights[c]) * p[1];
            }
            const auto inv = static_cast<float>(1.0 / sum);
            for (uint32_t c = 0; c < tile.n_chunks; ++c) weights[c] *= inv;
            float* out = output(row_of(tile, qi), h);
            std::fill(out, out + hd_, 0.0f);
            accumulate_tile(isa_, weights, 1, 1, part + 2, chunk_stride, static_cast<int>(tile.n_chunks), hd_, out,
                            hd_);
        }
    }
}

}  // namespace

void KvCache::init(KvCacheType type, uint32_t n_layer, uint32_t n_rows, uint32_t n_head_kv, uint32_t head_dim) {
    type_ = type;
    n_layer_ = n_layer;
    n_rows_ = n_rows;
    width_ = size_t{n_head_kv} * head_dim;
    row_bytes_ = type == KvCacheType::q8_0 ? width_ / kQK * sizeof(BlockQ8_0) : width_ * sizeof(uint16_t);
    const size_t total = size_t{n_layer} * n_rows * row_bytes_;
    k_ = ZeroedPages(total);
    v_ = ZeroedPages(total);
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
               const float* q, float* out, const StageBatch& batch, std::vector<std::vector<float>>& scratch) {
    if (batch.n <= 0) return;
    const AttentionRun run(isa, cache, layer, shape, q, out, batch, pool.size());
    const auto n_threads = static_cast<size_t>(pool.size());
    if (scratch.size() < n_threads + 1) scratch.resize(n_threads + 1);
    for (size_t i = 0; i < n_threads; ++i) {
        if (scratch[i].size() < run.thread_floats()) scratch[i].resize(run.thread_floats());
    }
    std::vector<float>& shared = scratch[n_threads];
    for (const Round& round : run.rounds()) {
        if (shared.size() < round.shared_floats) shared.resize(round.shared_floats);
        pool.parallel_chunks(static_cast<int64_t>(round.jobs.size()), [&](int64_t job, int thread) {
            run.work(round.jobs[static_cast<size_t>(job)], scratch[static_cast<size_t>(thread)].data(), shared.data());
        });
        if (round.combines.empty()) continue;
        pool.parallel_chunks(static_cast<int64_t>(round.combines.size()), [&](int64_t i, int thread) {
            run.combine(round.combines[static_cast<size_t>(i)], scratch[static_cast<size_t>(thread)].data(),
                        shared.data());
        });
    }
}

void attention(ThreadPool& pool, KernelIsa isa, const KvCache& cache, uint32_t layer, const AttentionShape& shape,
               const float* q, float* out, int n, uint32_t first_pos, std::vector<std::vector<float>>& scratch) {
    const ContiguousBatch rows(n, first_pos);
    attention(pool, isa, cache, layer, shape, q, out, rows.batch(), scratch);
}

}  // namespace powerhouse::cpu
