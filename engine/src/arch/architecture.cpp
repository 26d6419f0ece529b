#include "arch/architecture.h"

#include <array>

namespace powerhouse::arch {

namespace {

// The registry: every architecture the engine runs.
const std::array<const Architecture*, 16> kArchitectures = {
    &kLlama,   &kQwen2, &kQwen3,   &kQwen3Moe, &kGemma3,  &kGptOss,     &kPhi3, &kSmolLm3,
    &kSeedOss, &kGlm4,  &kGlm4Moe, &kMistral3, &kGranite, &kGraniteMoe, &kBert, &kNomicBert};

}  // namespace

const Architecture* find_architecture(std::string_view name) {
    for (const Architecture* a : kArchitectures) {
        if (a->name == name) return a;
    }
    return nullptr;
}

std::vector<std::string> architecture_names() {
    std::vector<std::string> names;
    for (const Architecture* a : kArchitectures) names.emplace_back(a->name);
    return names;
}

}  // namespace powerhouse::arch
