// C-style launchers of the Powerhouse CUDA kernels: the only entry points into kernels/
// from the rest of the project. A plain C/C++ header (no CUDA language features beyond
// cudaStream_t from the runtime API), so that engine/src/backend/cuda compiles as
// ordinary C++ and no engine type ever reaches the kernels (DESIGN.md section 2).
//
// Every launcher enqueues work on `stream` (0: the legacy default stream) on the current
// device and returns at once; the value is a cudaError_t: 0 (cudaSuccess), an argument
// error found before launching (cudaErrorInvalidValue, cudaErrorNotSupported for a type
// without a kernel), or the launch error. Errors inside the kernel appear later, on the
// stream. Pointers are device pointers.
//
// Thread-safety: the launchers hold no state; they may be called from any host thread,
// with the usual CUDA rule that the current device is per thread.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

extern "C" {

// 1 when ph_dequantize_f32/_f16 handle the ggml type id, else 0. The types: F32, F16,
// BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
int ph_dequantize_supported(uint32_t ggml_type_id);

// Elements per block of a supported type (1 for F32/F16/BF16, 32 or 256), else 0.
int ph_dequantize_block_size(uint32_t ggml_type_id);

// Decodes n_elements values stored as `ggml_type_id` at src (GGUF layout, any byte
// alignment) into dst[0..n_elements). n_elements must be a multiple of the type's block
// size; a tensor of R rows of K elements is one call with n_elements = R * K, since a row
// is always a whole number of blocks. The results are bit-identical to the engine's CPU
// reference (engine/src/tensor/dequantize.cpp). dst must be 4-byte aligned; 16-byte
// aligned dst and src take the vectorized paths.
int ph_dequantize_f32(uint32_t ggml_type_id, const void* src, float* dst, int64_t n_elements, cudaStream_t stream);

// As ph_dequantize_f32, but writes IEEE binary16 bits (the f32 result rounded to nearest
// even, the engine's f32_to_f16): the operand format of cuBLAS tensor-core GEMMs. dst
// must be 2-byte aligned.
int ph_dequantize_f16(uint32_t ggml_type_id, const void* src, uint16_t* dst, int64_t n_elements, cudaStream_t stream);

// --- Matrix products ---------------------------------------------------------------------

// 1 when ph_matmul handles the ggml type id (the dequantize types).
int ph_matmul_supported(uint32_t ggml_type_id);

// Fused dequantize + product of a weight matrix with a few activation rows, the decode
// path: for t < n_tokens and r < rows,
//   y[t * y_stride + r] = sum over i < in of W[r][i] * x[t * x_stride + i]
// where row r of W holds `in` elements of the type at w + r * row_stride bytes (in a
// multiple of the block size, and of 8 for F32/F16/BF16, as every model width is). One warp per row; each weight block is decoded once for up
// to 8 tokens, so larger batches loop over groups of 8 (prompts take ph_f32_to_f16 +
// a cuBLAS GEMM instead when cuBLAS is there). Products are summed in f32 with FMAs: the
// result differs from the CPU reference only by rounding order (and the CPU's 8-bit
// activations).
int ph_matmul(uint32_t ggml_type_id, const void* w, size_t row_stride, int64_t rows, int64_t in, const float* x,
              int64_t x_stride, float* y, int64_t y_stride, int n_tokens, cudaStream_t stream);

// The same products with 8-bit activations, for the quantized types (matmul_q8.cu): the
// decode path, integer dot products per block as the CPU engine and llama.cpp compute
// them. ph_quantize_activations turns n_tokens rows of `in` floats (x_stride apart) into
// the activation format the weight type pairs with (Q8_0 with Q8_1's sums, or Q8_K),
// act_stride bytes per token (at least ph_q8_activation_bytes(in), a multiple of 16, act
// 16-byte aligned); ph_matmul_q8 multiplies W (as ph_matmul) with them. `in` must be a
// multiple of the weight type's block (256 for the K-quants). ph_matmul_q8_usable: 1 when
// the type has this path and w and row_stride have the alignment its loads need (2 or 4
// bytes; any for MXFP4), else 0: use ph_matmul.
size_t ph_q8_activation_bytes(int64_t in);
int ph_matmul_q8_usable(uint32_t ggml_type_id, const void* w, size_t row_stride);
int ph_quantize_activations(uint32_t ggml_type_id, const float* x, int64_t x_stride, int64_t in, int n_tokens,
                            void* act, size_t act_stride, cudaStream_t stream);
int ph_matmul_q8(uint32_t ggml_type_id, const void* w, size_t row_stride, int64_t rows, int64_t in, const void* act,
                 size_t act_stride, int n_tokens, float* y, int64_t y_stride, cudaStream_t stream);

// The decode step's launches, fewer: each of these does in one launch what two do above.
// The results are the unfused launches' bits (same functions, same order of operations).
//  - ph_matmul_q8_residual: y = residual + W x (the residual add after a layer's output
//    products); residual has y's layout and may be y.
//  - ph_rms_norm_quantize: ph_rms_norm of n_tokens rows of `in` into y, then
//    ph_quantize_activations of y for the weight type.
//  - ph_gate_quantize: y = silu(a) * b (PH_GATE_SILU) or gelu(a) * b (PH_GATE_GELU) for
//    n_tokens rows of `in`, then ph_quantize_activations of y.
//  - ph_matmul_q8_set: up to PH_MAX_PRODUCTS products of one type that read the same
//    activations (Q, K and V; gate and up), each with its own matrix, rows and output (and
//    residual, or null), in one launch (one each where some rows start on 16 bytes and
//    others do not): each product's result is ph_matmul_q8's (or ph_matmul_q8_residual's)
//    bits.
enum { PH_GATE_SILU = 0, PH_GATE_GELU = 1 };
enum { PH_MAX_PRODUCTS = 3 };
typedef struct PhProduct {
    const void* w;
    size_t row_stride;
    int64_t rows;
    float* y;
    int64_t y_stride;
    const float* residual;
} PhProduct;
int ph_matmul_q8_set(uint32_t ggml_type_id, const PhProduct* products, int count, int64_t in, const void* act,
                     size_t act_stride, int n_tokens, cudaStream_t stream);
int ph_matmul_q8_residual(uint32_t ggml_type_id, const void* w, size_t row_stride, int64_t rows, int64_t in,
                          const void* act, size_t act_stride, int n_tokens, float* y, int64_t y_stride,
                          const float* residual, cudaStream_t stream);
int ph_rms_norm_quantize(uint32_t ggml_type_id, const float* x, float* y, const float* weight, int64_t in,
                         int n_tokens, float eps, void* act, size_t act_stride, cudaStream_t stream);
int ph_gate_quantize(uint32_t ggml_type_id, int gate, const float* a, const float* b, float* y, int64_t in,
                     int n_tokens, void* act, size_t act_stride, cudaStream_t stream);

// f32 -> IEEE binary16 bits, round to nearest even (the GEMM operand of activations).
int ph_f32_to_f16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream);

