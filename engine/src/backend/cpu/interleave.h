// Weight rows regrouped sixteen at a time for the products of decoding (the CPU backend's
// counterpart of llama.cpp's "repacked" CPU weights). In the file, a row's super-block is
// one contiguous block, so a matrix-vector product decodes each row on its own and sums
// its products across a vector's lanes. Interleaved, the same bytes are arranged so that a
// vector register holds four consecutive weights of sixteen rows: one vpdpbusd multiplies
// them with four activations broadcast from memory, each lane accumulates its own row, and
// a super-block's scales are decoded once for sixteen rows (AVX2: two halves of eight rows,
// vpmaddubsw and vpmaddwd). The products are the same
// exact integers per super-block, scaled in the same float order, so results equal
// dot_rows' on the file's rows bit for bit (the tiled product's too), and a token gives the
// same logits whichever layout its weights are in.
//
// Layouts, per group of sixteen rows (row r of the group) and super-block b, the groups'
// super-blocks in order, each the size of sixteen of the file's blocks (a matrix keeps its
// byte size):
//
//   Q4_K (2304 bytes)  d[16], dmin[16]   f16, row r's
//                      sc_lo[4][16]      (sc[r][j] & 15) | (sc[r][j + 4] & 15) << 4
//                      m_lo[4][16]       the same for the mins
//                      hi[4][16]         the top two bits of sc[r][j], sc[r][j + 4], m[r][j],
//                                        m[r][j + 4] at bits 0, 2, 4, 6
//                      qs[8][4][64]      unit (j, i), byte 4r + e: element 32j + 4i + e in
//                                        the low nibble, element 32j + 16 + 4i + e in the high
//   Q5_K (2816 bytes)  Q4_K's, with 64 bytes after each sub-block j's four units: byte
//                      4r + e holds the fifth bits of elements 32j + 4k + e (bit k) and
//                      32j + 16 + 4k + e (bit 4 + k), k < 4
//   Q6_K (3360 bytes)  d[16]             f16
//                      sc[16][16]        int8, sc[s][r] = row r's scale of elements 16s..16s+15
//                      then per sub-block j of 32 elements (in reading order):
//                      ql[4][64]         as Q4_K's qs units, the low four bits of the values
//                      qh[2][64]         unit h, byte 4r + e: the top two bits of element
//                                        32j + 16h + 4k + e at bits 2k
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "backend/cpu/quant_dot.h"
#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_model.h"
#include "platform/zeroed_pages.h"
#include "tensor/dtype.h"

namespace powerhouse::cpu {

inline constexpr int kInterleaveRows = 16;

// Whether a matrix of `rows` rows of `in` elements of `type`, `row_stride` bytes apart, is
// interleaved for products on `isa`: whole packed rows (no column share of a split), a
// multiple of sixteen rows, and an instruction set with the type's kernel: AVX-512 VNNI for
// Q4_K, Q5_K and Q6_K, AVX2 for Q4_K and Q5_K.
bool can_interleave(KernelIsa isa, GgmlType type, int64_t in, int64_t rows, size_t row_stride);

// Whether `type` has an interleaved layout at all (any instruction set, the scalar
// reference included).
bool has_interleaved_layout(GgmlType type);

// Writes the `rows` rows (a multiple of sixteen; `src_stride` bytes apart) interleaved to
// dst, which holds rows * row_bytes(type, in) bytes.
void interleave_rows(GgmlType type, int64_t in, int64_t rows, const std::byte* src, size_t src_stride,
                     std::byte* dst);

// Row r (< 16) of an interleaved group, back in the file's format: in / 256 blocks to out.
void deinterleave_row(GgmlType type, int64_t in, const std::byte* group, int r, std::byte* out);

// dst[t * dst_stride + r] for r < 16 * groups and t < tokens: row r of the interleaved
// groups at w (as interleave_rows wrote them) times token t's activations (act + t *
// act_stride, from quantize_activations), equal bit for bit to dot_rows(isa, ...) on the
// rows before they were interleaved. `isa` is scalar or one can_interleave accepts.
void dot_rows_interleaved(KernelIsa isa, GgmlType type, int64_t n, const void* w, int groups, const void* act,
                          size_t act_stride, int tokens, float* dst, size_t dst_stride);

// Interleaved copies of a stage's weights, kept as long as it lives. The file's pages of a
// copied range are given back (GgufModel::release_pages) unless the caller still reads
// them, so that a model is not held twice.
//
// Thread-safety: one thread at a time.
class InterleavedCopies {
public:
    // The `count` matrices at `data`, `stride` bytes apart (count 1: stride unused), each
    // `rows` rows of `in` elements of `type` `row_stride` bytes apart, interleaved into one
    // copy with the same places (matrix i at copy + i * stride); null when can_interleave
    // says no. The rows are regrouped on the pool's threads. The same bytes asked for again
    // (two stages handing the host the same experts) get the first copy.
    const std::byte* copy(ThreadPool& pool, KernelIsa isa, GgmlType type, int64_t in, int64_t rows, size_t row_stride,
                          const std::byte* data, uint64_t count, uint64_t stride, const GgufModel* release_from);
    uint64_t bytes() const { return bytes_; }

private:
    std::vector<ZeroedPages> copies_;
    std::map<std::pair<const std::byte*, uint64_t>, const std::byte*> by_source_;  // (data, bytes) -> copy
    uint64_t bytes_ = 0;
};

namespace detail {
// Byte offsets within an interleaved super-block of sixteen rows (the layouts above), for the
// reference and the kernels.
inline constexpr size_t kQ4D = 0, kQ4Dmin = 32, kQ4ScLo = 64, kQ4MLo = 128, kQ4Hi = 192, kQ4Qs = 256;
inline constexpr size_t kQ4Bytes = 2304;
inline constexpr size_t kQ5Sub = 320, kQ5Bytes = 2816;  // Q4_K's header; sub-blocks of 320 bytes
inline constexpr size_t kQ6D = 0, kQ6Sc = 32, kQ6Q = 288, kQ6Sub = 384, kQ6Bytes = 3360;

// Bytes of one interleaved super-block of `type` (Q4_K, Q5_K or Q6_K).
constexpr size_t interleaved_block_bytes(GgmlType type) {
    return type == GgmlType::q4_k ? kQ4Bytes : type == GgmlType::q5_k ? kQ5Bytes : kQ6Bytes;
}

#if defined(__x86_64__)
void dot_rows_interleaved_avx2(GgmlType type, int64_t n, const std::byte* w, int groups, const std::byte* act,
                               size_t act_stride, int tokens, float* dst, size_t dst_stride);
void dot_rows_interleaved_avx512(GgmlType type, int64_t n, const std::byte* w, int groups, const std::byte* act,
                                 size_t act_stride, int tokens, float* dst, size_t dst_stride);
#endif
}  // namespace detail

}  // namespace powerhouse::cpu
