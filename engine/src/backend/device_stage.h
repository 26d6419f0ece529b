// One device's part of a model under a device plan (powerhouse/plan.h): the layers it runs
// (layer split) or its share of every layer's heads and feed-forward columns (tensor split),
// with the KV cache of what it holds. A SplitBackend (split_backend.h) drives the stages of
// a plan; a single device is a plan with one stage that holds everything.
//
// Thread-safety: a stage is used by one thread at a time; different stages of one plan run
// on different threads at once.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "arch/step_program.h"
#include "powerhouse/device_types.h"
#include "powerhouse/result.h"
#include "powerhouse/tokenizer.h"
#include "tensor/argmax.h"

namespace powerhouse {

class DeviceStage {
public:
    virtual ~DeviceStage() = default;

    virtual const std::string& name() const = 0;  // "CPU 1", for messages
    // The activations entering and leaving the stage: [n_batch][n_embd] floats on the device.
    virtual float* x() = 0;
    // Looks up the tokens' embeddings into x() and runs the step program's input ops. Only
    // on the stage that holds the embedding.
    virtual Result<void> embed(std::span<const TokenId> tokens) = 0;
    // Runs the stage's layers over the first n rows of x(), the tokens at positions pos ..
    // pos + n - 1, keeping their keys and values. A tensor split's all-reduces happen inside.
    virtual Result<void> run_layers(int n, uint32_t pos) = 0;
    // Runs the output head on row `row` of x() and returns the logits, valid until the next
    // call. Only on the stage that holds the output layer.
    virtual Result<std::span<const float>> head(int row) = 0;
    // The output head on row `row`, returning only the index of the largest logit (the first
    // of equals; kNoToken when none is a number above -inf). A GPU computes it where the logits
    // are; this default takes them to the host.
    virtual Result<TokenId> head_argmax(int row) {
        Result<std::span<const float>> logits = head(row);
        if (!logits) return logits.error();
        return argmax(*logits);  // the sampler's own greedy choice
    }
    // What the stage holds and how long it has worked.
    virtual DeviceUsage usage() const = 0;
    // For tests and debugging: the first rows of activation buffer `b`, as many as `values`
    // (or `out`) holds, each the stage's width of that buffer (its share under a tensor
    // split, StageLayout::width), copied from or to the host. A GPU copies synchronously on
    // the stage's stream, after the work queued before. Fails for a part of a row or more
    // rows than the buffer holds (the batch; one row of logits).
    virtual Result<void> write_buffer(arch::Buffer b, std::span<const float> values) = 0;
    virtual Result<void> read_buffer(arch::Buffer b, std::span<float> out) = 0;
};

}  // namespace powerhouse
