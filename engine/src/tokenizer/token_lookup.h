// Hash tables for the tokenizers' hot lookups, flat and open-addressed (linear probing):
//  - TokenLookup: token text -> id. The texts stay in the vocabulary; a slot holds the id
//    and hash bits, so a miss rarely touches the text.
//  - PairTable: a pair of 32-bit symbol ids -> a 32-bit rank and a 32-bit result (BPE merges).
// std::unordered_map costs a node allocation per entry and is slow in debug builds, where
// the tests run; these are a few vectors.
//
// Thread-safety: immutable after building; const lookups from any thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

namespace powerhouse {

// A fast 64-bit hash of bytes (8 at a time); not for adversarial keys, which vocabularies are not.
inline uint64_t hash_bytes(std::string_view s) {
    constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
    uint64_t h = s.size() * kMul;
    const char* p = s.data();
    size_t n = s.size();
    while (n >= 8) {
        uint64_t k;
        std::memcpy(&k, p, 8);
        h = (h ^ (k * kMul)) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t k = 0;
    std::memcpy(&k, p, n);
    h = (h ^ (k * kMul)) * 0x94D049BB133111EBull;
    return h ^ (h >> 31);
}

class TokenLookup {
public:
    // text_of(id) gives the text of token id; for texts that repeat, the later id wins.
    template <class TextOf>
    void build(int32_t n_tokens, TextOf text_of) {
        size_t capacity = 16;
        while (capacity < static_cast<size_t>(n_tokens) * 2) capacity *= 2;
        slots_.assign(capacity, Slot{0, -1});
        mask_ = capacity - 1;
        for (int32_t id = 0; id < n_tokens; ++id) {
            const std::string_view text = text_of(id);
            if (text.empty()) continue;
            const uint64_t h = hash_bytes(text);
            for (size_t i = h & mask_;; i = (i + 1) & mask_) {
                Slot& slot = slots_[i];
                if (slot.id < 0 || (slot.tag == static_cast<uint32_t>(h >> 32) && text_of(slot.id) == text)) {
                    slot = Slot{static_cast<uint32_t>(h >> 32), id};
                    break;
                }
            }
        }
    }

    template <class TextOf>
    std::optional<int32_t> find(std::string_view text, TextOf text_of) const {
        if (slots_.empty()) return std::nullopt;
        const uint64_t h = hash_bytes(text);
        const auto tag = static_cast<uint32_t>(h >> 32);
        for (size_t i = h & mask_;; i = (i + 1) & mask_) {
            const Slot& slot = slots_[i];
            if (slot.id < 0) return std::nullopt;
            if (slot.tag == tag && text_of(slot.id) == text) return slot.id;
        }
    }

private:
    struct Slot {
        uint32_t tag;  // high hash bits
        int32_t id;    // -1: empty
    };
    std::vector<Slot> slots_;
    size_t mask_ = 0;
};

class PairTable {
public:
    struct Value {
        uint32_t rank;
        uint32_t result;
    };

    void reserve(size_t n) {
        size_t capacity = 16;
        while (capacity < n * 2) capacity *= 2;
        slots_.assign(capacity, Slot{kEmpty, {}});
        mask_ = capacity - 1;
        size_ = 0;
    }
    // Keeps the first value inserted for a pair. Call reserve() for the final count first.
    void insert(uint32_t a, uint32_t b, Value value) {
        const uint64_t key = (uint64_t{a} << 32) | b;
        for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return;
            if (slots_[i].key == kEmpty) {
                slots_[i] = Slot{key, value};
                ++size_;
                return;
            }
        }
    }
    const Value* find(uint32_t a, uint32_t b) const {
        const uint64_t key = (uint64_t{a} << 32) | b;
        for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return &slots_[i].value;
            if (slots_[i].key == kEmpty) return nullptr;
        }
    }
    size_t size() const { return size_; }

private:
    static constexpr uint64_t kEmpty = ~uint64_t{0};  // no symbol id reaches 2^32 - 1
    static uint64_t mix(uint64_t k) {
        k ^= k >> 33;
        k *= 0xFF51AFD7ED558CCDull;
        k ^= k >> 33;
        return k;
    }
    struct Slot {
        uint64_t key;
        Value value;
    };
    std::vector<Slot> slots_;
    size_t mask_ = 0;
    size_t size_ = 0;
};

}  // namespace powerhouse
