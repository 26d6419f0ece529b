// What each kind of device can run, as pure functions of a model's shape and the load
// options: the limits of the backends' kernels written down once. The planner checks them
// before anything loads (so that the app's preview and `powerhouse-cli plan` refuse what a
// device cannot take, with the reason), and each stage checks them again when it binds, so
// the two can never disagree.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "powerhouse/device_types.h"
#include "powerhouse/plan.h"
#include "powerhouse/result.h"

namespace powerhouse {

// The GPU attention holds a head in registers, at most 8 values per lane of a warp.
inline constexpr uint32_t kCudaMaxHeadDim = 256;
// Tokens one CUDA stage call takes (its activation buffers are sized for them).
inline constexpr uint32_t kCudaMaxBatch = 4096;
// Prompts of at least this many tokens go through cuBLAS on a CUDA stage: below it the fused
// kernels read the weights ceil(n / 8) times, less than decoding them to f32 and reading
// that back. (A first guess: the device check's prompt figures are where to tune it.) A
// stage whose batch reaches it keeps its largest matrix but the head decoded to f32 (the
// planner counts that buffer).
inline constexpr uint32_t kCudaCublasMinTokens = 32;

struct StageShape {
    uint32_t head_dim = 0;
    KvCacheType kv_type = KvCacheType::f16;
    uint32_t n_batch = 1;
    // The widths that matrix products take as input (0: not checked): the CUDA products and
    // the embedding lookup read 8 values at a time.
    uint32_t n_embd = 0;
    uint32_t n_ff = 0;
    uint32_t n_head = 0;
    // An encoder (BERT: LayerNorm, GELU, position rows, attention that is not causal): the CUDA
    // stage has no kernels for it yet.
    bool encoder = false;
};

// Ok, or why a stage of that kind cannot run the shape (ErrorCode::unsupported, or
// invalid_argument for a batch too large), in words that say what to change.
Result<void> cpu_stage_supports(const StageShape& shape);
Result<void> cuda_stage_supports(const StageShape& shape);
Result<void> stage_supports(DeviceKind kind, const StageShape& shape);

}  // namespace powerhouse
