// Special token ids and end-of-generation tokens of a vocabulary.
//
// Ids come from the metadata (tokenizer.ggml.bos_token_id, ...); where a model's converter
// left them out, they are recognised by their text the way llama.cpp does ("<|eot_id|>",
// "<|im_end|>", "<end_of_turn>", "<|fim_pad|>", ...), and such tokens become control tokens
// even if the file calls them normal. The end-of-generation set is built the same way, so
// that generation stops where the reference stops.
//
// Thread-safety: called once while a Vocab is built.
#pragma once

#include "gguf/gguf_value.h"
#include "tokenizer/vocab.h"

namespace powerhouse {

// Fills bos/eos/eot/eom/unk/pad/fim_*, add_bos/add_eos and eog, and adjusts token attributes.
// Ids out of range are ignored (as the reference does, with a warning there).
void resolve_special_tokens(const GgufMetadata& metadata, Vocab& vocab);

}  // namespace powerhouse
