// One device's part of a model under a device plan (powerhouse/plan.h): the layers it runs
// (layer split) or its share of every layer's heads and feed-forward columns (tensor split),
// with the KV cache of what it holds. A SplitBackend (split_backend.h) drives the stages of
// a plan; a single device is a plan with one stage that holds everything.
//
// Thread-safety: a stage is used by one thread at a time; different stages of one plan run
// on different threads at once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "arch/step_program.h"
#include "backend/kv_blocks.h"
#include "powerhouse/device_types.h"
#include "powerhouse/result.h"
#include "powerhouse/tokenizer.h"
#include "tensor/argmax.h"

namespace powerhouse {

// The rows of a batch and where their keys and values live in the stage's cache of blocks
// (kv_blocks.h): row i is position pos[i] of the sequence whose block table starts at
// tables + seq[i] * table_stride. Rows of one sequence come in position order, and attend
// to every earlier position of their sequence, rows before them in the batch included.
struct StageBatch {
    int n = 0;
    const int32_t* pos = nullptr;
    const int32_t* seq = nullptr;
    const int32_t* tables = nullptr;
    int table_stride = 0;
    uint32_t block_size = 1;

    const int32_t* table(int row) const { return tables + static_cast<ptrdiff_t>(seq[row]) * table_stride; }
    // The cache row (block * block_size + offset) of position p of row `row`'s sequence.
    int64_t slot(int row, int32_t p) const {
        const auto b = static_cast<uint32_t>(p) / block_size;
        return int64_t{table(row)[b]} * block_size + static_cast<uint32_t>(p) % block_size;
    }
    // Rows first .. first + count - 1, as a batch of their own.
    StageBatch rows(int first, int count) const {
        StageBatch b = *this;
        b.n = count;
        b.pos += first;
        b.seq += first;
        return b;
    }
};

// One sequence at positions first .. first + n - 1, held at the same rows of the cache: a
// batch for tests and for callers that keep a single sequence.
class ContiguousBatch {
public:
    ContiguousBatch(int n, uint32_t first) : pos_(static_cast<size_t>(std::max(0, n))), seq_(pos_.size(), 0) {
        for (size_t i = 0; i < pos_.size(); ++i) pos_[i] = static_cast<int32_t>(first + i);
        batch_.n = n;
        batch_.pos = pos_.data();
        batch_.seq = seq_.data();
        batch_.tables = &table_;
        batch_.table_stride = 1;
        batch_.block_size = first + static_cast<uint32_t>(std::max(0, n)) + 1;  // block 0 holds them all
    }
    ContiguousBatch(const ContiguousBatch&) = delete;
    ContiguousBatch& operator=(const ContiguousBatch&) = delete;
    const StageBatch& batch() const { return batch_; }

private:
    std::vector<int32_t> pos_, seq_;
    int32_t table_ = 0;
    StageBatch batch_;
};

class DeviceStage {
public:
    virtual ~DeviceStage() = default;

    virtual const std::string& name() const = 0;  // "CPU 1", for messages
    // The activations entering and leaving the stage: [n_batch][n_embd] floats on the device.
    virtual float* x() = 0;
    // Looks up the tokens' embeddings into x() and runs the step program's input ops, token t
    // at position positions[t] (an encoder adds its position embeddings there). Only on the
    // stage that holds the embedding.
    virtual Result<void> embed(std::span<const TokenId> tokens, std::span<const int32_t> positions) = 0;
    // Runs the stage's layers over the first batch.n rows of x(), keeping their keys and
    // values. A tensor split's all-reduces happen inside.
    virtual Result<void> run_layers(const StageBatch& batch) = 0;
    // Makes the block copies that the cache's bookkeeping queued (kv_blocks.h), in order.
    virtual Result<void> copy_kv_blocks(std::span<const KvBlockCopy> copies) = 0;
    // How many rows one head() call takes (at least 1).
    virtual int max_head_rows() const = 0;
    // Whether the stage reads its cache through block tables; if not, a sequence's block i
    // must be block i of the pool (KvBlocksOptions::contiguous).
    virtual bool paged_kv() const = 0;
    // Runs the output head on the given rows of x() and returns their logits, one row of
    // n_vocab after another, valid until the next call. Only on the stage that holds the
    // output layer; at most max_head_rows() rows.
    virtual Result<std::span<const float>> head(std::span<const int> rows) = 0;
    // The output head on the given rows, returning only the index of each one's largest
    // logit (the first of equals; kNoToken when none is a number above -inf) into `out`. A GPU
    // computes it where the logits are; this default takes them to the host.
    virtual Result<void> head_argmax(std::span<const int> rows, std::span<TokenId> out) {
        Result<std::span<const float>> logits = head(rows);
        if (!logits) return logits.error();
        const size_t n_vocab = logits->size() / rows.size();
        for (size_t i = 0; i < rows.size(); ++i) out[i] = argmax(logits->subspan(i * n_vocab, n_vocab));
        return {};
    }
    // The head's ops before the output projection on the given rows: the final norm's
    // output, n_embd floats per row (what embeddings pool), valid until the next call. An
    // encoder has no head: its rows are the last layer's.
    virtual Result<std::span<const float>> head_hidden(std::span<const int> rows) = 0;
    // What the stage holds and how long it has worked.
    virtual DeviceUsage usage() const = 0;
    // For tests and debugging: the first rows of activation buffer `b`, as many as `values`
    // (or `out`) holds, each the stage's width of that buffer (its share under a tensor
    // split, StageLayout::width), copied from or to the host. A GPU copies synchronously on
    // the stage's stream, after the work queued before. Fails for a part of a row or more
    // rows than the buffer holds (the batch; one row of logits).
    virtual Result<void> write_buffer(arch::Buffer b, std::span<const float> values) = 0;
    virtual Result<void> read_buffer(arch::Buffer b, std::span<float> out) = 0;

    // Faults (ARCHITECTURE.md section 7). interrupt() may be called from any thread while
    // the stage works: a wait of the stage's own (a GPU stream it synchronizes with) ends
    // with ErrorCode::device_failed instead of waiting on, and so does every later one. It
    // is how a step that outlives its deadline gets its thread back.
    virtual void interrupt() {}
    // Whether the stage may still be destroyed once its device has failed. A GPU stage may
    // not: freeing its memory, stream or graphs touches a context that after a sticky error
    // cannot be trusted (and that with a hung kernel would wait for ever), so the backend
    // lets it go with the process instead.
    virtual bool destroyable_after_fault() const { return true; }
};

}  // namespace powerhouse
