// Small, fast, seedable random numbers for synthetic models. Every stream is derived from
// a key (seed, tensor, row, ...) rather than drawn in sequence, so results do not depend
// on how work is split across threads.
//
// Thread-safety: value types; one generator per thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace powerhouse::synth {

// SplitMix64's output function: a bijective 64-bit mixer.
inline uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A key from several parts; each step is a bijection, so distinct parts give distinct keys.
inline uint64_t mix_key(uint64_t a, uint64_t b) {
    return mix64(a ^ mix64(b));
}
inline uint64_t mix_key(uint64_t a, uint64_t b, uint64_t c) {
    return mix_key(mix_key(a, b), c);
}
inline uint64_t mix_key(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    return mix_key(mix_key(a, b, c), d);
}

// FNV-1a of a name: ties a tensor's stream to its name, so the weights of blk.0 stay the
// same when other tensors are added or removed (e.g. by --layers).
inline uint64_t hash_name(std::string_view name) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (char c : name) {
        h ^= static_cast<unsigned char>(c);
        h *= 0x100000001B3ull;
    }
    return h;
}

// xoshiro256** (Blackman and Vigna): fast, 256 bits of state, good statistical quality.
class Xoshiro256 {
public:
    explicit Xoshiro256(uint64_t key) {
        uint64_t x = key;
        for (uint64_t& s : s_) {
            x += 0x9E3779B97F4A7C15ull;
            s = mix64(x);
        }
    }

    uint64_t next() {
        const uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }

    // Uniform in [0, n) (Lemire's multiply-shift; the bias is below 2^-32 for n < 2^32).
    uint32_t below(uint32_t n) { return static_cast<uint32_t>(((next() >> 32) * n) >> 32); }

    // Approximately standard normal: the sum of four 16-bit uniforms (Irwin-Hall), exact
    // mean and variance, tails cut at 3.46 sigma. One draw per value; weights only need
    // to look like an initialisation, and a bounded tail keeps quantization scales tame.
    float normal() {
        const uint64_t r = next();
        const uint32_t sum = static_cast<uint32_t>(r & 0xFFFF) + static_cast<uint32_t>((r >> 16) & 0xFFFF) +
                             static_cast<uint32_t>((r >> 32) & 0xFFFF) + static_cast<uint32_t>(r >> 48);
        // Each lane: mean 32767.5, variance (65536^2 - 1) / 12.
        constexpr float kMean = 4 * 32767.5f;
        constexpr float kInvStd = 1.0f / 37837.23f;  // 1 / sqrt(4 * (65536^2 - 1) / 12)
        return (static_cast<float>(sum) - kMean) * kInvStd;
    }

private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t s_[4];
};

}  // namespace powerhouse::synth
