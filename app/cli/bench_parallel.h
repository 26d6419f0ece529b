// powerhouse-cli bench --parallel N[,N...]: several sequences generating at once through the
// scheduler (continuous batching). For each N: N requests with prompts of p random tokens
// start together (their prompts all in the first step, as llama.cpp's batched decoding
// takes them), then generate n tokens each, greedily; halfway, one more request arrives.
// Reported: the aggregate generation speed over the steps that carry one token of every
// sequence, the prompts' aggregate speed and time to first token when all start together,
// the late request's time to first token (under load), and the peak KV memory the
// sequences held against the positions they held.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "powerhouse/model.h"

namespace powerhouse::cli {

struct ParallelBenchOptions {
    std::vector<uint32_t> parallel;
    int n_prompt = 512;
    int n_gen = 128;
    int repetitions = 3;
    uint32_t n_batch = 64;
    uint32_t seed = 42;
    bool json = false;
    nlohmann::ordered_json& json_out;  // with json: the results go to json_out["parallel"]
};

// The model must be loaded for max(parallel) + 1 sequences and their positions.
int run_parallel_bench(Model& model, const ParallelBenchOptions& options);

}  // namespace powerhouse::cli
