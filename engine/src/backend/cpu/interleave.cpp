#include "backend/cpu/interleave.h"

#include <cstddef>
#include <cstring>
#include <vector>

#include "tensor/quant_blocks.h"

namespace powerhouse::cpu {

namespace {

constexpr int kR = kInterleaveRows;

using namespace detail;  // the layouts' offsets (interleave.h)

static_assert(kQ4Bytes == kR * sizeof(BlockQ4_K) && kQ5Bytes == kR * sizeof(BlockQ5_K) &&
              kQ6Bytes == kR * sizeof(BlockQ6_K));
static_assert(offsetof(BlockQ4_K, scales) == offsetof(BlockQ5_K, scales));

size_t block_bytes(GgmlType type) {
    return type == GgmlType::q4_k ? sizeof(BlockQ4_K) : type == GgmlType::q5_k ? sizeof(BlockQ5_K) : sizeof(BlockQ6_K);
}

uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

void store_u32(uint8_t* p, uint32_t v) {
    std::memcpy(p, &v, 4);
}

constexpr uint32_t kNibbles = 0x0F0F0F0Fu, kTwoBits = 0x03030303u, kOneBit = 0x01010101u;

// Row r's block (file format) into the interleaved super-block `out`, four bytes at a time:
// byte e of a word is element 4i + e.
void put_block(GgmlType type, const std::byte* block, int r, uint8_t* out) {
    if (type == GgmlType::q4_k || type == GgmlType::q5_k) {
        // d, dmin and the scales at the same offsets in both (quant_blocks.h).
        BlockQ4_K head;
        std::memcpy(&head, block, offsetof(BlockQ4_K, qs));
        std::memcpy(out + kQ4D + 2 * r, &head.d, 2);
        std::memcpy(out + kQ4Dmin + 2 * r, &head.dmin, 2);
        int sc[8], m[8];
        unpack_k4_scales(head.scales, sc, m);
        for (int j = 0; j < 4; ++j) {
            out[kQ4ScLo + 16 * j + r] = static_cast<uint8_t>((sc[j] & 15) | (sc[j + 4] & 15) << 4);
            out[kQ4MLo + 16 * j + r] = static_cast<uint8_t>((m[j] & 15) | (m[j + 4] & 15) << 4);
            out[kQ4Hi + 16 * j + r] =
                static_cast<uint8_t>(sc[j] >> 4 | (sc[j + 4] >> 4) << 2 | (m[j] >> 4) << 4 | (m[j + 4] >> 4) << 6);
        }
        const bool q5 = type == GgmlType::q5_k;
        BlockQ5_K x5;
        if (q5) std::memcpy(&x5, block, sizeof x5);
        const uint8_t* qs = q5 ? x5.qs : reinterpret_cast<const uint8_t*>(block) + offsetof(BlockQ4_K, qs);
        const size_t sub_bytes = q5 ? kQ5Sub : 256;
        // Elements 32j .. 32j + 31 are nibble j % 2 of qs[32 (j / 2) ..]; Q5_K's fifth bit of
        // element 32j + x is bit j of qh[x].
        for (int j = 0; j < 8; ++j) {
            const uint8_t* q = qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            uint8_t* sub = out + kQ4Qs + sub_bytes * j;
            for (int i = 0; i < 4; ++i) {
                const uint32_t lo = (load_u32(q + 4 * i) >> shift) & kNibbles;
                const uint32_t hi = (load_u32(q + 16 + 4 * i) >> shift) & kNibbles;
                store_u32(sub + 64 * i + 4 * r, lo | hi << 4);
            }
            if (!q5) continue;
            uint32_t bits = 0;
            for (int k = 0; k < 4; ++k) {
                bits |= ((load_u32(x5.qh + 4 * k) >> j) & kOneBit) << k;
                bits |= ((load_u32(x5.qh + 16 + 4 * k) >> j) & kOneBit) << (4 + k);
            }
            store_u32(sub + 256 + 4 * r, bits);
        }
        return;
    }
    BlockQ6_K x;
    std::memcpy(&x, block, sizeof x);
    std::memcpy(out + kQ6D + 2 * r, &x.d, 2);
    for (int s = 0; s < 16; ++s) out[kQ6Sc + 16 * s + r] = static_cast<uint8_t>(x.scales[s]);
    // Element 128h + 32jj + y: low bits nibble jj / 2 of ql[64h + 32 (jj % 2) + y], high
    // bits bits 2jj of qh[32h + y] (quant_dot_scalar.cpp's decode_k_scalar).
    for (int j = 0; j < 8; ++j) {
        const int h = j / 4, jj = j % 4;
        const uint8_t* ql = x.ql + 64 * h + 32 * (jj % 2);
        const uint8_t* qh = x.qh + 32 * h;
        uint8_t* sub = out + kQ6Q + kQ6Sub * j;
        for (int i = 0; i < 4; ++i) {
            const uint32_t lo = (load_u32(ql + 4 * i) >> (4 * (jj / 2))) & kNibbles;
            const uint32_t hi = (load_u32(ql + 16 + 4 * i) >> (4 * (jj / 2))) & kNibbles;
            store_u32(sub + 64 * i + 4 * r, lo | hi << 4);
        }
        for (int half = 0; half < 2; ++half) {
            uint32_t bits = 0;
            for (int k = 0; k < 4; ++k) bits |= ((load_u32(qh + 16 * half + 4 * k) >> (2 * jj)) & kTwoBits) << (2 * k);
            store_u32(sub + 256 + 64 * half + 4 * r, bits);
        }
    }
}

// The nibble units of Q4_K's qs and Q6_K's ql back to the low four bits of u (a
// super-block's 256 values) of row r, sub-block j's `sub` bytes after j - 1's.
void get_nibbles(const uint8_t* units, int r, uint8_t* u, size_t sub) {
    for (int j = 0; j < 8; ++j) {
        for (int i = 0; i < 4; ++i) {
            for (int e = 0; e < 4; ++e) {
                const uint8_t byte = units[sub * j + 64 * i + 4 * r + e];
                u[32 * j + 4 * i + e] = byte & 0x0F;
                u[32 * j + 16 + 4 * i + e] = byte >> 4;
            }
        }
    }
}

// Q6_K's top two bits back into u, row r.
void get_high_bits(const uint8_t* units, int r, uint8_t* u) {
    for (int j = 0; j < 8; ++j) {
        for (int h = 0; h < 2; ++h) {
            for (int e = 0; e < 4; ++e) {
                const uint8_t byte = units[kQ6Sub * j + 64 * h + 4 * r + e];
                for (int k = 0; k < 4; ++k) u[32 * j + 16 * h + 4 * k + e] |= ((byte >> (2 * k)) & 3) << 4;
            }
        }
    }
}

// The inverse: row r of the interleaved super-block `in` as a block of the file's format.
void get_block(GgmlType type, const uint8_t* in, int r, std::byte* block) {
    uint8_t u[QK_K] = {};
    if (type == GgmlType::q4_k || type == GgmlType::q5_k) {
        BlockQ5_K x{};  // Q4_K's fields at the same offsets up to qs (written at the end)
        std::memcpy(&x.d, in + kQ4D + 2 * r, 2);
        std::memcpy(&x.dmin, in + kQ4Dmin + 2 * r, 2);
        int sc[8], m[8];
        for (int j = 0; j < 4; ++j) {
            const int lo = in[kQ4ScLo + 16 * j + r], ml = in[kQ4MLo + 16 * j + r], hi = in[kQ4Hi + 16 * j + r];
            sc[j] = (lo & 15) | (hi & 3) << 4;
            sc[j + 4] = (lo >> 4) | ((hi >> 2) & 3) << 4;
            m[j] = (ml & 15) | ((hi >> 4) & 3) << 4;
            m[j + 4] = (ml >> 4) | ((hi >> 6) & 3) << 4;
        }
        pack_k4_scales(sc, m, x.scales);
        const bool q5 = type == GgmlType::q5_k;
        get_nibbles(in + kQ4Qs, r, u, q5 ? kQ5Sub : 256);
        for (int h = 0; h < 4; ++h) {
            for (int j = 0; j < 32; ++j) x.qs[32 * h + j] = static_cast<uint8_t>(u[64 * h + j] | u[64 * h + 32 + j] << 4);
        }
        if (!q5) {
            std::memcpy(block, &x, offsetof(BlockQ4_K, qs));
            std::memcpy(block + offsetof(BlockQ4_K, qs), x.qs, sizeof x.qs);
            return;
        }
        for (int j = 0; j < 8; ++j) {
            const uint8_t* bits = in + kQ4Qs + kQ5Sub * j + 256;
            for (int g = 0; g < 8; ++g) {
                for (int e = 0; e < 4; ++e) {
                    // Bit g: element 4g + e for g < 4, else 16 + 4(g - 4) + e (interleave.h).
                    const int x_at = g < 4 ? 4 * g + e : 16 + 4 * (g - 4) + e;
                    x.qh[x_at] = static_cast<uint8_t>(x.qh[x_at] | ((bits[4 * r + e] >> g) & 1) << j);
                }
            }
        }
        std::memcpy(block, &x, sizeof x);
        return;
    }
    BlockQ6_K x;
    std::memcpy(&x.d, in + kQ6D + 2 * r, 2);
    for (int s = 0; s < 16; ++s) x.scales[s] = static_cast<int8_t>(in[kQ6Sc + 16 * s + r]);
    get_nibbles(in + kQ6Q, r, u, kQ6Sub);
    get_high_bits(in + kQ6Q + 256, r, u);
    // quant_dot_scalar.cpp's decode_k_scalar, backwards.
    std::memset(x.ql, 0, sizeof x.ql);
    std::memset(x.qh, 0, sizeof x.qh);
    for (int i = 0; i < QK_K; ++i) {
        const int h = i / 128, q = i % 128;
        x.ql[64 * h + q % 64] = static_cast<uint8_t>(x.ql[64 * h + q % 64] | (u[i] & 0x0F) << (4 * (q / 64)));
        x.qh[32 * h + q % 32] = static_cast<uint8_t>(x.qh[32 * h + q % 32] | (u[i] >> 4) << (2 * (q / 32)));
    }
    std::memcpy(block, &x, sizeof x);
}

}  // namespace

bool has_interleaved_layout(GgmlType type) {
    return type == GgmlType::q4_k || type == GgmlType::q5_k || type == GgmlType::q6_k;
}

bool can_interleave(KernelIsa isa, GgmlType type, int64_t in, int64_t rows, size_t row_stride) {
    // AVX2 has no Q6_K kernel: measured no faster than the file's rows (interleave_avx2.cpp).
    const bool kernel = isa == KernelIsa::avx512 ? has_interleaved_layout(type)
                        : isa == KernelIsa::avx2 ? type == GgmlType::q4_k || type == GgmlType::q5_k
                                                 : false;
    if (!kernel) return false;
    if (in <= 0 || in % QK_K != 0 || rows <= 0 || rows % kR != 0) return false;
    return row_stride == static_cast<size_t>(in / QK_K) * block_bytes(type);
}

void interleave_rows(GgmlType type, int64_t in, int64_t rows, const std::byte* src, size_t src_stride,
                     std::byte* dst) {
    const int64_t nb = in / QK_K;
    const size_t group_block = kR * block_bytes(type);
    for (int64_t g = 0; g < rows / kR; ++g) {
        for (int64_t b = 0; b < nb; ++b) {
            auto* out = reinterpret_cast<uint8_t*>(dst + static_cast<size_t>(g * nb + b) * group_block);
            for (int r = 0; r < kR; ++r) {
                const std::byte* row = src + static_cast<size_t>(g * kR + r) * src_stride;
                put_block(type, row + static_cast<size_t>(b) * block_bytes(type), r, out);
            }
        }
    }
}

void deinterleave_row(GgmlType type, int64_t in, const std::byte* group, int r, std::byte* out) {
    const int64_t nb = in / QK_K;
    const size_t group_block = kR * block_bytes(type);
    for (int64_t b = 0; b < nb; ++b) {
        get_block(type, reinterpret_cast<const uint8_t*>(group + static_cast<size_t>(b) * group_block), r,
                  out + static_cast<size_t>(b) * block_bytes(type));
    }
}

void dot_rows_interleaved(KernelIsa isa, GgmlType type, int64_t n, const void* w, int groups, const void* act,
                          size_t act_stride, int tokens, float* dst, size_t dst_stride) {
    const auto* bytes = static_cast<const std::byte*>(w);
    const size_t group_bytes = static_cast<size_t>(n / QK_K) * kR * block_bytes(type);
#if defined(__x86_64__)
    if (isa == KernelIsa::avx2) {
        return detail::dot_rows_interleaved_avx2(type, n, bytes, groups, static_cast<const std::byte*>(act), act_stride,
                                                 tokens, dst, dst_stride);
    }
    if (isa == KernelIsa::avx512) {
        return detail::dot_rows_interleaved_avx512(type, n, bytes, groups, static_cast<const std::byte*>(act),
                                                   act_stride, tokens, dst, dst_stride);
    }
#endif
    // The reference: each row back in the file's format, through the plain dot product.
    thread_local std::vector<std::byte> row;
    row.resize(static_cast<size_t>(n / QK_K) * block_bytes(type));
    for (int g = 0; g < groups; ++g) {
        for (int r = 0; r < kR; ++r) {
            deinterleave_row(type, n, bytes + static_cast<size_t>(g) * group_bytes, r, row.data());
            dot_rows(KernelIsa::scalar, type, n, row.data(), row.size(), 1, act, act_stride, tokens,
                     dst + static_cast<size_t>(g * kR + r), dst_stride);
        }
    }
    (void)isa;
}

const std::byte* InterleavedCopies::copy(ThreadPool& pool, KernelIsa isa, GgmlType type, int64_t in, int64_t rows,
                                        size_t row_stride, const std::byte* data, uint64_t count, uint64_t stride,
                                        const GgufModel* release_from) {
    if (!can_interleave(isa, type, in, rows, row_stride) || count == 0) return nullptr;
    const uint64_t matrix = static_cast<uint64_t>(rows) * row_stride;
    if (count == 1) stride = matrix;
    if (stride < matrix) return nullptr;
    const uint64_t bytes = stride * (count - 1) + matrix;
    if (const auto it = by_source_.find({data, bytes}); it != by_source_.end()) return it->second;
    ZeroedPages out(static_cast<size_t>(bytes));
    out.prefer_huge_pages();
    const int64_t groups = rows / kR;
    std::byte* dst = out.data();
    pool.parallel_for(static_cast<int64_t>(count) * groups, [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end; ++i) {
            const uint64_t at = static_cast<uint64_t>(i / groups) * stride + static_cast<uint64_t>(i % groups) * kR * row_stride;
            interleave_rows(type, in, kR, data + at, row_stride, dst + at);
        }
    });
    if (release_from != nullptr) release_from->release_pages(data, out.size());
    bytes_ += out.size();
    copies_.push_back(std::move(out));
    by_source_[{data, bytes}] = copies_.back().data();
    return copies_.back().data();
}

}  // namespace powerhouse::cpu
