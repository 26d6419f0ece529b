// Which devices a model loads onto, from ModelOptions::devices:
//   ""/"cpu"       one CPU device;  "cpu:N"  N virtual CPU devices (split paths without a GPU)
//   "cuda"         every NVIDIA GPU; "cuda:0,2"  those GPUs (CUDA device indices);
//   "cuda:0,0"     two shards on GPU 0, each with half of its memory (the split paths on one GPU)
//   "cuda:GPU-8f3c...,GPU-..."  GPUs by UUID (as NVML and the settings name them)
//   "auto"         every NVIDIA GPU when one can be used, else the CPU
// A build without the CUDA backend refuses "cuda" and reads "auto" as the CPU.
//
// Thread-safety: pure apart from the device queries.
#pragma once

#include <string>
#include <vector>

#include "powerhouse/plan.h"
#include "powerhouse/result.h"

namespace powerhouse {

struct ModelDevices {
    bool cuda = false;
    std::vector<DeviceDesc> descs;  // for the planner, one per shard
    std::vector<int> cuda_index;    // cuda: the CUDA device of each shard
    std::string why_cpu;            // "auto" that fell back to the CPU: the reason
};

// `excluded`: GPU UUIDs set aside (ModelOptions::excluded_gpus).
Result<ModelDevices> model_devices(const std::string& spec, const std::vector<std::string>& excluded = {});

// The spec for `devices` less descs[removed] (a GPU: all its shards), in the same order:
// "cpu:N"/"cpu" for CPU devices, "cuda:<uuid>,..." for GPUs (by UUID, which a renumbering
// cannot change). Empty when none is left.
std::string devices_spec_without(const ModelDevices& devices, size_t removed);


}  // namespace powerhouse
