// The architectures the engine runs, one file each (llama.cpp, qwen2.cpp, qwen3.cpp,
// qwen3moe.cpp, gemma3.cpp, gpt_oss.cpp, phi3.cpp, smollm3.cpp, seed_oss.cpp, glm4.cpp,
// mistral3.cpp, granite.cpp, and the encoders bert.cpp and nomic_bert.cpp), and the one table that lists
// them. An architecture is its GGUF name
// (`general.architecture`), what it reads from the metadata beyond the hyper-parameters all
// decoders share (read_hparams reads those first), and how it writes its step program from
// the shared blocks (blocks.h). Adding an architecture: one new file that defines its
// Architecture, one line in the table in architecture.cpp.
//
// Thread-safety: immutable data and pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "arch/hparams.h"
#include "arch/step_program.h"
#include "gguf/gguf_model.h"
#include "powerhouse/result.h"

namespace powerhouse::arch {

struct Architecture {
    std::string_view name;  // general.architecture
    // Reads what this architecture adds (RoPE layout, sliding layers, scales...) into `hp`,
    // whose common fields are already read, and checks it.
    Result<void> (*read)(const GgufModel& model, Hparams& hp);
    StepProgram (*build)(const Hparams& hp);
    // An encoder that makes embeddings, not text (BERT): ModelInfo::embedding_only.
    bool embedding_only = false;
};

// Defined in the architecture's own file.
extern const Architecture kLlama;
extern const Architecture kQwen2;
extern const Architecture kQwen3;
extern const Architecture kQwen3Moe;
extern const Architecture kGemma3;
extern const Architecture kGptOss;
extern const Architecture kPhi3;
extern const Architecture kSmolLm3;
extern const Architecture kSeedOss;
extern const Architecture kGlm4;
extern const Architecture kMistral3;
extern const Architecture kGranite;
extern const Architecture kGraniteMoe;
extern const Architecture kGlm4Moe;
extern const Architecture kBert;
extern const Architecture kNomicBert;

// The architecture named `name`, or null when the engine has none by that name.
const Architecture* find_architecture(std::string_view name);

// The names of every architecture the engine runs, in table order.
std::vector<std::string> architecture_names();

}  // namespace powerhouse::arch
