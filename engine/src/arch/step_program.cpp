#include "arch/step_program.h"

#include "arch/architecture.h"

namespace powerhouse::arch {

StepProgram build_step_program(const Hparams& hp) {
    // read_hparams accepted hp.architecture, so it is in the table.
    return find_architecture(hp.architecture)->build(hp);
}

std::string weight_name(const Op& op, uint32_t layer) {
    const size_t at = op.weight.find("{}");
    if (at == std::string::npos) return op.weight;
    return op.weight.substr(0, at) + std::to_string(layer) + op.weight.substr(at + 2);
}

}  // namespace powerhouse::arch
