// Constrained sampling (powerhouse/grammar.h) over SmolLM2's 49152-token vocabulary: building
// the vocabulary's trie, and mask() at points of a JSON answer, with the matcher's caches warm
// (the same matcher masks again, as during a generation that stays in one context) and cold (a
// fresh matcher each time: the first mask of an answer). Needs the test model
// (scripts/fetch-test-model); only its tokenizer is read.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "powerhouse/grammar.h"
#include "powerhouse/model.h"
#include "powerhouse/tokenizer.h"

namespace {

using namespace powerhouse;

const Tokenizer* smollm2_tokenizer() {
    static const std::optional<Tokenizer> tokenizer = []() -> std::optional<Tokenizer> {
        Result<Tokenizer> t = Tokenizer::load(setup_model_path());
        if (!t) return std::nullopt;
        return std::move(t).value();
    }();
    return tokenizer ? &*tokenizer : nullptr;
}

const nlohmann::ordered_json& person_schema() {
    static const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(R"({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "color": {"enum": ["red", "green", "blue"]},
            "tags": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["name", "age", "color", "tags"],
        "additionalProperties": false
    })");
    return schema;
}

// Where in the answer the mask is taken.
const std::vector<std::string>& prefixes() {
    static const std::vector<std::string> p = {
        "",                                                // 0: the opening brace
        "{\"name\": \"Samantha ",                          // 1: inside a string
        "{\"name\": \"Sam\", \"age\": 4",                  // 2: inside a bounded integer
        "{\n  \"name\": \"Sam\",\n  ",                     // 3: after pretty-printing whitespace
        "{\"name\": \"Sam\", \"age\": 41, \"color\": \"",  // 4: inside an enum
    };
    return p;
}

void BM_GrammarVocabularyBuild(benchmark::State& state) {
    const Tokenizer* t = smollm2_tokenizer();
    if (!t) return state.SkipWithError("no test model (scripts/fetch-test-model)");
    for (auto _ : state) benchmark::DoNotOptimize(GrammarVocabulary::build(*t));
}
BENCHMARK(BM_GrammarVocabularyBuild)->Unit(benchmark::kMillisecond);

void mask_bench(benchmark::State& state, bool warm) {
    const Tokenizer* t = smollm2_tokenizer();
    if (!t) return state.SkipWithError("no test model (scripts/fetch-test-model)");
    static const auto vocabulary = GrammarVocabulary::build(*t);
    static const Grammar grammar = Grammar::parse(json_schema_to_grammar(person_schema()).value()).value();
    const std::string& prefix = prefixes()[static_cast<size_t>(state.range(0))];
    std::vector<float> logits(static_cast<size_t>(t->n_vocab()), 0.0f);
    GrammarMatcher matcher(grammar, vocabulary);
    if (!matcher.accept_text(prefix)) return state.SkipWithError("the prefix does not fit the grammar");
    size_t open = 0;
    for (auto _ : state) {
        if (warm) {
            matcher.mask(logits);
        } else {
            GrammarMatcher fresh(grammar, vocabulary);
            fresh.accept_text(prefix);
            fresh.mask(logits);
        }
        benchmark::DoNotOptimize(logits.data());
    }
    for (float l : logits) open += l == 0.0f;
    state.counters["open_tokens"] = static_cast<double>(open);
}

void BM_GrammarMaskWarm(benchmark::State& state) {
    mask_bench(state, true);
}
BENCHMARK(BM_GrammarMaskWarm)->DenseRange(0, 4)->Unit(benchmark::kMicrosecond);

void BM_GrammarMaskCold(benchmark::State& state) {
    mask_bench(state, false);
}
BENCHMARK(BM_GrammarMaskCold)->DenseRange(0, 4)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
