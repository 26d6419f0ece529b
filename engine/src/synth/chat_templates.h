// The chat templates (Jinja text for tokenizer.chat_template) of the model families that
// synthetic models copy.
//
// Thread-safety: constant data only.
#pragma once

#include <string_view>

#include "synth/presets.h"

namespace powerhouse::synth {

std::string_view chat_template(ChatTemplateId id);

}  // namespace powerhouse::synth
