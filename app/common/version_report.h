// What `powerhouse --version` and `powerhouse-cli --version` print: the program's version
// and the git commit it was built from, then what it finds at run time: the CUDA runtime it
// carries (or that it was built without CUDA), the NVIDIA driver (through the CUDA runtime
// and NVML, both loaded only when asked, so this works and says so on a machine without
// one), and cuBLAS and NCCL (in a build with CUDA: loaded at run time, version and file, or
// why not).
//
// Thread-safety: a plain function; it opens NVML (and cuBLAS, NCCL) for the call.
#pragma once

#include <string>

namespace powerhouse {

// "powerhouse-cli 0.1.0 (commit 0fada89c1e1a)\nCUDA: ...\nNVIDIA driver: ...\n[cuBLAS: ...\n]NCCL: ...\n"
std::string version_report(const std::string& program);

}  // namespace powerhouse
