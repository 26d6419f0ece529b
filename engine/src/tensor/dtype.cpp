#include "tensor/dtype.h"

#include <array>
#include <cctype>

namespace powerhouse {
namespace {

// Block geometry from ggml's type traits (checked against the PyPI `gguf` package's
// GGML_QUANT_SIZES by tests/engine/tensor/dtype_test.cpp's fixture).
constexpr std::array kTypes = {
    TypeTraits{GgmlType::f32, "F32", 1, 4, true},
    TypeTraits{GgmlType::f16, "F16", 1, 2, true},
    TypeTraits{GgmlType::q4_0, "Q4_0", 32, 18, true},
    TypeTraits{GgmlType::q4_1, "Q4_1", 32, 20, true},
    TypeTraits{GgmlType::q5_0, "Q5_0", 32, 22, true},
    TypeTraits{GgmlType::q5_1, "Q5_1", 32, 24, true},
    TypeTraits{GgmlType::q8_0, "Q8_0", 32, 34, true},
    TypeTraits{GgmlType::q8_1, "Q8_1", 32, 36, false},
    TypeTraits{GgmlType::q2_k, "Q2_K", 256, 84, true},
    TypeTraits{GgmlType::q3_k, "Q3_K", 256, 110, true},
    TypeTraits{GgmlType::q4_k, "Q4_K", 256, 144, true},
    TypeTraits{GgmlType::q5_k, "Q5_K", 256, 176, true},
    TypeTraits{GgmlType::q6_k, "Q6_K", 256, 210, true},
    TypeTraits{GgmlType::q8_k, "Q8_K", 256, 292, false},
    TypeTraits{GgmlType::iq2_xxs, "IQ2_XXS", 256, 66, false},
    TypeTraits{GgmlType::iq2_xs, "IQ2_XS", 256, 74, false},
    TypeTraits{GgmlType::iq3_xxs, "IQ3_XXS", 256, 98, false},
    TypeTraits{GgmlType::iq1_s, "IQ1_S", 256, 50, false},
    TypeTraits{GgmlType::iq4_nl, "IQ4_NL", 32, 18, false},
    TypeTraits{GgmlType::iq3_s, "IQ3_S", 256, 110, false},
    TypeTraits{GgmlType::iq2_s, "IQ2_S", 256, 82, false},
    TypeTraits{GgmlType::iq4_xs, "IQ4_XS", 256, 136, false},
    TypeTraits{GgmlType::i8, "I8", 1, 1, false},
    TypeTraits{GgmlType::i16, "I16", 1, 2, false},
    TypeTraits{GgmlType::i32, "I32", 1, 4, false},
    TypeTraits{GgmlType::i64, "I64", 1, 8, false},
    TypeTraits{GgmlType::f64, "F64", 1, 8, false},
    TypeTraits{GgmlType::iq1_m, "IQ1_M", 256, 56, false},
    TypeTraits{GgmlType::bf16, "BF16", 1, 2, true},
    TypeTraits{GgmlType::tq1_0, "TQ1_0", 256, 54, false},
    TypeTraits{GgmlType::tq2_0, "TQ2_0", 256, 66, false},
    TypeTraits{GgmlType::mxfp4, "MXFP4", 32, 17, true},
    TypeTraits{GgmlType::nvfp4, "NVFP4", 64, 36, false},
    TypeTraits{GgmlType::q1_0, "Q1_0", 128, 18, false},
};

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(a[i])) !=
            std::tolower(static_cast<unsigned char>(b[i]))) {
            return false;
        }
    }
    return true;
}

}  // namespace

std::optional<TypeTraits> type_traits(uint32_t type_id) {
    for (const TypeTraits& t : kTypes) {
        if (static_cast<uint32_t>(t.type) == type_id) return t;
    }
    return std::nullopt;
}

const TypeTraits& type_traits(GgmlType type) {
    for (const TypeTraits& t : kTypes) {
        if (t.type == type) return t;
    }
    return kTypes[0];  // unreachable for valid enumerators
}

std::optional<GgmlType> type_from_name(std::string_view name) {
    for (const TypeTraits& t : kTypes) {
        if (iequals(t.name, name)) return t.type;
    }
    return std::nullopt;
}

}  // namespace powerhouse
