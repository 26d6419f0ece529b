#include "runtime/lookup_draft.h"

#include <algorithm>
#include <optional>

namespace powerhouse {

namespace {

struct Run {
    size_t end = 0;     // the run's end in the source: the guess starts here
    size_t length = 0;  // 0: none found
};

// The place in a source (`at`, positions below `before`, each followed by at least one
// token) that ends the longest run of the conversation's last tokens, up to `longest`, and at
// least `shortest`. Of equally long runs, the one ending nearest `near`, else the latest.
template <class Source, class Conversation>
Run longest_run(const Source& at, size_t before, const Conversation& conversation, size_t size, size_t shortest,
                size_t longest, std::optional<size_t> near = std::nullopt) {
    const auto last = conversation(size - 1);
    const auto distance = [&](size_t end) { return end > *near ? end - *near : *near - end; };
    Run best;
    for (size_t end = before; end > 0; --end) {
        if (at(end - 1) != last) continue;
        size_t length = 1;
        while (length < longest && length < end && length < size &&
               at(end - 1 - length) == conversation(size - 1 - length)) {
            ++length;
        }
        if (length < shortest || length < best.length) continue;
        if (length == best.length && (!near || distance(end) >= distance(best.end))) continue;
        best = {end, length};
        if (length == longest && !near) break;  // latest first: none later can beat it
    }
    return best;
}

}  // namespace

std::vector<TokenId> lookup_draft(std::span<const TokenId> prompt, std::span<const TokenId> answer,
                                  const LookupSettings& settings, uint32_t limit) {
    const size_t size = prompt.size() + answer.size();
    if (limit == 0 || size == 0 || settings.max_match == 0) return {};
    // The conversation as one sequence, without copying it every step.
    const auto at = [&](size_t i) { return i < prompt.size() ? prompt[i] : answer[i - prompt.size()]; };
    const size_t shortest = std::max<uint32_t>(1, settings.min_match);
    const size_t longest = settings.max_match;
    const auto guess = [&](const auto& source, size_t source_size, size_t from) {
        std::vector<TokenId> draft;
        for (size_t i = from; i < source_size && draft.size() < limit; ++i) draft.push_back(source(i));
        return draft;
    };
    // The prediction first: it is what the caller expects the answer to say.
    const std::span<const TokenId> predicted = settings.prediction;
    if (!predicted.empty()) {
        const auto in_prediction = [&](size_t i) { return predicted[i]; };
        // Where the answer has got to, if it follows the prediction token for token.
        const Run run = longest_run(in_prediction, predicted.size() - 1, at, size, shortest, longest, answer.size());
        if (run.length > 0) return guess(in_prediction, predicted.size(), run.end);
    }
    // Then the conversation before its last token.
    const Run run = longest_run(at, size - 1, at, size, shortest, longest);
    if (run.length > 0) return guess(at, size, run.end);
    return {};
}

}  // namespace powerhouse
