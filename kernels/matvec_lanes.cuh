// What one lane of the wide decode product (matmul_q8.cu, wide_kernel) does with its
// piece of a K-quant super-block, as functions that also compile for the host: the tests
// run them lane by lane on the CPU (tests/kernels/matmul_q8_kernel_test.cpp, WideLanes),
// so the index arithmetic below is checked against the CPU engine without a GPU.
//
// The layout of the work: eight lanes share a span of 256 weights (a K-quant super-block,
// or eight blocks of 32) and each loads its quants with 16-byte loads, the bytes a warp
// loads at once lying side by side in memory. A lane's quants are two runs of sixteen
// weights (first_value(j) and first_value(j) + kHighOffset of the span): for the K-quants
// the low and the high nibbles of its sixteen bytes (lane j: bytes 16j.. of the nibbles, ql
// for Q6_K), each run inside one scale's sub-block; for the blocks of 32 (Q8_0, Q4_0,
// Q4_1) block j of the span, its first sixteen weights and its last. The lane's dot product
// is two dp4a chains of four. The activations of a run are the sixteen bytes at the same
// offset (16-byte aligned), its sum of sixteen (the minimums and offsets) sum16[first / 16],
// and the scale of its activation block: Q8_K's per 256 for the K-quants, Q8_0's per 32
// (and Q8_1's d * sum for Q4_1) for the others.
//
// Q4_K and Q5_K super-blocks (144 and 176 bytes) keep every 16-byte piece aligned when
// the row is; Q6_K's (210 bytes) and the blocks of 32 inside a span (34, 18, 20 bytes)
// start at any even byte, so those lanes load the two aligned 16-byte words around their
// bytes and shift (load16_a2). Such a load reads whole aligned words: up to 14 bytes before
// its first byte and after its last. Inside a Q6_K super-block those stay within the block
// (a lane reads no further than byte 206 of 210) or the row before it; a span of blocks of
// 32 (272, 144, 160 bytes) ends on a word boundary when it starts on one, so those types
// take the wide kernel only for 16-byte aligned rows (kNeeds16) and never read past a
// matrix's last byte.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__CUDACC__)
#define PH_LANE __host__ __device__ __forceinline__
#else
#define PH_LANE inline
#endif

namespace powerhouse::kernels::lanes {

struct Bytes16 {
    uint32_t w[4];
};

// Sixteen bytes at a 16-byte aligned address (weights: read-only for the whole kernel).
PH_LANE Bytes16 load16(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    return {{v.x, v.y, v.z, v.w}};
#else
    // The host runs this for the tests: a load the GPU could not make fails them here.
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) std::abort();
    Bytes16 b;
    std::memcpy(b.w, p, 16);
    return b;
#endif
}

// Word k of the eight words lo, hi shifted down by `words` (0..3): a choice among four
// registers, never an indexed local array.
PH_LANE uint32_t word_at(const Bytes16& lo, const Bytes16& hi, int k, unsigned words) {
    const uint32_t all[8] = {lo.w[0], lo.w[1], lo.w[2], lo.w[3], hi.w[0], hi.w[1], hi.w[2], hi.w[3]};
    const uint32_t a = (words & 1u) != 0 ? all[k + 1] : all[k];
    const uint32_t b = (words & 1u) != 0 ? all[k + 3] : all[k + 2];
    return (words & 2u) != 0 ? b : a;
}

// Sixteen bytes at a 2-byte aligned address: the aligned sixteen at or below it and, when
// it is not aligned itself, the next sixteen, shifted into place. So it reads the whole
// aligned words that hold the sixteen bytes (see the top of this file for why those stay
// inside the matrix).
PH_LANE Bytes16 load16_a2(const uint8_t* p) {
    const auto at = reinterpret_cast<uintptr_t>(p);
    const unsigned off = static_cast<unsigned>(at & 15u);
    const uint8_t* base = p - off;
    const Bytes16 lo = load16(base);
    const Bytes16 hi = off != 0 ? load16(base + 16) : lo;
    const unsigned words = off / 4;
    const unsigned bits = 8 * (off % 4);
    Bytes16 out;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int k = 0; k < 4; ++k) {
        // word_at(k + 1) reads at most word k + 4 <= 7.
        const uint64_t pair = (static_cast<uint64_t>(word_at(lo, hi, k + 1, words)) << 32) | word_at(lo, hi, k, words);
        out.w[k] = static_cast<uint32_t>(pair >> bits);
    }
    return out;
}

