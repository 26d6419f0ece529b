// Tensor element types as numbered by ggml/GGUF, and their block geometry.
//
// A quantized tensor row is a sequence of blocks; each block encodes `block_size`
// elements in `type_size` bytes. The table covers every type id GGUF files use today so
// that any real file can be read and described; `has_reference` marks the types the
// engine can dequantize and quantize (see dequantize.h, quantize.h).
//
// Thread-safety: constant data only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace powerhouse {

enum class GgmlType : uint32_t {
    f32 = 0,
    f16 = 1,
    q4_0 = 2,
    q4_1 = 3,
    q5_0 = 6,
    q5_1 = 7,
    q8_0 = 8,
    q8_1 = 9,
    q2_k = 10,
    q3_k = 11,
    q4_k = 12,
    q5_k = 13,
    q6_k = 14,
    q8_k = 15,
    iq2_xxs = 16,
    iq2_xs = 17,
    iq3_xxs = 18,
    iq1_s = 19,
    iq4_nl = 20,
    iq3_s = 21,
    iq2_s = 22,
    iq4_xs = 23,
    i8 = 24,
    i16 = 25,
    i32 = 26,
    i64 = 27,
    f64 = 28,
    iq1_m = 29,
    bf16 = 30,
    tq1_0 = 34,
    tq2_0 = 35,
    mxfp4 = 39,
    nvfp4 = 40,
    q1_0 = 41,
};

struct TypeTraits {
    GgmlType type;
    std::string_view name;  // as ggml prints it: "Q4_K", "F16", ...
    uint32_t block_size;    // elements per block
    uint32_t type_size;     // bytes per block
    bool has_reference;     // dequantize/quantize implemented by the engine
};

// Traits of a type id read from a file; nullopt for ids no GGUF writer uses.
std::optional<TypeTraits> type_traits(uint32_t type_id);
const TypeTraits& type_traits(GgmlType type);

// Looks a type up by its name, case-insensitively ("q4_k", "F16").
std::optional<GgmlType> type_from_name(std::string_view name);

// Bytes taken by `n_elements` elements of a row; n_elements must be a multiple of the
// block size (checked by the caller, e.g. the GGUF reader).
inline uint64_t row_bytes(const TypeTraits& traits, uint64_t n_elements) {
    return n_elements / traits.block_size * traits.type_size;
}

}  // namespace powerhouse
