// The CUDA backend's two optional libraries, loaded with dlopen when a backend asks for
// them and never linked: cuBLAS (tensor-core GEMM for prompt processing) and NCCL
// (all-reduce between distinct GPUs). A program built with CUDA therefore starts on a
// machine that has neither, and a feature that needs one reports what is missing in words
// a user can act on. No CUDA header leaks out of this file: streams are cudaStream_t
// passed as void*, 16-bit floats are raw uint16_t bits (tensor/half.h).
//
// Where each library is looked for; the first file that loads wins:
//   1. the file named by $POWERHOUSE_CUBLAS_LIBRARY / $POWERHOUSE_NCCL_LIBRARY. When the
//      variable is set, only there: a failure reports that file's loader error.
//   2. the sonames (libcublas.so.13, then libcublas.so; libnccl.so.2) through the dynamic
//      loader's own search (LD_LIBRARY_PATH, the ld.so cache, ...).
//   3. /usr/local/cuda/lib64/<soname>.
// cuBLAS 13 needs libcublasLt.so.13, which the loader finds beside it (the library's
// RUNPATH is $ORIGIN); when that fails the loader's message names it. Python's CUDA wheels
// (site-packages/nvidia/cublas/lib, nvidia/nccl/lib) are used through 1 or LD_LIBRARY_PATH.
//
// Ownership: each backend owns its CublasLibrary / NcclLibrary (no process-wide instance).
// A CublasHandle or NcclComms borrows the library it was made from and must not outlive it.
//
// Thread-safety: loading may run on any thread; a loaded library is immutable and may be
// shared. A CublasHandle is used by one thread at a time (cuBLAS's rule for a handle).
// NcclComms: one thread at a time; when one thread drives several ranks, their collectives
// go between group_start() and group_end() (otherwise the first rank waits for the others
// forever).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "platform/shared_library.h"
#include "powerhouse/result.h"

namespace powerhouse::cuda {

// Environment variables naming the library file to load instead of searching.
inline constexpr const char* kCublasLibraryVariable = "POWERHOUSE_CUBLAS_LIBRARY";
inline constexpr const char* kNcclLibraryVariable = "POWERHOUSE_NCCL_LIBRARY";

struct LibraryVersion {
    int major = 0;
    int minor = 0;
    int patch = 0;
};
// "13.0.2"
std::string format_library_version(const LibraryVersion& version);

struct CublasApi;  // the function pointers looked up in the library (cuda_libraries.cpp)
struct NcclApi;

// --- cuBLAS ----------------------------------------------------------------------------

class CublasLibrary {
public:
    ~CublasLibrary();
    CublasLibrary(const CublasLibrary&) = delete;
    CublasLibrary& operator=(const CublasLibrary&) = delete;

    // The file the loader opened, e.g. "/usr/local/cuda/lib64/libcublas.so.13".
    const std::string& file() const { return file_; }
    LibraryVersion version() const { return version_; }
    std::string version_string() const { return format_library_version(version_); }  // "13.0.2"

private:
    friend class CublasHandle;
    friend Result<std::unique_ptr<CublasLibrary>> load_cublas(const std::string& explicit_file);
    CublasLibrary(SharedLibrary library, std::string file, LibraryVersion version, std::unique_ptr<CublasApi> api);

    SharedLibrary library_;  // keeps the code behind api_ loaded
    std::string file_;
    LibraryVersion version_;
    std::unique_ptr<CublasApi> api_;
};

// Loads cuBLAS from `explicit_file` when it is not empty (and only from there), else by
// the search above (steps 2 and 3). Errors: not found or not loadable (the loader's
// message, and what runs without it), a file that is not cuBLAS (names the missing
// function), a cuBLAS older than 11.
Result<std::unique_ptr<CublasLibrary>> load_cublas(const std::string& explicit_file);
// The same with explicit_file from $POWERHOUSE_CUBLAS_LIBRARY (empty when unset).
Result<std::unique_ptr<CublasLibrary>> load_cublas();

// One cuBLAS handle on one device. Move-only; destroys the handle on destruction.
class CublasHandle {
public:
    CublasHandle() = default;
    ~CublasHandle();
    CublasHandle(CublasHandle&& other) noexcept;
    CublasHandle& operator=(CublasHandle&& other) noexcept;
    CublasHandle(const CublasHandle&) = delete;
    CublasHandle& operator=(const CublasHandle&) = delete;

    // A handle on the calling thread's current device. Fails without a usable GPU.
    static Result<CublasHandle> create(const CublasLibrary& library);

