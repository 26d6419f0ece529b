#include "plan/device_limits.h"

#include <fmt/format.h>

namespace powerhouse {

namespace {

// What both backends share: the KV cache in F16 or Q8_0 (whose blocks of 32 values must
// not straddle two heads).
Result<void> kv_cache_supported(const char* backend, const StageShape& shape) {
    if (shape.kv_type == KvCacheType::f32) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("the {} backend keeps the KV cache in F16 or Q8_0, not F32", backend));
    }
    if (shape.kv_type == KvCacheType::q8_0 && shape.head_dim % 32 != 0) {
        return make_error(ErrorCode::unsupported, fmt::format("a Q8_0 KV cache needs a head size that is a multiple "
                                                              "of 32, not {}: use an F16 KV cache",
                                                              shape.head_dim));
    }
    return {};
}

}  // namespace

Result<void> cpu_stage_supports(const StageShape& shape) {
    return kv_cache_supported("CPU", shape);
}

Result<void> cuda_stage_supports(const StageShape& shape) {
    if (shape.encoder) {
        return make_error(ErrorCode::unsupported,
                          "encoder models run on the CPU for now: the CUDA backend has no kernels for their "
                          "LayerNorm, GELU, position embeddings and attention over the whole input; load it with "
                          "devices cpu");
    }
    if (shape.head_dim == 0 || shape.head_dim > kCudaMaxHeadDim) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("the CUDA backend's attention takes head sizes up to {}, and this model's heads "
                                      "have {} values: run it on the CPU (devices cpu)",
                                      kCudaMaxHeadDim, shape.head_dim));
    }
    const struct {
        const char* what;
        uint64_t width;
    } widths[] = {{"embedding width", shape.n_embd},
                  {"feed-forward width", shape.n_ff},
                  {"attention width (heads times head size)", uint64_t{shape.n_head} * shape.head_dim}};
    for (const auto& w : widths) {
        if (w.width % 8 != 0) {
            return make_error(ErrorCode::unsupported,
                              fmt::format("the CUDA backend reads rows in groups of 8 values, and this model's {} is "
                                          "{}: run it on the CPU (devices cpu)",
                                          w.what, w.width));
        }
    }
    if (shape.n_batch > kCudaMaxBatch) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("a batch of {} tokens is more than the CUDA backend takes at once ({})",
                                      shape.n_batch, kCudaMaxBatch));
    }
    return kv_cache_supported("CUDA", shape);
}

Result<void> stage_supports(DeviceKind kind, const StageShape& shape) {
    return kind == DeviceKind::cuda ? cuda_stage_supports(shape) : cpu_stage_supports(shape);
}

}  // namespace powerhouse
