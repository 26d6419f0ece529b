// The AVX2 + FMA + F16C copy of the vector dot products (quant_dot_simd.inc).
#if defined(__x86_64__)
#define PH_TARGET __attribute__((target("avx2,fma,f16c")))
#define PH_NS avx2_impl
#define PH_ENTRY dot_rows_avx2
#define PH_QUANT_ENTRY quantize_activations_avx2
#define PH_VNNI 0
#define PH_TILED_ENTRY dot_rows_tiled_avx2
#define PH_TOKENS 4
#define PH_FLOAT_ROWS 3
#include "backend/cpu/quant_dot_simd.inc"
#endif