    int device() const { return device_; }

    // Gives cuBLAS `bytes` of caller-owned device memory on device() as its workspace
    // (needed to capture its calls in a CUDA graph); until then it uses its own. The
    // memory must outlive the handle or the next set_workspace.
    Result<void> set_workspace(void* workspace, size_t bytes);

    // c = b · aᵀ on `stream` (a cudaStream_t on device(); nullptr: the default stream),
    // asynchronously, f32 operands rounded to TF32 on the tensor cores, f32 accumulation.
    // TF32 keeps F16's 10-bit precision but f32's range: activations beyond 65504, which
    // some models have before their down projection, stay finite.
    //   a  [m, k] f32 row-major (the weights: m output rows)
    //   b  [n, k] f32 row-major (the activations: n tokens)
    //   c  [n, m] f32 row-major, c[t][r] = sum_i a[r][i] * b[t][i]
    // All three are device pointers. m, n and k must be positive.
    Result<void> gemm_tf32(void* stream, int m, int n, int k, const float* a, const float* b, float* c);

private:
    Result<void> use_stream(void* stream);
    void release() noexcept;

    const CublasApi* api_ = nullptr;  // borrowed from the CublasLibrary
    void* handle_ = nullptr;          // cublasHandle_t
    void* stream_ = nullptr;          // the cudaStream_t the handle is set to
    void* workspace_ = nullptr;       // caller-owned, re-applied after a stream change
    size_t workspace_bytes_ = 0;
    int device_ = -1;
};

// --- NCCL ------------------------------------------------------------------------------

class NcclLibrary {
public:
    ~NcclLibrary();
    NcclLibrary(const NcclLibrary&) = delete;
    NcclLibrary& operator=(const NcclLibrary&) = delete;

    // The file the loader opened, e.g. "/usr/local/cuda/lib64/libnccl.so.2".
    const std::string& file() const { return file_; }
    LibraryVersion version() const { return version_; }
    std::string version_string() const { return format_library_version(version_); }  // "2.28.9"

private:
    friend class NcclComms;
    friend Result<std::unique_ptr<NcclLibrary>> load_nccl(const std::string& explicit_file);
    NcclLibrary(SharedLibrary library, std::string file, LibraryVersion version, std::unique_ptr<NcclApi> api);

    SharedLibrary library_;  // keeps the code behind api_ loaded
    std::string file_;
    LibraryVersion version_;
    std::unique_ptr<NcclApi> api_;
};

// As load_cublas, for NCCL 2 ($POWERHOUSE_NCCL_LIBRARY). Works without a GPU.
Result<std::unique_ptr<NcclLibrary>> load_nccl(const std::string& explicit_file);
Result<std::unique_ptr<NcclLibrary>> load_nccl();

// One communicator per device, all in this process (ncclCommInitAll): rank r is
// devices()[r]. Move-only; destroys the communicators on destruction.
class NcclComms {
public:
    NcclComms() = default;
    ~NcclComms();
    NcclComms(NcclComms&& other) noexcept;
    NcclComms& operator=(NcclComms&& other) noexcept;
    NcclComms(const NcclComms&) = delete;
    NcclComms& operator=(const NcclComms&) = delete;

    // `devices`: distinct CUDA device indices, at least one. (Shards that share a GPU use
    // the same-device communicator, not NCCL.) Blocks until every device has joined.
    static Result<NcclComms> init_all(const NcclLibrary& library, const std::vector<int>& devices);

    int size() const { return static_cast<int>(devices_.size()); }
    const std::vector<int>& devices() const { return devices_; }

    // In place: data [count] f32 on devices()[rank] becomes the sum over all ranks, on
    // `stream` (a cudaStream_t on that device; nullptr: its default stream), asynchronously.
    Result<void> all_reduce_sum_f32(int rank, float* data, size_t count, void* stream);

    // Brackets the collectives of several ranks issued from one thread; errors found while
    // launching them are reported by group_end().
    Result<void> group_start();
    Result<void> group_end();

    // Ends every communicator at once (ncclCommAbort), releasing collectives that wait for a
    // GPU that will never answer; afterwards the object holds none (size() 0).
    void abort() noexcept;

private:
    void release() noexcept;

    const NcclApi* api_ = nullptr;  // borrowed from the NcclLibrary
    std::vector<void*> comms_;      // ncclComm_t per rank
    std::vector<int> devices_;      // CUDA device per rank
};

}  // namespace powerhouse::cuda
