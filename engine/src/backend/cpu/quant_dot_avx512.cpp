// The AVX-512 (VL, BW, VNNI) copy of the vector dot products (quant_dot_simd.inc): the
// same 256-bit code with vpdpbusd for byte products and 32 vector registers, and the
// 512-bit tiled K-quant products (sixteen tokens per vector) for batches.
#if defined(__x86_64__)
#define PH_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define PH_NS avx512_impl
#define PH_ENTRY dot_rows_avx512
#define PH_QUANT_ENTRY quantize_activations_avx512
#define PH_VNNI 1
#define PH_TILED_ENTRY dot_rows_tiled_avx512
#define PH_TOKENS 8
#define PH_FLOAT_ROWS 2
#include "backend/cpu/quant_dot_simd.inc"
#endif
