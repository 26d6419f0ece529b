#include "synth/weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstring>
#include <numbers>
#include <system_error>
#include <thread>
#include <vector>

#include "synth/random.h"
#include "tensor/quantize.h"

namespace powerhouse::synth {
namespace {

// Stream ids: each purpose draws from its own keyed stream.
constexpr uint64_t kRowStream = 1;
constexpr uint64_t kPoolStream = 2;
constexpr uint64_t kPoolPickStream = 3;

constexpr int64_t kPoolChunkElements = 4096;       // pool weights quantized per work item
constexpr int64_t kTargetChunkElements = 1 << 18;  // per work item: fine-grained progress, little overhead

// Runs work(begin, end, scratch) over chunks of [0, n) on up to `threads` threads, the
// calling thread included; `scratch` holds `scratch_floats` floats per thread. The
// calling thread calls tick(items done) after each of its chunks; tick returning false
// stops everyone and yields `cancelled`.
using WorkFn = std::function<void(int64_t begin, int64_t end, float* scratch)>;
Result<void> run_parallel(int64_t n, int64_t chunk, unsigned threads, size_t scratch_floats, const WorkFn& work,
                          const RowProgressFn& tick) {
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    std::atomic<bool> stop{false};
    auto loop = [&](bool caller) {
        std::vector<float> scratch(scratch_floats);
        while (!stop.load(std::memory_order_relaxed)) {
            const int64_t begin = next.fetch_add(chunk);
            if (begin >= n) return;
            const int64_t end = std::min(n, begin + chunk);
            work(begin, end, scratch.data());
            const int64_t d = done.fetch_add(end - begin) + (end - begin);
            if (caller && tick && !tick(d)) stop.store(true);
        }
    };
    const int64_t n_chunks = (n + chunk - 1) / chunk;
    const auto n_threads = static_cast<unsigned>(std::clamp<int64_t>(n_chunks, 1, std::max(1u, threads)));
    std::vector<std::thread> workers;
    workers.reserve(n_threads - 1);
    for (unsigned t = 1; t < n_threads; ++t) {
        try {
            workers.emplace_back(loop, false);
        } catch (const std::system_error&) {
            break;  // the system refuses more threads: the ones running (and the caller) finish the work
        }
    }
    loop(true);
    for (std::thread& w : workers) w.join();
    if (stop.load()) return make_error(ErrorCode::cancelled, "cancelled");
    return {};
}

// Approximately N(0, std^2) values, plus `mean`.
void draw_normal(Xoshiro256& rng, float* x, int64_t n, float mean, float std) {
    for (int64_t i = 0; i < n; ++i) x[i] = mean + std * rng.normal();
}

Result<void> fill_rows_direct(const PlannedTensor& tensor, std::span<std::byte> out, const WeightOptions& options,
                              uint64_t key, const RowProgressFn& progress) {
    const GgmlType type = tensor.spec.type;
    const int64_t row_length = tensor.spec.dims[0];
    const int64_t n_rows = tensor.spec.n_elements() / row_length;
    const uint64_t stride = row_bytes(type_traits(type), static_cast<uint64_t>(row_length));
    const int64_t chunk = std::max<int64_t>(1, kTargetChunkElements / row_length);
    return run_parallel(
        n_rows, chunk, options.threads, static_cast<size_t>(row_length),
        [&](int64_t begin, int64_t end, float* row) {
            for (int64_t r = begin; r < end; ++r) {
                Xoshiro256 rng(mix_key(key, kRowStream, static_cast<uint64_t>(r)));
                draw_normal(rng, row, row_length, 0.0f, kMatrixStd);
                quantize_row(type, row, out.data() + static_cast<uint64_t>(r) * stride, row_length);
            }
        },
        progress);
}

Result<void> fill_rows_pooled(const PlannedTensor& tensor, std::span<std::byte> out, const WeightOptions& options,
                              uint64_t key, const RowProgressFn& progress) {
    const GgmlType type = tensor.spec.type;
    const TypeTraits& traits = type_traits(type);
    const int64_t block_size = traits.block_size;
    const uint64_t block_bytes = traits.type_size;
    // Whole chunks of whole blocks: every chunk is quantized as one row.
    const int64_t chunk_elements = std::max(kPoolChunkElements / block_size, int64_t{1}) * block_size;
    const int64_t pool_elements =
        std::max<int64_t>(1, static_cast<int64_t>(options.pool_weights) / chunk_elements) * chunk_elements;
    const int64_t pool_blocks = pool_elements / block_size;
    std::vector<std::byte> pool(static_cast<size_t>(pool_blocks) * block_bytes);  // [pool_blocks] blocks of `type`

    PH_TRY(run_parallel(
        pool_elements / chunk_elements, 1, options.threads, static_cast<size_t>(chunk_elements),
        [&](int64_t begin, int64_t end, float* x) {
            for (int64_t c = begin; c < end; ++c) {
                Xoshiro256 rng(mix_key(key, kPoolStream, static_cast<uint64_t>(c)));
                draw_normal(rng, x, chunk_elements, 0.0f, kMatrixStd);
                quantize_row(type, x,
                             pool.data() + static_cast<uint64_t>(c * chunk_elements / block_size) * block_bytes,
                             chunk_elements);
            }
        },
        [&](int64_t) { return !progress || progress(0); }));

    const int64_t row_length = tensor.spec.dims[0];
    const int64_t n_rows = tensor.spec.n_elements() / row_length;
    const int64_t blocks_per_row = row_length / block_size;
    const uint64_t stride = static_cast<uint64_t>(blocks_per_row) * block_bytes;
    const int64_t chunk = std::max<int64_t>(1, kTargetChunkElements / row_length);
    return run_parallel(
        n_rows, chunk, options.threads, 0,
        [&](int64_t begin, int64_t end, float*) {
            for (int64_t r = begin; r < end; ++r) {
                Xoshiro256 rng(mix_key(key, kPoolPickStream, static_cast<uint64_t>(r)));
                std::byte* dst = out.data() + static_cast<uint64_t>(r) * stride;
                for (int64_t b = 0; b < blocks_per_row; ++b) {
                    const uint32_t pick = rng.below(static_cast<uint32_t>(pool_blocks));
                    std::memcpy(dst + static_cast<uint64_t>(b) * block_bytes,
                                pool.data() + static_cast<uint64_t>(pick) * block_bytes, block_bytes);
                }
            }
        },
        progress);
}

}  // namespace

std::vector<float> llama3_rope_factors(uint32_t head_dim, float freq_base) {
    constexpr double kFactor = 8.0;
    constexpr double kLowFreqFactor = 1.0;
    constexpr double kHighFreqFactor = 4.0;
    constexpr double kOriginalContext = 8192.0;
    const double low_freq_wavelen = kOriginalContext / kLowFreqFactor;
    const double high_freq_wavelen = kOriginalContext / kHighFreqFactor;
    std::vector<float> factors;
    for (uint32_t i = 0; i < head_dim / 2; ++i) {
        const double freq = 1.0 / std::pow(static_cast<double>(freq_base), 2.0 * i / head_dim);
        const double wavelen = 2.0 * std::numbers::pi / freq;
        double factor = 1.0;  // high frequencies keep their rotation speed
        if (wavelen > low_freq_wavelen) {
            factor = kFactor;  // low frequencies are slowed down by the full factor
        } else if (wavelen >= high_freq_wavelen) {
            const double smooth = (kOriginalContext / wavelen - kLowFreqFactor) / (kHighFreqFactor - kLowFreqFactor);
            factor = 1.0 / ((1.0 - smooth) / kFactor + smooth);
        }
        factors.push_back(static_cast<float>(factor));
    }
    return factors;
}

Result<void> fill_tensor(const PlannedTensor& tensor, std::span<std::byte> out, const WeightOptions& options,
                         const RowProgressFn& progress) {
    const GgufTensorSpec& spec = tensor.spec;
    if (out.size() != spec.n_bytes()) {
        return make_error(ErrorCode::internal, fmt::format("tensor '{}': {} bytes to fill, expected {}", spec.name,
                                                           out.size(), spec.n_bytes()));
    }
    const uint64_t key = mix_key(options.seed, hash_name(spec.name));
    const WeightInit init = weight_init(tensor.role);
    if (init != WeightInit::matrix) {
        // Vectors (F32, a few thousand values): no threads needed.
        std::vector<float> values;
        if (init == WeightInit::rope_freqs) {
            values = llama3_rope_factors(static_cast<uint32_t>(spec.n_elements() * 2), options.rope_freq_base);
        } else if (init == WeightInit::fixed) {
            values = tensor.fixed;
        } else {
            values.resize(static_cast<size_t>(spec.n_elements()));
            Xoshiro256 rng(mix_key(key, kRowStream, 0));
            const bool norm = init == WeightInit::norm;
            draw_normal(rng, values.data(), spec.n_elements(), norm ? 1.0f : 0.0f, norm ? kNormStd : kBiasStd);
        }
        if (spec.type != GgmlType::f32 || values.size() * sizeof(float) != out.size()) {
            return make_error(ErrorCode::internal, fmt::format("tensor '{}' must be a F32 vector", spec.name));
        }
        std::memcpy(out.data(), values.data(), out.size());
        return {};
    }
    const bool block_quantized = type_traits(spec.type).block_size > 1;
    if (block_quantized && options.pool_weights > 0 && spec.n_elements() > static_cast<int64_t>(options.pool_weights)) {
        return fill_rows_pooled(tensor, out, options, key, progress);
    }
    return fill_rows_direct(tensor, out, options, key, progress);
}

}  // namespace powerhouse::synth