// Four signed byte products added to c.
PH_LANE int dp4a(int a, int b, int c) {
#if defined(__CUDA_ARCH__)
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; ++i) {
        c += static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i)) *
             static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i));
    }
    return c;
#endif
}

// IEEE binary16 bits to f32, exactly (the engine's f16_to_f32; NaN payloads kept).
PH_LANE float half_to_float(uint32_t h) {
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    uint32_t bits = 0;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
        const float v = static_cast<float>(mant) * 0x1p-24f;  // exact
        return sign != 0 ? -v : v;
    } else {
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    }
#if defined(__CUDA_ARCH__)
    return __uint_as_float(bits);
#else
    float f = 0;
    std::memcpy(&f, &bits, 4);
    return f;
#endif
}

// A value of type V at an address aligned for it.
template <class V>
PH_LANE V load_as(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
    return *reinterpret_cast<const V*>(p);
#else
    if (reinterpret_cast<uintptr_t>(p) % sizeof(V) != 0) std::abort();  // as load16
    V v{};
    std::memcpy(&v, p, sizeof v);
    return v;
#endif
}

// Byte k (0..11) of the twelve bytes held in s[0..2], by choice, not by index.
PH_LANE int byte_of(const uint32_t s[3], int k) {
    const uint32_t word = k < 4 ? s[0] : (k < 8 ? s[1] : s[2]);
    return static_cast<int>((word >> (8 * (k & 3))) & 0xFFu);
}

// Scale and minimum of sub-block `sub` of a Q4_K/Q5_K super-block's twelve scale bytes.
PH_LANE void k4_scale_min(const uint32_t s[3], int sub, int& scale, int& min) {
    if (sub < 4) {
        scale = byte_of(s, sub) & 0x3F;
        min = byte_of(s, sub + 4) & 0x3F;
    } else {
        scale = (byte_of(s, sub + 4) & 0x0F) | ((byte_of(s, sub - 4) >> 6) << 4);
        min = (byte_of(s, sub + 4) >> 4) | ((byte_of(s, sub) >> 6) << 4);
    }
}

// A lane's activations: its two runs of sixteen bytes, their sums, and the scale of their
// activation block (d; s: Q8_1's rounded d * sum, for Q4_1's minimum).
struct LaneAct {
    int lo[4], hi[4];
    int sum_lo, sum_hi;
    float d, s;
};

// The lane's weights of one super-block in the form its dot product takes them: the two
// runs as bytes 0..63 (Q4_K, Q5_K with the fifth bit, Q6_K unsigned), and what scales them.
struct LaneWeights {
    int lo[4], hi[4];
    int scale_lo, scale_hi;  // sub-block scales (Q6_K: of the runs' sixteen)
    int min_lo, min_hi;      // Q4_K/Q5_K sub-block minimums
    float d, dmin;
};

// Sixteen bytes of nibbles as the two runs: the low nibbles and the high ones (Q4_K's
// sub-blocks 2p and 2p + 1; Q4_0's and Q4_1's values 0..15 and 16..31).
PH_LANE void split_nibbles(const Bytes16& qs, LaneWeights& w) {
    for (int i = 0; i < 4; ++i) {
        w.lo[i] = static_cast<int>(qs.w[i] & 0x0F0F0F0Fu);
        w.hi[i] = static_cast<int>((qs.w[i] >> 4) & 0x0F0F0F0Fu);
    }
}

struct Q4_KLanes {
    static constexpr bool kPerSpan = true;  // one activation scale per 256 (Q8_K)
    static constexpr int kBlockBytes = 144;
    static constexpr bool kNeeds16 = true;  // rows must be 16-byte aligned
    static constexpr int kHighOffset = 32;
    PH_LANE static int first_value(int j) { return 64 * (j / 2) + 16 * (j % 2); }
    PH_LANE static LaneWeights load(const uint8_t* block, int j) {
        const Bytes16 head = load16(block);  // d, dmin, scales[12]
        const Bytes16 qs = load16(block + 16 + 16 * j);
        LaneWeights w;
        w.d = half_to_float(head.w[0] & 0xFFFFu);
        w.dmin = half_to_float(head.w[0] >> 16);
        const uint32_t scales[3] = {head.w[1], head.w[2], head.w[3]};
        k4_scale_min(scales, 2 * (j / 2), w.scale_lo, w.min_lo);
        k4_scale_min(scales, 2 * (j / 2) + 1, w.scale_hi, w.min_hi);
        split_nibbles(qs, w);
        return w;
    }
    // The super-block's share of the product, before the activations' scale.
    PH_LANE static float dot(const LaneWeights& w, const LaneAct& a) {
        int lo = 0, hi = 0;
        for (int i = 0; i < 4; ++i) {
            lo = dp4a(w.lo[i], a.lo[i], lo);
            hi = dp4a(w.hi[i], a.hi[i], hi);
        }
        const int sums = w.scale_lo * lo + w.scale_hi * hi;
        const int mins = w.min_lo * a.sum_lo + w.min_hi * a.sum_hi;
        return a.d * (w.d * static_cast<float>(sums) - w.dmin * static_cast<float>(mins));
    }
};

