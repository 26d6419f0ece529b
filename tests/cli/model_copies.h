// Copies of the test model (SmolLM2, which never thinks and whose template reads no switch)
// with another chat template, for the suites that need a model that thinks or whose template
// reads enable_thinking or reasoning_effort: no such model is at hand offline. The copy has the
// test model's metadata and tensors, only tokenizer.chat_template replaced (the engine's
// GgufWriter), so it answers as the test model would to the prompt that template makes.
#pragma once

#include <filesystem>
#include <string>

#include "support/test_support.h"

namespace powerhouse::test {

// The test model with `chat_template` instead of its own, written into `dir` as `name`.
// Fails the calling test (and returns an empty path) when the copy cannot be made.
std::filesystem::path test_model_with_template(const TempDir& dir, const std::string& chat_template,
                                               const std::string& name = "thinking.gguf");

// "-m MODEL -t 2 --ctx 512 --temp 0": a command's model, small and greedy.
std::string on_two_threads(const std::filesystem::path& model);

}  // namespace powerhouse::test