// --- Element-wise and normalization ----------------------------------------------------

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for `rows` rows of n (y may be x).
int ph_rms_norm(const float* x, float* y, const float* weight, int64_t n, int64_t rows, float eps,
                cudaStream_t stream);
// y = a + b (y may alias a or b).
int ph_add(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);
// y = a * value.
int ph_scale(const float* a, float* y, float value, int64_t n, cudaStream_t stream);
// y[r] += bias for `rows` rows of `width`.
int ph_add_bias(float* y, const float* bias, int64_t width, int64_t rows, cudaStream_t stream);
// y = silu(a) * b.
int ph_swiglu(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);
// y = gelu(a) * b, gelu with the tanh approximation (x beyond +-10 exactly 0 or x).
int ph_geglu(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);
// dst += src, n floats (the same-device all-reduce adds the ranks' buffers in order).
int ph_accumulate(float* dst, const float* src, int64_t n, cudaStream_t stream);

// --- Positions (read on the device, so that a captured CUDA graph replays at any position)

// Where the tokens of a batch sit, read on the device (so that a captured graph replays with
// new positions and tables): token t is at position pos[t] of its sequence (pos_stride 1), or
// at *pos + t (pos_stride 0: one sequence at consecutive positions). Position p of token t's
// sequence is cache row table[seq[t] * table_stride + p / block_size] * block_size +
// p % block_size (the KV cache as blocks shared by sequences, engine/src/backend/kv_blocks.h),
// or row p when table is null (the cache by position). seq may be null: every token's
// sequence is 0.
typedef struct PhRows {
    const int32_t* pos;
    int pos_stride;
    const int32_t* seq;
    const int32_t* table;
    int table_stride;
    int block_size;
} PhRows;

