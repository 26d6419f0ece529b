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
// BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
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

}  // extern "C"
