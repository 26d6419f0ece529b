// cuBLAS and NCCL through dlopen/dlsym (platform/shared_library.h). Nothing here is linked
// against either library, so the program starts without them; only the CUDA runtime
// (static) is linked.
//
// The few types and values used are declared below. Where this machine has the libraries'
// headers, they are included and every declaration is checked against them at compile
// time; where it does not (NCCL may come from a Python wheel with no header on the include
// path), the declarations alone are enough to build. Both libraries keep this ABI stable
// across releases (cuBLAS since 11, NCCL 2).
#include "backend/cuda/cuda_libraries.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <library_types.h>

#include <algorithm>
#include <cstdlib>
#include <type_traits>
#include <utility>

#include "backend/cuda/cuda_runtime.h"

#if __has_include(<cublas_v2.h>) && !defined(POWERHOUSE_CUDA_LIBRARIES_WITHOUT_HEADERS)
#include <cublas_v2.h>
#define POWERHOUSE_CHECK_CUBLAS_ABI 1
#endif
#if __has_include(<nccl.h>) && !defined(POWERHOUSE_CUDA_LIBRARIES_WITHOUT_HEADERS)
#include <nccl.h>
#define POWERHOUSE_CHECK_NCCL_ABI 1
#endif

namespace powerhouse::cuda {
namespace abi {

#ifdef POWERHOUSE_CHECK_CUBLAS_ABI
using CublasStatus = cublasStatus_t;
using CublasContext = cublasHandle_t;
using CublasOperation = cublasOperation_t;
using CublasMath = cublasMath_t;
using CublasComputeType = cublasComputeType_t;
using CublasGemmAlgo = cublasGemmAlgo_t;
#else
struct cublasContext;
using CublasStatus = int;  // C enums: passed and returned as int
using CublasContext = cublasContext*;
using CublasOperation = int;
using CublasMath = int;
using CublasComputeType = int;
using CublasGemmAlgo = int;
#endif

#ifdef POWERHOUSE_CHECK_NCCL_ABI
using NcclResult = ncclResult_t;
using NcclComm = ncclComm_t;
using NcclDataType = ncclDataType_t;
using NcclRedOp = ncclRedOp_t;
#else
struct ncclComm;
using NcclResult = int;
using NcclComm = ncclComm*;
using NcclDataType = int;
using NcclRedOp = int;
#endif

template <class T>
constexpr T value(int v) {
    return static_cast<T>(v);
}
constexpr CublasStatus kCublasSuccess = value<CublasStatus>(0);
constexpr CublasStatus kCublasNotInitialized = value<CublasStatus>(1);
constexpr CublasStatus kCublasAllocFailed = value<CublasStatus>(3);
constexpr CublasStatus kCublasInvalidValue = value<CublasStatus>(7);
constexpr CublasStatus kCublasArchMismatch = value<CublasStatus>(8);
constexpr CublasStatus kCublasNotSupported = value<CublasStatus>(15);
constexpr CublasOperation kOpN = value<CublasOperation>(0);
constexpr CublasOperation kOpT = value<CublasOperation>(1);
constexpr CublasMath kDefaultMath = value<CublasMath>(0);
constexpr CublasComputeType kCompute32FFastTf32 = value<CublasComputeType>(77);
constexpr CublasGemmAlgo kGemmDefault = value<CublasGemmAlgo>(-1);

constexpr NcclResult kNcclSuccess = value<NcclResult>(0);
constexpr NcclResult kNcclUnhandledCudaError = value<NcclResult>(1);
constexpr NcclResult kNcclInvalidArgument = value<NcclResult>(4);
constexpr NcclResult kNcclInvalidUsage = value<NcclResult>(5);
constexpr NcclDataType kNcclFloat32 = value<NcclDataType>(7);
constexpr NcclRedOp kNcclSum = value<NcclRedOp>(0);

using CublasCreateFn = CublasStatus (*)(CublasContext*);
using CublasDestroyFn = CublasStatus (*)(CublasContext);
using CublasSetStreamFn = CublasStatus (*)(CublasContext, cudaStream_t);
using CublasSetMathModeFn = CublasStatus (*)(CublasContext, CublasMath);
using CublasSetWorkspaceFn = CublasStatus (*)(CublasContext, void*, size_t);
using CublasGetPropertyFn = CublasStatus (*)(libraryPropertyType, int*);
using CublasStatusTextFn = const char* (*)(CublasStatus);
using CublasGemmExFn = CublasStatus (*)(CublasContext, CublasOperation, CublasOperation, int, int, int, const void*,
                                        const void*, cudaDataType, int, const void*, cudaDataType, int, const void*,
                                        void*, cudaDataType, int, CublasComputeType, CublasGemmAlgo);

using NcclGetVersionFn = NcclResult (*)(int*);
using NcclCommInitAllFn = NcclResult (*)(NcclComm*, int, const int*);
using NcclCommDestroyFn = NcclResult (*)(NcclComm);
using NcclCommAbortFn = NcclResult (*)(NcclComm);
using NcclAllReduceFn = NcclResult (*)(const void*, void*, size_t, NcclDataType, NcclRedOp, NcclComm, cudaStream_t);
using NcclGetErrorStringFn = const char* (*)(NcclResult);
using NcclGetLastErrorFn = const char* (*)(NcclComm);
using NcclGroupFn = NcclResult (*)();

#ifdef POWERHOUSE_CHECK_CUBLAS_ABI
static_assert(kCublasSuccess == CUBLAS_STATUS_SUCCESS && kCublasNotInitialized == CUBLAS_STATUS_NOT_INITIALIZED &&
              kCublasAllocFailed == CUBLAS_STATUS_ALLOC_FAILED && kCublasInvalidValue == CUBLAS_STATUS_INVALID_VALUE &&
              kCublasArchMismatch == CUBLAS_STATUS_ARCH_MISMATCH && kCublasNotSupported == CUBLAS_STATUS_NOT_SUPPORTED);
static_assert(kOpN == CUBLAS_OP_N && kOpT == CUBLAS_OP_T && kDefaultMath == CUBLAS_DEFAULT_MATH &&
              kCompute32FFastTf32 == CUBLAS_COMPUTE_32F_FAST_TF32 && kGemmDefault == CUBLAS_GEMM_DEFAULT);
static_assert(std::is_same_v<CublasCreateFn, decltype(&cublasCreate_v2)>);
static_assert(std::is_same_v<CublasDestroyFn, decltype(&cublasDestroy_v2)>);
static_assert(std::is_same_v<CublasSetStreamFn, decltype(&cublasSetStream_v2)>);
static_assert(std::is_same_v<CublasSetMathModeFn, decltype(&cublasSetMathMode)>);
static_assert(std::is_same_v<CublasSetWorkspaceFn, decltype(&cublasSetWorkspace_v2)>);
static_assert(std::is_same_v<CublasGetPropertyFn, decltype(&cublasGetProperty)>);
static_assert(std::is_same_v<CublasStatusTextFn, decltype(&cublasGetStatusString)>);
static_assert(std::is_same_v<CublasStatusTextFn, decltype(&cublasGetStatusName)>);
// cublasGemmEx is overloaded in C++ (an inline wrapper takes the old cudaDataType compute
// type); the cast picks the library's own function and fails to compile if it changed.
static_assert(std::is_same_v<CublasGemmExFn, decltype(static_cast<CublasGemmExFn>(&cublasGemmEx))>);
#endif
#ifdef POWERHOUSE_CHECK_NCCL_ABI
static_assert(kNcclSuccess == ncclSuccess && kNcclUnhandledCudaError == ncclUnhandledCudaError &&
              kNcclInvalidArgument == ncclInvalidArgument && kNcclInvalidUsage == ncclInvalidUsage);
static_assert(kNcclFloat32 == ncclFloat32 && kNcclSum == ncclSum);
static_assert(std::is_same_v<NcclGetVersionFn, decltype(&ncclGetVersion)>);
static_assert(std::is_same_v<NcclCommInitAllFn, decltype(&ncclCommInitAll)>);
static_assert(std::is_same_v<NcclCommDestroyFn, decltype(&ncclCommDestroy)>);
static_assert(std::is_same_v<NcclCommAbortFn, decltype(&ncclCommAbort)>);
static_assert(std::is_same_v<NcclAllReduceFn, decltype(&ncclAllReduce)>);
static_assert(std::is_same_v<NcclGetErrorStringFn, decltype(&ncclGetErrorString)>);
static_assert(std::is_same_v<NcclGetLastErrorFn, decltype(&ncclGetLastError)>);
static_assert(std::is_same_v<NcclGroupFn, decltype(&ncclGroupStart)>);
static_assert(std::is_same_v<NcclGroupFn, decltype(&ncclGroupEnd)>);
#endif

}  // namespace abi

struct CublasApi {
    abi::CublasCreateFn create = nullptr;
    abi::CublasDestroyFn destroy = nullptr;
    abi::CublasSetStreamFn set_stream = nullptr;
    abi::CublasSetMathModeFn set_math_mode = nullptr;
    abi::CublasGemmExFn gemm_ex = nullptr;
    abi::CublasGetPropertyFn get_property = nullptr;
    abi::CublasStatusTextFn status_string = nullptr;    // optional
    abi::CublasStatusTextFn status_name = nullptr;      // optional
    abi::CublasSetWorkspaceFn set_workspace = nullptr;  // optional
};

struct NcclApi {
    abi::NcclGetVersionFn get_version = nullptr;
    abi::NcclCommInitAllFn comm_init_all = nullptr;
    abi::NcclCommDestroyFn comm_destroy = nullptr;
    abi::NcclCommAbortFn comm_abort = nullptr;  // optional: without it, abort() only lets go
    abi::NcclAllReduceFn all_reduce = nullptr;
    abi::NcclGetErrorStringFn error_string = nullptr;
    abi::NcclGroupFn group_start = nullptr;
    abi::NcclGroupFn group_end = nullptr;
    abi::NcclGetLastErrorFn last_error = nullptr;  // optional (NCCL 2.13+)
};

namespace {

// RTLD_NODELETE: closing the handle never unmaps the code. Both libraries start threads and
// register exit handlers of their own; unmapping them under those is a crash at exit.
constexpr int kOpenFlags = RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE;

struct LibrarySpec {
    const char* name;      // "cuBLAS"
    const char* variable;  // "POWERHOUSE_CUBLAS_LIBRARY"
    std::vector<std::string> sonames;
    const char* without;  // what the user loses
    const char* install;  // what to install
};

struct OpenedLibrary {
    SharedLibrary library;
    std::string file;  // the path the loader resolved the name to, for the version report
};

Error not_loadable(const LibrarySpec& spec, const std::string& what, const std::string& loader_message,
                   const std::string& advice) {
    return make_error(ErrorCode::unsupported, std::string(spec.name) + " " + what + " (" + loader_message +
                                                  "): " + spec.without + "; " + advice);
}

Result<OpenedLibrary> open_library(const LibrarySpec& spec, const std::string& explicit_file) {
    if (!explicit_file.empty()) {
        auto library = SharedLibrary::open(explicit_file, kOpenFlags);
        if (!library) {
            return not_loadable(spec, "could not be loaded from " + explicit_file, library.error().message,
                                std::string("point ") + spec.variable + " at " + spec.install +
                                    " or unset it to search the usual places");
        }
        std::string file = library->loaded_path();
        return OpenedLibrary{std::move(library).value(), std::move(file)};
    }
    std::vector<std::string> candidates = spec.sonames;
    for (const std::string& soname : spec.sonames) candidates.push_back("/usr/local/cuda/lib64/" + soname);
    std::string first_error;
    std::string found_error;
    for (const std::string& candidate : candidates) {
        auto library = SharedLibrary::open(candidate, kOpenFlags);
        if (library) {
            std::string file = library->loaded_path();
            return OpenedLibrary{std::move(library).value(), std::move(file)};
        }
        std::string error = std::move(library).error().message;
        // "<candidate>: cannot open shared object file" means it is not there. Anything else
        // (a dependency such as libcublasLt missing, a wrong architecture) is a file that was
        // found but failed, which says more than the first "not found".
        if (found_error.empty() && error.rfind(candidate + ": cannot open shared object file", 0) != 0) {
            found_error = error;
        }
        if (first_error.empty()) first_error = std::move(error);
    }
    const std::string advice = std::string("install ") + spec.install + " or set " + spec.variable + " to its file";
    if (!found_error.empty()) return not_loadable(spec, "could not be loaded", found_error, advice);
    return not_loadable(spec, "not found", first_error, advice);
}

// Looks `symbol` up into `target`; false (and a message in `missing`) when it is absent.
template <class F>
bool require_symbol(const SharedLibrary& library, const char* symbol, F& target, std::string& missing) {
    target = library.symbol<F>(symbol);
    if (target == nullptr && missing.empty()) missing = symbol;
    return target != nullptr;
}

Error not_the_library(const char* name, const std::string& file, const std::string& missing) {
    return make_error(ErrorCode::unsupported, file + " is not a usable " + name + ": it lacks " + missing);
}

// "<what>: the resource allocation failed (CUBLAS_STATUS_ALLOC_FAILED)".
Error cublas_error(const CublasApi& api, abi::CublasStatus status, const std::string& what) {
    const char* text = api.status_string != nullptr ? api.status_string(status) : nullptr;
    const char* name = api.status_name != nullptr ? api.status_name(status) : nullptr;
    std::string message =
        what + ": " + (text != nullptr ? text : "cuBLAS status " + std::to_string(static_cast<int>(status)));
    if (name != nullptr) message += std::string(" (") + name + ")";
    ErrorCode code = ErrorCode::internal;
    if (status == abi::kCublasAllocFailed) code = ErrorCode::out_of_memory;
    if (status == abi::kCublasInvalidValue) code = ErrorCode::invalid_argument;
    if (status == abi::kCublasArchMismatch || status == abi::kCublasNotSupported) code = ErrorCode::unsupported;
    if (status == abi::kCublasNotInitialized) code = ErrorCode::device_failed;
    return make_error(code, std::move(message));
}

// "<what>: invalid usage (NCCL error 5): <NCCL's last message>".
Error nccl_error(const NcclApi& api, abi::NcclResult result, abi::NcclComm comm, const std::string& what) {
    const char* text = api.error_string(result);
    std::string message = what + ": " + (text != nullptr ? text : "NCCL error") + " (NCCL error " +
                          std::to_string(static_cast<int>(result)) + ")";
    if (api.last_error != nullptr) {
        const char* last = api.last_error(comm);
        if (last != nullptr && *last != '\0') message += std::string(": ") + last;
    }
    ErrorCode code = ErrorCode::device_failed;
    if (result == abi::kNcclInvalidArgument || result == abi::kNcclInvalidUsage) code = ErrorCode::invalid_argument;
    return make_error(code, std::move(message));
}

// A failure to start on a GPU reads best as the reason there is no usable GPU, when that
// is the cause ("no NVIDIA driver found ..."), rather than as the library's status.
Error prefer_no_gpu_reason(Error error, const std::string& what) {
    if (auto available = cuda_available(); !available) {
        return make_error(ErrorCode::unsupported, what + ": " + available.error().message);
    }
    return error;
}

std::string environment_file(const char* variable) {
    const char* value = std::getenv(variable);
    return value != nullptr ? value : "";
}

const LibrarySpec kCublasSpec{"cuBLAS",
                              kCublasLibraryVariable,
                              {"libcublas.so.13", "libcublas.so"},
                              "prompts are processed by Powerhouse's own, slower kernels",
                              "the CUDA 13 cuBLAS library (libcublas.so.13)"};
const LibrarySpec kNcclSpec{"NCCL",
                            kNcclLibraryVariable,
                            {"libnccl.so.2"},
                            "a tensor split across several GPUs then sums through one GPU, more slowly",
                            "NCCL 2 (libnccl.so.2)"};

}  // namespace

std::string format_library_version(const LibraryVersion& version) {
    return std::to_string(version.major) + "." + std::to_string(version.minor) + "." + std::to_string(version.patch);
}

// --- cuBLAS ----------------------------------------------------------------------------

CublasLibrary::CublasLibrary(SharedLibrary library, std::string file, LibraryVersion version,
                             std::unique_ptr<CublasApi> api)
    : library_(std::move(library)), file_(std::move(file)), version_(version), api_(std::move(api)) {}

// Out of line: CublasApi is complete only here. The SharedLibrary closes the library.
CublasLibrary::~CublasLibrary() = default;

Result<std::unique_ptr<CublasLibrary>> load_cublas(const std::string& explicit_file) {
    auto opened = open_library(kCublasSpec, explicit_file);
    if (!opened) return std::move(opened).error();
    const SharedLibrary& library = opened->library;
    const std::string& file = opened->file;
    auto api = std::make_unique<CublasApi>();
    std::string missing;
    require_symbol(library, "cublasCreate_v2", api->create, missing);
    require_symbol(library, "cublasDestroy_v2", api->destroy, missing);
    require_symbol(library, "cublasSetStream_v2", api->set_stream, missing);
    require_symbol(library, "cublasSetMathMode", api->set_math_mode, missing);
    require_symbol(library, "cublasGemmEx", api->gemm_ex, missing);
    require_symbol(library, "cublasGetProperty", api->get_property, missing);
    if (!missing.empty()) return not_the_library("cuBLAS", file, missing);
    api->status_string = library.symbol<abi::CublasStatusTextFn>("cublasGetStatusString");
    api->status_name = library.symbol<abi::CublasStatusTextFn>("cublasGetStatusName");
    api->set_workspace = library.symbol<abi::CublasSetWorkspaceFn>("cublasSetWorkspace_v2");

    // Needs no handle (and so no GPU), unlike cublasGetVersion.
    LibraryVersion version;
    const std::pair<libraryPropertyType, int*> properties[] = {
        {MAJOR_VERSION, &version.major}, {MINOR_VERSION, &version.minor}, {PATCH_LEVEL, &version.patch}};
    for (const auto& [property, out] : properties) {
        if (const abi::CublasStatus status = api->get_property(property, out); status != abi::kCublasSuccess) {
            return cublas_error(*api, status, "reading the version of " + file);
        }
    }
    // cublasGemmEx's cublasComputeType_t argument dates from cuBLAS 11.
    if (version.major < 11) {
        return make_error(ErrorCode::unsupported, file + " is cuBLAS " + format_library_version(version) +
                                                      "; Powerhouse needs cuBLAS 11 or later (CUDA 13's is "
                                                      "libcublas.so.13)");
    }
    return std::unique_ptr<CublasLibrary>(
        new CublasLibrary(std::move(opened->library), std::move(opened->file), version, std::move(api)));
}

Result<std::unique_ptr<CublasLibrary>> load_cublas() {
    return load_cublas(environment_file(kCublasLibraryVariable));
}

CublasHandle::~CublasHandle() {
    release();
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : api_(std::exchange(other.api_, nullptr)),
      handle_(std::exchange(other.handle_, nullptr)),
      stream_(std::exchange(other.stream_, nullptr)),
      workspace_(std::exchange(other.workspace_, nullptr)),
      workspace_bytes_(std::exchange(other.workspace_bytes_, 0)),
      device_(std::exchange(other.device_, -1)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
    if (this != &other) {
        release();
        api_ = std::exchange(other.api_, nullptr);
        handle_ = std::exchange(other.handle_, nullptr);
        stream_ = std::exchange(other.stream_, nullptr);
        workspace_ = std::exchange(other.workspace_, nullptr);
        workspace_bytes_ = std::exchange(other.workspace_bytes_, 0);
        device_ = std::exchange(other.device_, -1);
    }
    return *this;
}

void CublasHandle::release() noexcept {
    if (handle_ == nullptr) return;
    DeviceScope scope;
    if (scope.select(device_)) api_->destroy(static_cast<abi::CublasContext>(handle_));
    handle_ = nullptr;
    stream_ = nullptr;
    workspace_ = nullptr;
    workspace_bytes_ = 0;
}

Result<CublasHandle> CublasHandle::create(const CublasLibrary& library) {
    const CublasApi& api = *library.api_;
    int device = 0;
    if (const cudaError_t status = cudaGetDevice(&device); status != cudaSuccess) {
        return prefer_no_gpu_reason(cuda_error(status, "creating a cuBLAS handle"), "creating a cuBLAS handle");
    }
    const std::string what = "creating a cuBLAS handle on GPU " + std::to_string(device);
    abi::CublasContext raw = nullptr;
    if (const abi::CublasStatus status = api.create(&raw); status != abi::kCublasSuccess) {
        return prefer_no_gpu_reason(cublas_error(api, status, what), what);
    }
    CublasHandle handle;
    handle.api_ = &api;
    handle.handle_ = raw;
    handle.device_ = device;
    // The compute type of each GEMM asks for TF32 tensor cores with F32 accumulation; default
    // math is set explicitly so that a change of cuBLAS's default cannot alter it.
    if (const abi::CublasStatus status = api.set_math_mode(raw, abi::kDefaultMath); status != abi::kCublasSuccess) {
        return cublas_error(api, status, what + " (setting its math mode)");
    }
    return Result<CublasHandle>(std::move(handle));
}

Result<void> CublasHandle::set_workspace(void* workspace, size_t bytes) {
    if (handle_ == nullptr) return make_error(ErrorCode::invalid_argument, "set_workspace on an empty cuBLAS handle");
    if (api_->set_workspace == nullptr) {
        return make_error(ErrorCode::unsupported, "this cuBLAS has no cublasSetWorkspace_v2 (it is older than 11)");
    }
    const abi::CublasStatus status = api_->set_workspace(static_cast<abi::CublasContext>(handle_), workspace, bytes);
    if (status != abi::kCublasSuccess) {
        return cublas_error(*api_, status, "giving cuBLAS a workspace of " + std::to_string(bytes) + " bytes");
    }
    workspace_ = workspace;
    workspace_bytes_ = bytes;
    return {};
}

Result<void> CublasHandle::use_stream(void* stream) {
    if (stream == stream_) return {};
    const auto handle = static_cast<abi::CublasContext>(handle_);
    if (const abi::CublasStatus status = api_->set_stream(handle, static_cast<cudaStream_t>(stream));
        status != abi::kCublasSuccess) {
        return cublas_error(*api_, status, "setting the stream of a cuBLAS handle");
    }
    stream_ = stream;
    // cublasSetStream puts the handle back on cuBLAS's own workspace.
    if (workspace_ != nullptr) {
        if (const abi::CublasStatus status = api_->set_workspace(handle, workspace_, workspace_bytes_);
            status != abi::kCublasSuccess) {
            return cublas_error(*api_, status, "giving cuBLAS its workspace again after a stream change");
        }
    }
    return {};
}

Result<void> CublasHandle::gemm_tf32(void* stream, int m, int n, int k, const float* a, const float* b, float* c) {
    if (handle_ == nullptr) return make_error(ErrorCode::invalid_argument, "GEMM on an empty cuBLAS handle");
    if (m <= 0 || n <= 0 || k <= 0) {
        return make_error(ErrorCode::invalid_argument, "GEMM of " + std::to_string(m) + " x " + std::to_string(n) +
                                                           " x " + std::to_string(k) + ": sizes must be positive");
    }
    if (a == nullptr || b == nullptr || c == nullptr) {
        return make_error(ErrorCode::invalid_argument, "GEMM with a null matrix");
    }
    DeviceScope scope;
    PH_TRY(scope.select(device_));
    PH_TRY(use_stream(stream));
    // cuBLAS reads matrices column-major, and a row-major [rows][cols] array is, byte for
    // byte, the column-major [cols x rows] matrix: its transpose. So
    //   a  row-major [m][k] is column-major aᵀ (k x m, leading dimension k); op T makes it a (m x k);
    //   b  row-major [n][k] is column-major bᵀ (k x n, leading dimension k); op N keeps it;
    //   a · bᵀ is m x n, written column-major with leading dimension m, which is row-major
    //   [n][m]: c[t][r] = sum_i a[r][i] * b[t][i], one row of m outputs per token.
    const float alpha = 1.0f;
    const float beta = 0.0f;
    const abi::CublasStatus status =
        api_->gemm_ex(static_cast<abi::CublasContext>(handle_), abi::kOpT, abi::kOpN, m, n, k, &alpha, a, CUDA_R_32F, k,
                      b, CUDA_R_32F, k, &beta, c, CUDA_R_32F, m, abi::kCompute32FFastTf32, abi::kGemmDefault);
    if (status != abi::kCublasSuccess) {
        return cublas_error(*api_, status,
                            "cublasGemmEx (" + std::to_string(m) + " x " + std::to_string(n) + " x " +
                                std::to_string(k) + ", TF32) on GPU " + std::to_string(device_));
    }
    return {};
}

// --- NCCL ------------------------------------------------------------------------------

NcclLibrary::NcclLibrary(SharedLibrary library, std::string file, LibraryVersion version, std::unique_ptr<NcclApi> api)
    : library_(std::move(library)), file_(std::move(file)), version_(version), api_(std::move(api)) {}

// Out of line: NcclApi is complete only here. The SharedLibrary closes the library.
NcclLibrary::~NcclLibrary() = default;

Result<std::unique_ptr<NcclLibrary>> load_nccl(const std::string& explicit_file) {
    auto opened = open_library(kNcclSpec, explicit_file);
    if (!opened) return std::move(opened).error();
    const SharedLibrary& library = opened->library;
    const std::string& file = opened->file;
    auto api = std::make_unique<NcclApi>();
    std::string missing;
    require_symbol(library, "ncclGetVersion", api->get_version, missing);
    require_symbol(library, "ncclCommInitAll", api->comm_init_all, missing);
    require_symbol(library, "ncclCommDestroy", api->comm_destroy, missing);
    require_symbol(library, "ncclAllReduce", api->all_reduce, missing);
    require_symbol(library, "ncclGetErrorString", api->error_string, missing);
    require_symbol(library, "ncclGroupStart", api->group_start, missing);
    require_symbol(library, "ncclGroupEnd", api->group_end, missing);
    if (!missing.empty()) return not_the_library("NCCL", file, missing);
    api->last_error = library.symbol<abi::NcclGetLastErrorFn>("ncclGetLastError");
    api->comm_abort = library.symbol<abi::NcclCommAbortFn>("ncclCommAbort");

    int code = 0;
    if (const abi::NcclResult result = api->get_version(&code); result != abi::kNcclSuccess) {
        return nccl_error(*api, result, nullptr, "reading the version of " + file);
    }
    // NCCL_VERSION: major*1000 + minor*100 + patch up to 2.8, major*10000 + minor*100 + patch since 2.9.
    LibraryVersion version;
    const int major_unit = code >= 10000 ? 10000 : 1000;
    version.major = code / major_unit;
    version.minor = code % major_unit / 100;
    version.patch = code % 100;
    if (version.major != 2) {
        return make_error(ErrorCode::unsupported, file + " is NCCL " + format_library_version(version) +
                                                      "; Powerhouse needs NCCL 2 (libnccl.so.2)");
    }
    return std::unique_ptr<NcclLibrary>(
        new NcclLibrary(std::move(opened->library), std::move(opened->file), version, std::move(api)));
}

Result<std::unique_ptr<NcclLibrary>> load_nccl() {
    return load_nccl(environment_file(kNcclLibraryVariable));
}

NcclComms::~NcclComms() {
    release();
}

NcclComms::NcclComms(NcclComms&& other) noexcept
    : api_(std::exchange(other.api_, nullptr)),
      comms_(std::exchange(other.comms_, {})),
      devices_(std::exchange(other.devices_, {})) {}

NcclComms& NcclComms::operator=(NcclComms&& other) noexcept {
    if (this != &other) {
        release();
        api_ = std::exchange(other.api_, nullptr);
        comms_ = std::exchange(other.comms_, {});
        devices_ = std::exchange(other.devices_, {});
    }
    return *this;
}

void NcclComms::abort() noexcept {
    if (comms_.empty()) return;
    const DeviceScope scope;
    for (void* comm : comms_) {
        if (comm != nullptr && api_->comm_abort != nullptr) api_->comm_abort(static_cast<abi::NcclComm>(comm));
    }
    comms_.clear();  // aborted communicators are not destroyed again
    devices_.clear();
}

void NcclComms::release() noexcept {
    if (comms_.empty()) return;
    const DeviceScope scope;
    // One after another from one thread, as NCCL's single-thread example does: destroying
    // a member of an in-process clique does not wait for the others.
    for (void* comm : comms_) {
        if (comm != nullptr) api_->comm_destroy(static_cast<abi::NcclComm>(comm));
    }
    comms_.clear();
    devices_.clear();
}

Result<NcclComms> NcclComms::init_all(const NcclLibrary& library, const std::vector<int>& devices) {
    if (devices.empty()) return make_error(ErrorCode::invalid_argument, "NCCL needs at least one GPU");
    std::vector<int> sorted = devices;
    std::sort(sorted.begin(), sorted.end());
    if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end()) {
        return make_error(ErrorCode::invalid_argument,
                          "NCCL needs distinct GPUs but GPU " + std::to_string(*twice) +
                              " is listed twice (shards that share a GPU use the same-device communicator)");
    }
    std::string what = "starting NCCL on GPU";
    for (size_t i = 0; i < devices.size(); ++i) what += (i == 0 ? " " : ", ") + std::to_string(devices[i]);
    const NcclApi& api = *library.api_;
    std::vector<abi::NcclComm> comms(devices.size(), nullptr);
    abi::NcclResult result = abi::kNcclSuccess;
    {
        const DeviceScope scope;  // ncclCommInitAll selects each device in turn
        result = api.comm_init_all(comms.data(), static_cast<int>(devices.size()), devices.data());
    }
    if (result != abi::kNcclSuccess) {
        Error error = nccl_error(api, result, nullptr, what);
        return result == abi::kNcclUnhandledCudaError ? prefer_no_gpu_reason(std::move(error), what) : error;
    }
    NcclComms out;
    out.api_ = &api;
    out.comms_.assign(comms.begin(), comms.end());
    out.devices_ = devices;
    return Result<NcclComms>(std::move(out));
}

Result<void> NcclComms::all_reduce_sum_f32(int rank, float* data, size_t count, void* stream) {
    if (rank < 0 || rank >= size()) {
        return make_error(ErrorCode::invalid_argument, "NCCL rank " + std::to_string(rank) +
                                                           " does not exist (ranks: " + std::to_string(size()) + ")");
    }
    if (count == 0) return {};
    if (data == nullptr) return make_error(ErrorCode::invalid_argument, "NCCL all-reduce of a null buffer");
    const int device = devices_[static_cast<size_t>(rank)];
    // A null stream means the default stream of the device current at the call.
    DeviceScope scope;
    PH_TRY(scope.select(device));
    const auto comm = static_cast<abi::NcclComm>(comms_[static_cast<size_t>(rank)]);
    const abi::NcclResult result =
        api_->all_reduce(data, data, count, abi::kNcclFloat32, abi::kNcclSum, comm, static_cast<cudaStream_t>(stream));
    if (result != abi::kNcclSuccess) {
        return nccl_error(*api_, result, comm,
                          "NCCL all-reduce of " + std::to_string(count) + " floats on GPU " + std::to_string(device));
    }
    return {};
}

Result<void> NcclComms::group_start() {
    if (api_ == nullptr) return make_error(ErrorCode::invalid_argument, "ncclGroupStart without communicators");
    if (const abi::NcclResult result = api_->group_start(); result != abi::kNcclSuccess) {
        return nccl_error(*api_, result, nullptr, "ncclGroupStart");
    }
    return {};
}

Result<void> NcclComms::group_end() {
    if (api_ == nullptr) return make_error(ErrorCode::invalid_argument, "ncclGroupEnd without communicators");
    if (const abi::NcclResult result = api_->group_end(); result != abi::kNcclSuccess) {
        return nccl_error(*api_, result, nullptr, "NCCL collectives (ncclGroupEnd)");
    }
    return {};
}

}  // namespace powerhouse::cuda