// RoPE in place on x: [n_tokens][n_heads][head_dim]; token t is at position *pos0 + t.
// The first rope_dims of each head rotate in pairs: (2i, 2i + 1) for the normal layout,
// (i, i + rope_dims / 2) for NeoX. Pair i turns by freq_scale * p * base^(-2i / rope_dims)
// / freq_factors[i] (freq_factors may be null: 1), the angle built as ggml builds it.
int ph_rope(float* x, int64_t n_heads, int n_tokens, int head_dim, int rope_dims, int neox, float base,
            float freq_scale, const float* freq_factors, const int32_t* pos0, cudaStream_t stream);
// ph_rope with YaRN scaling (ext_factor != 0), as the CPU's rope (backend/cpu/ops.h): pair i's
// angle mixes the scaled and the original one by a ramp between corr_low and corr_high, and
// cos and sin are multiplied by attn_factor * (1 + 0.1 ln(1 / freq_scale)); with ext_factor
// 0 only by attn_factor.
int ph_rope_yarn(float* x, int64_t n_heads, int n_tokens, int head_dim, int rope_dims, int neox, float base,
                 float freq_scale, const float* freq_factors, float ext_factor, float attn_factor, float corr_low,
                 float corr_high, const int32_t* pos0, cudaStream_t stream);
// ph_rope_yarn with each token's position from `rows`.
int ph_rope_rows(float* x, int64_t n_heads, int n_tokens, int head_dim, int rope_dims, int neox, float base,
                 float freq_scale, const float* freq_factors, float ext_factor, float attn_factor, float corr_low,
                 float corr_high, PhRows rows, cudaStream_t stream);
// ph_rope_rows of x ([n_tokens][n_heads][head_dim]) and x2 ([n_tokens][n_heads2][head_dim])
// in one launch (Q and K): each the bits of its own ph_rope_rows.
int ph_rope_rows_pair(float* x, int64_t n_heads, float* x2, int64_t n_heads2, int n_tokens, int head_dim,
                      int rope_dims, int neox, float base, float freq_scale, const float* freq_factors,
                      float ext_factor, float attn_factor, float corr_low, float corr_high, PhRows rows,
                      cudaStream_t stream);

// Llama 4's attention temperature, in place on x: [n_tokens][width]; token t's row times
// 1 + temperature * ln(floor(p / length) + 1) at its position p from `rows` (the division
// and floor in f32, the logarithm in double, as the CPU's position_temperature).
int ph_scale_by_position(float* x, int64_t width, int n_tokens, float temperature, int length, PhRows rows,
                         cudaStream_t stream);

// Embedding lookup: y[t] = row ids[t] of `table` (rows of `width` elements of the type,
// row_bytes apart), decoded to f32. ids are device int32.
int ph_get_rows(uint32_t ggml_type_id, const void* table, size_t row_bytes, const int32_t* ids, int n, int64_t width,
                float* y, cudaStream_t stream);

// *dst = value, in stream order: sets a device-side position with the value passed in the
// launch itself, so no host buffer has to stay untouched until the copy runs.
int ph_set_i32(int32_t* dst, int32_t value, cudaStream_t stream);

// KV cache types of ph_kv_store / ph_attention.
enum { PH_KV_F16 = 0, PH_KV_Q8_0 = 1 };

// Writes the keys and values of n_tokens tokens (k, v: [n_tokens][width] f32) at
// positions *pos0 .. *pos0 + n_tokens - 1 of one layer's cache ([n_ctx][row_bytes] each):
// F16 rows, or Q8_0 rows (width a multiple of 32) quantized as the CPU backend quantizes
// activations (and llama.cpp's AVX2 path): scale amax / 127, values times 127 / amax
// rounded to nearest even.
int ph_kv_store(int kv_type, const float* k, const float* v, void* k_cache, void* v_cache, size_t row_bytes,
                int64_t width, int n_tokens, const int32_t* pos0, cudaStream_t stream);
// ph_kv_store at the cache rows `rows` gives each token's position (the cache of one layer
// then holds the pool's rows: [n_rows][row_bytes]).
int ph_kv_store_rows(int kv_type, const float* k, const float* v, void* k_cache, void* v_cache, size_t row_bytes,
                     int64_t width, int n_tokens, PhRows rows, cudaStream_t stream);

