// The communicator of CUDA stages (backend/communicator.h): all-reduce and copies between
// buffers in GPU memory.
//   - Shards sharing one GPU: the sum is formed on that GPU with an add kernel, in rank
//     order, and copied back into each buffer (the tensor split then runs on one GPU, so
//     that its path is tested wherever there is one GPU).
//   - Distinct GPUs: NCCL's all-reduce when NCCL can be loaded (one communicator per plan,
//     created here); otherwise the buffers are gathered on the first rank's GPU with peer
//     copies (through host memory where peer access is not possible), summed and sent back.
//   - Copies: a peer copy between GPUs, a device copy within one.
// The rendezvous is the shared one: the last rank to arrive does the work for all, so a
// rank that failed never leaves the others blocked inside a GPU collective.
//
// Thread-safety: as Communicator.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/communicator.h"
#include "powerhouse/result.h"

namespace powerhouse::cuda {

// One rank per entry of `devices` (CUDA device indices; repeats allowed). Fails when a
// device cannot be used. `use_nccl` false keeps to the copy-and-add path.
Result<std::unique_ptr<Communicator>> make_cuda_communicator(const std::vector<int>& devices, bool use_nccl = true);

// What the communicator of those devices uses, for messages and the device check:
// "same GPU", "NCCL 2.28.3", "peer copies (NCCL not found: ...)".
std::string cuda_communicator_kind(const Communicator& comm);

}  // namespace powerhouse::cuda
