// What the engine asks of a device backend: run the model's step program over a batch of
// tokens, keeping the KV cache, and hand back the logits of the last token. The CPU
// backend implements it today; the CUDA backend implements the same interface, and a
// multi-device plan composes several of them.
//
// Thread-safety: a backend is used from one thread (the engine's) at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "backend/kv_blocks.h"
#include "powerhouse/device_types.h"
#include "powerhouse/result.h"
#include "powerhouse/sequences.h"
#include "powerhouse/tokenizer.h"

namespace powerhouse {

class Backend {
public:
    virtual ~Backend() = default;

    // The sequences and the blocks of the KV cache they hold (kv_blocks.h): open, close,
    // adopt a cached prefix, truncate. A batch's sequences must be open here.
    virtual KvBlocks& kv() = 0;
    virtual const KvBlocks& kv() const = 0;
    // A new sequence for a batch. Where the cache holds one sequence (contiguous mode), the
    // single-sequence calls' own sequence goes to the cache first.
    virtual Result<SeqId> open_sequence() = 0;
    // Runs a batch that mixes sequences: each row's token goes after the positions its
    // sequence holds (and the earlier rows of that sequence in the batch). The blocks the
    // rows need are taken from the pool first; when they are lacking (ErrorCode::
    // out_of_memory) or a sequence would pass the context (context_full), nothing is run.
    // Then output(i) is what the i-th row asking for an output (in row order) asked for,
    // valid until the next call.
    virtual Result<void> decode_batch(std::span<const BatchRow> rows) = 0;
    struct Output {
        std::span<const float> logits;  // RowOutput::logits
        TokenId argmax = -1;            // RowOutput::argmax
        std::span<const float> hidden;  // RowOutput::hidden (n_embd floats)
    };
    virtual Output output(size_t i) const = 0;
    // Bytes of one block of the pool, keys and values of every layer on every device.
    virtual uint64_t kv_block_bytes() const = 0;

    // One sequence for callers that want no more (tests, benchmarks, the CLI): the calls
    // below work on it, opened on first use.

    // Processes `tokens` at positions n_past() .. n_past() + size - 1, appending their keys
    // and values to the cache, and returns the logits (n_vocab floats) of the last one.
    // The span stays valid until the next call. Fails, changing nothing, when the tokens
    // would not fit in the context or an id is out of range.
    virtual Result<std::span<const float>> decode(std::span<const TokenId> tokens) = 0;
    // As decode, but returns only the index of the largest logit (the first of equals;
    // kNoToken-like -1 when none is a number above -inf): greedy decoding, where a GPU
    // picks the token itself and only its id crosses to the host.
    virtual Result<TokenId> decode_argmax(std::span<const TokenId> tokens) = 0;

    // Positions held in the KV cache.
    virtual uint32_t n_past() const = 0;
    virtual uint32_t n_ctx() const = 0;
    // Forgets positions n and later (keeps the cache of a shared prompt prefix).
    virtual void truncate(uint32_t n) = 0;
    // The tokens of the n_past() positions.
    virtual std::span<const TokenId> cached_tokens() const = 0;
    // Bytes held by the KV cache.
    virtual size_t kv_cache_bytes() const = 0;
    // Each device's share: bytes held, time worked and time spent communicating.
    virtual std::vector<DeviceUsage> devices() const = 0;
    // The device that failed (ErrorCode::device_failed, or no answer within the deadline),
    // if one did. A failed backend runs nothing more: every later batch fails at once with
    // the same error, and the failed device is never touched again.
    virtual std::optional<DeviceFault> fault() const { return std::nullopt; }
    // A failure found outside the backend (the driver reports the GPU of `fault.device`
    // lost, or a fatal Xid): the backend fails as if the device had. Between batches only.
    virtual void set_fault(const DeviceFault& fault) = 0;
};

}  // namespace powerhouse