struct Q5_KLanes {
    static constexpr bool kPerSpan = true;  // one activation scale per 256 (Q8_K)
    static constexpr int kBlockBytes = 176;
    static constexpr bool kNeeds16 = true;
    static constexpr int kHighOffset = 32;
    PH_LANE static int first_value(int j) { return Q4_KLanes::first_value(j); }
    PH_LANE static LaneWeights load(const uint8_t* block, int j) {
        const Bytes16 head = load16(block);
        const Bytes16 qh = load16(block + 16 + 16 * (j % 2));  // bit s of byte l: value 32s + l
        const Bytes16 qs = load16(block + 48 + 16 * j);
        LaneWeights w;
        w.d = half_to_float(head.w[0] & 0xFFFFu);
        w.dmin = half_to_float(head.w[0] >> 16);
        const uint32_t scales[3] = {head.w[1], head.w[2], head.w[3]};
        const int sub = 2 * (j / 2);
        k4_scale_min(scales, sub, w.scale_lo, w.min_lo);
        k4_scale_min(scales, sub + 1, w.scale_hi, w.min_hi);
        for (int i = 0; i < 4; ++i) {
            w.lo[i] = static_cast<int>((qs.w[i] & 0x0F0F0F0Fu) | (((qh.w[i] >> sub) & 0x01010101u) << 4));
            w.hi[i] = static_cast<int>(((qs.w[i] >> 4) & 0x0F0F0F0Fu) | (((qh.w[i] >> (sub + 1)) & 0x01010101u) << 4));
        }
        return w;
    }
    PH_LANE static float dot(const LaneWeights& w, const LaneAct& a) { return Q4_KLanes::dot(w, a); }
};

struct Q6_KLanes {
    static constexpr bool kPerSpan = true;  // one activation scale per 256 (Q8_K)
    static constexpr int kBlockBytes = 210;
    static constexpr bool kNeeds16 = false;  // 2-byte aligned rows; load16_a2 shifts
    static constexpr int kHighOffset = 64;
    // Lane j: ql bytes 16j.. of half h = j / 4 hold values 128h + 16q.. (low nibbles) and
    // 128h + 64 + 16q.. (high), q = j % 4; their two high bits are in qh[32h + 16(q % 2) ..]
    // at bits 2(q / 2) and 4 + 2(q / 2).
    PH_LANE static int first_value(int j) { return 128 * (j / 4) + 16 * (j % 4); }
    PH_LANE static LaneWeights load(const uint8_t* block, int j) {
        const int h = j / 4, q = j % 4;
        const Bytes16 ql = load16_a2(block + 16 * j);
        const Bytes16 qh = load16_a2(block + 128 + 32 * h + 16 * (q % 2));
        const unsigned shift = 2u * static_cast<unsigned>(q / 2);
        LaneWeights w;
        const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
        const int first = first_value(j);
        w.scale_lo = scales[first / 16];
        w.scale_hi = scales[first / 16 + 4];
        w.d = half_to_float(load_as<uint16_t>(block + 208));
        w.dmin = 0.0f;
        w.min_lo = w.min_hi = 0;
        for (int i = 0; i < 4; ++i) {
            w.lo[i] = static_cast<int>((ql.w[i] & 0x0F0F0F0Fu) | (((qh.w[i] >> shift) & 0x03030303u) << 4));
            w.hi[i] = static_cast<int>(((ql.w[i] >> 4) & 0x0F0F0F0Fu) | (((qh.w[i] >> (shift + 4)) & 0x03030303u) << 4));
        }
        return w;
    }
    PH_LANE static float dot(const LaneWeights& w, const LaneAct& a) {
        int lo = 0, hi = 0;
        for (int i = 0; i < 4; ++i) {
            lo = dp4a(w.lo[i], a.lo[i], lo);
            hi = dp4a(w.hi[i], a.hi[i], hi);
        }
        // Values are stored plus 32.
        return a.d * (w.d * static_cast<float>(w.scale_lo * (lo - 32 * a.sum_lo) + w.scale_hi * (hi - 32 * a.sum_hi)));
    }
};