// Causal attention over one layer's cache, flash-decoding style: for each token t (at
// position *pos0 + t, already stored) and query head h (KV head h / (n_head / n_head_kv)):
//   out[t][h] = softmax(scale * q[t][h] . K[j]) V[j] over positions j <= *pos0 + t, the last
//   `window` of them when window > 0.
// The positions are cut into n_splits chunks of ceil(n_ctx / n_splits), each reduced by one
// thread block with an online softmax into `partial`, then combined; chunks past the
// token's position cost one early exit. head_dim at most 256 (for a Q8_0 cache a multiple
// of 32, the cache's block).
// partial: ph_attention_partial_floats(...) floats of device scratch.
size_t ph_attention_partial_floats(int n_tokens, int n_head, int head_dim, int n_splits);
int ph_attention(int kv_type, const float* q, const void* k_cache, const void* v_cache, size_t row_bytes, float* out,
                 int n_tokens, int n_head, int n_head_kv, int head_dim, float scale, uint32_t window, int n_ctx,
                 int n_splits, float* partial, const int32_t* pos0, cudaStream_t stream);
// ph_attention with attention sinks (gpt-oss): sinks[h], one per query head, joins each
// head's softmax denominator (and its maximum) with no value; null: none.
int ph_attention_sinks(int kv_type, const float* q, const void* k_cache, const void* v_cache, size_t row_bytes,
                       float* out, int n_tokens, int n_head, int n_head_kv, int head_dim, float scale, uint32_t window,
                       int n_ctx, int n_splits, float* partial, const float* sinks, const int32_t* pos0,
                       cudaStream_t stream);
// ph_attention_sinks over several sequences: token t attends to positions 0 .. its own of its
// own sequence, read at the cache rows `rows` gives. n_ctx: the longest a sequence may be.
int ph_attention_rows(int kv_type, const float* q, const void* k_cache, const void* v_cache, size_t row_bytes,
                      float* out, int n_tokens, int n_head, int n_head_kv, int head_dim, float scale, uint32_t window,
                      int n_ctx, int n_splits, float* partial, const float* sinks, PhRows rows, cudaStream_t stream);

// --- Mixture of experts (moe.cu; the CPU's engine/src/backend/cpu/moe.cpp) ----------------

// For each token, its k experts and their weights from its n_expert router scores
// ([n_tokens][n_expert], n_expert at most 512, k at most 64): gating 0: softmax over every
// expert, then the k largest; 1: the k largest scores, then a softmax over them; 2: each
// score's sigmoid, then the k largest. selection_bias ([n_expert], or null): added to the
// probabilities to choose, not to weigh. normalize: the weights divided by their sum (at
// least 2^-14); then multiplied by weights_scale unless it is 0 or 1. Highest first, equal
// ones by the lower index. ids, weights: [n_tokens][k].
int ph_moe_route(const float* scores, int n_tokens, int n_expert, int k, int gating, int normalize,
                 const float* selection_bias, float weights_scale, int32_t* ids, float* weights, cudaStream_t stream);
// dst[i] = src[pairs[i] / k] for i < n: the input rows ([.][width]) of the (token, slot)
// pairs (token * k + slot) routed to one expert.
int ph_moe_gather(const float* src, int64_t width, const int32_t* pairs, int k, int n, float* dst,
                  cudaStream_t stream);
// slots[pairs[i]] = src[i] * weights[pairs[i]] for i < n: an expert's outputs, weighted,
// into their tokens' slots ([n_tokens * k][width]).
int ph_moe_scatter(const float* src, int64_t width, const int32_t* pairs, const float* weights, int n, float* slots,
                   cudaStream_t stream);
// dst[t] = slots[t * k] + slots[t * k + 1] + ... (in slot order) for t < n_tokens.
int ph_moe_sum_slots(const float* slots, int n_tokens, int k, int64_t width, float* dst, cudaStream_t stream);
// y = min(a, limit) * sigmoid(alpha * min(a, limit)) * (clamp(b, -limit, limit) + 1) (gpt-oss).
int ph_swiglu_oai(const float* a, const float* b, float* y, int64_t n, float alpha, float limit, cudaStream_t stream);

// Index of the largest of n values (the first of equals), written to *out on the device:
// greedy sampling without copying the logits. NaN and -inf are never chosen; -1 when no
// value is a number above -inf (the sampler's argmax, which returns kNoToken then).
int ph_argmax(const float* x, int n, int32_t* out, cudaStream_t stream);

}  // extern "C"
