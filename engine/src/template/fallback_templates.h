// Built-in chat templates for the common families, used when a model ships no template or
// one the interpreter cannot run. Each renders bos_token (where the family uses one), the
// messages (system, user, assistant; tool calls and results where the format has them) and
// the generation prompt, in the family's format.
//
// Thread-safety: immutable strings.
#pragma once

#include <string_view>

namespace powerhouse::jinja {

extern const std::string_view kChatmlTemplate;
extern const std::string_view kLlama3Template;
extern const std::string_view kMistralTemplate;
extern const std::string_view kGemmaTemplate;
extern const std::string_view kHarmonyTemplate;

}  // namespace powerhouse::jinja
