// The guesses of speculative decoding by prompt lookup (powerhouse/generation.h:
// LookupSettings): the tokens that followed the latest earlier appearance of the
// conversation's last tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "powerhouse/generation.h"

namespace powerhouse {

// The conversation is `prompt` then `answer` (the answer's last token is the one about to be
// decoded). Looks up its last n tokens, for n from settings.max_match down to min_match, in
// settings.prediction, else among the conversation's earlier tokens, and returns up to
// `limit` tokens that followed the latest appearance of the longest run found there; empty
// when none appeared before.
std::vector<TokenId> lookup_draft(std::span<const TokenId> prompt, std::span<const TokenId> answer,
                                  const LookupSettings& settings, uint32_t limit);

}  // namespace powerhouse
