// A Backend over the stages of a device plan (DESIGN.md section 3), for any kind of device:
//   single  one stage holds everything and runs on the caller's thread;
//   layer   the stages run in pipeline order, each on its own thread; the activations cross
//           each boundary through the communicator. A batch of several micro-batches is
//           pipelined: while stage d runs micro-batch m, stage d + 1 runs micro-batch m - 1,
//           so that a long prompt keeps every device busy;
//   tensor  the stage holding the embedding embeds the batch and copies it to the others;
//           all stages then run every layer at once (their all-reduces meet in the
//           communicator) and the stage holding the output layer computes the logits.
// A batch may mix sequences: the backend hands out the KV blocks (kv_blocks.h), makes the
// copies the bookkeeping asks for on every stage, and gives each stage the rows' positions
// and block tables.
// When a stage fails, the communicator is aborted so that no other stage waits for it, the
// cache keeps the positions before the failed call, and the error names the device. A stage
// that fails as a device does (ErrorCode::device_failed) fails the backend for good
// (Backend::fault()). With a step deadline, a step whose stages have not all returned in
// time has its stages interrupted and its communicator aborted by a watchdog thread: the
// stage that never answered is the failed device.
//
// Thread-safety: as Backend.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"
#include "backend/device_stage.h"
#include "powerhouse/plan.h"

namespace powerhouse {

struct SplitShape {
    SplitMode mode = SplitMode::single;
    uint32_t n_ctx = 0;
    uint32_t n_batch = 0;      // tokens per stage call (the micro-batch of a layer split)
    uint32_t n_vocab = 0;
    uint32_t n_embd = 0;
    size_t embedding_stage = 0;  // which stage embeds
    size_t output_stage = 0;     // which stage computes the logits
    // The KV cache's blocks (kv_blocks.h): how many, their rows, sequences at once and
    // finished ones kept as prefixes. kv_blocks 0: enough for n_ctx positions.
    uint32_t kv_blocks = 0;
    uint32_t kv_block_size = 32;
    uint32_t max_sequences = 1;
    uint32_t max_cached = 16;
    // How long one decode_batch may take before its stages are interrupted; 0: no deadline.
    std::chrono::milliseconds step_deadline{0};
};

// `stages` in pipeline order (layer split). `comm` has one rank per stage.
Result<std::unique_ptr<Backend>> make_split_backend(std::vector<std::unique_ptr<DeviceStage>> stages,
                                                    std::unique_ptr<Communicator> comm, const SplitShape& shape);

}  // namespace powerhouse