// Blocks of 32: lane j takes block j of the span of eight, its first sixteen weights as the
// low run and its last sixteen as the high run; one activation scale per block (Q8_0).
PH_LANE int dot_runs(const LaneWeights& w, const LaneAct& a) {
    int sum = 0;
    for (int i = 0; i < 4; ++i) {
        sum = dp4a(w.lo[i], a.lo[i], sum);
        sum = dp4a(w.hi[i], a.hi[i], sum);
    }
    return sum;
}

// What the three types of blocks of 32 share: 16-byte aligned rows (their blocks inside a
// span start at even bytes: load16_a2), an activation scale per block, lane j's runs the
// two halves of block j.
struct Blocks32Lanes {
    static constexpr bool kNeeds16 = true;
    static constexpr bool kPerSpan = false;
    static constexpr int kHighOffset = 16;
    PH_LANE static int first_value(int j) { return 32 * j; }
};

struct Q8_0Lanes : Blocks32Lanes {
    static constexpr int kBlockBytes = 8 * 34;  // a span: eight blocks
    PH_LANE static LaneWeights load(const uint8_t* span, int j) {
        const uint8_t* block = span + 34 * j;
        const Bytes16 q0 = load16_a2(block + 2);
        const Bytes16 q1 = load16_a2(block + 18);
        LaneWeights w{};
        w.d = half_to_float(load_as<uint16_t>(block));
        for (int i = 0; i < 4; ++i) {
            w.lo[i] = static_cast<int>(q0.w[i]);
            w.hi[i] = static_cast<int>(q1.w[i]);
        }
        return w;
    }
    PH_LANE static float dot(const LaneWeights& w, const LaneAct& a) {
        return a.d * (w.d * static_cast<float>(dot_runs(w, a)));
    }
};

struct Q4_0Lanes : Blocks32Lanes {
    static constexpr int kBlockBytes = 8 * 18;
    PH_LANE static LaneWeights load(const uint8_t* span, int j) {
        const uint8_t* block = span + 18 * j;
        LaneWeights w{};
        w.d = half_to_float(load_as<uint16_t>(block));
        split_nibbles(load16_a2(block + 2), w);
        return w;
    }
    PH_LANE static float dot(const LaneWeights& w, const LaneAct& a) {
        // Values are stored plus 8.
        return a.d * (w.d * static_cast<float>(dot_runs(w, a) - 8 * (a.sum_lo + a.sum_hi)));
    }
};

struct Q4_1Lanes : Blocks32Lanes {
    static constexpr int kBlockBytes = 8 * 20;
    PH_LANE static LaneWeights load(const uint8_t* span, int j) {
        const uint8_t* block = span + 20 * j;
        LaneWeights w{};
        w.d = half_to_float(load_as<uint16_t>(block));
        w.dmin = half_to_float(load_as<uint16_t>(block + 2));  // the minimum m
        split_nibbles(load16_a2(block + 4), w);
        return w;
    }
    PH_LANE static float dot(const LaneWeights& w, const LaneAct& a) {
        return a.d * (w.d * static_cast<float>(dot_runs(w, a))) + w.dmin * a.s;
    }
};

// The lane's activations of span `span` (256 values) of one token, in
// ph_quantize_activations' layout at `act` (`in` values): int8 q[in], float d[in / 32],
// float s[in / 32], int sum16[in / 16].
template <class T>
PH_LANE LaneAct load_act(const uint8_t* act, int64_t in, int64_t span, int j) {
    const int first = T::first_value(j);
    const uint8_t* base = act + 256 * span;
    const Bytes16 lo = load16(base + first);
    const Bytes16 hi = load16(base + first + T::kHighOffset);
    LaneAct a;
    for (int i = 0; i < 4; ++i) {
        a.lo[i] = static_cast<int>(lo.w[i]);
        a.hi[i] = static_cast<int>(hi.w[i]);
    }
    const uint8_t* sum16 = act + in + in / 4;
    a.sum_lo = load_as<int>(sum16 + 4 * (16 * span + first / 16));
    a.sum_hi = load_as<int>(sum16 + 4 * (16 * span + (first + T::kHighOffset) / 16));
    // The 32-block of the run: d repeats a Q8_K block's scale eight times.
    const int64_t chunk = 8 * span + (T::kPerSpan ? 0 : j);
    a.d = load_as<float>(act + in + 4 * chunk);
    a.s = T::kPerSpan ? 0.0f : load_as<float>(act + in + in / 8 + 4 * chunk);
    return a;
}

}  // namespace powerhouse::kernels::lanes

#undef PH_LANE
