// cuBLAS and NCCL loaded at run time (backend/cuda/cuda_libraries.h). Everywhere: a
// library named by its environment variable that cannot be loaded is an error naming the
// file, never a crash; a file that is not the library is refused by the function it lacks;
// NCCL and cuBLAS load from /usr/local/cuda/lib64 where the toolkit is installed (skipped,
// saying so, where it is not); without a GPU, a cuBLAS handle is an error value. With a GPU
// (GpuTest: skipped without one, failed where POWERHOUSE_REQUIRE_GPU is set): a small
// F16 GEMM against a CPU loop, and NCCL all-reduces.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/cuda/cuda_libraries.h"
#include "backend/cuda/cuda_runtime.h"
#include "kernels/gpu_test.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using cuda::CublasHandle;
using cuda::NcclComms;

const std::string kCudaLib64 = "/usr/local/cuda/lib64/";

// Sets an environment variable for one scope, restoring the previous value after.
class ScopedEnvironment {
public:
    ScopedEnvironment(const char* name, const std::string& value) : name_(name) {
        if (const char* old = std::getenv(name)) {
            previous_ = old;
            had_ = true;
        }
        setenv(name, value.c_str(), 1);
    }
    ~ScopedEnvironment() {
        if (had_) {
            setenv(name_, previous_.c_str(), 1);
        } else {
            unsetenv(name_);
        }
    }
    ScopedEnvironment(const ScopedEnvironment&) = delete;
    ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

private:
    const char* name_;
    std::string previous_;
    bool had_ = false;
};

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// --- loading, everywhere ---------------------------------------------------------------

TEST(CudaLibraries, MissingFileNamedByTheVariableIsAnErrorNamingIt) {
    const std::string missing = "/nonexistent/powerhouse/libcublas.so.13";
    {
        const ScopedEnvironment env(cuda::kCublasLibraryVariable, missing);
        auto cublas = cuda::load_cublas();
        ASSERT_FALSE(cublas.ok());
        EXPECT_EQ(cublas.error().code, ErrorCode::unsupported);
        EXPECT_TRUE(contains(cublas.error().message, missing)) << cublas.error().message;
        EXPECT_TRUE(contains(cublas.error().message, "POWERHOUSE_CUBLAS_LIBRARY")) << cublas.error().message;
    }
    {
        const std::string nccl_missing = "/nonexistent/powerhouse/libnccl.so.2";
        const ScopedEnvironment env(cuda::kNcclLibraryVariable, nccl_missing);
        auto nccl = cuda::load_nccl();
        ASSERT_FALSE(nccl.ok());
        EXPECT_TRUE(contains(nccl.error().message, nccl_missing)) << nccl.error().message;
    }
}

TEST(CudaLibraries, AFileThatIsNotALibraryIsAnError) {
    test::TempDir dir;
    const auto file = dir / "libcublas.so.13";
    test::write_file(file, "not an ELF file");
    auto cublas = cuda::load_cublas(file.string());
    ASSERT_FALSE(cublas.ok());
    EXPECT_TRUE(contains(cublas.error().message, file.string())) << cublas.error().message;
}

TEST(CudaLibraries, ALibraryWithoutTheFunctionsIsRefusedByName) {
    // libm loads everywhere and has neither library's functions.
    auto cublas = cuda::load_cublas("libm.so.6");
    ASSERT_FALSE(cublas.ok());
    EXPECT_TRUE(contains(cublas.error().message, "lacks cublasCreate_v2")) << cublas.error().message;
    auto nccl = cuda::load_nccl("libm.so.6");
    ASSERT_FALSE(nccl.ok());
    EXPECT_TRUE(contains(nccl.error().message, "lacks ncclGetVersion")) << nccl.error().message;
}

TEST(CudaLibraries, NcclLoadsFromTheToolkit) {
    const std::string file = kCudaLib64 + "libnccl.so.2";
    if (!std::filesystem::exists(file)) GTEST_SKIP() << file << " is not installed here";
    auto nccl = cuda::load_nccl(file);
    ASSERT_TRUE(nccl.ok()) << nccl.error().message;
    EXPECT_EQ((*nccl)->version().major, 2);
    EXPECT_GE((*nccl)->version().minor, 1);
    EXPECT_EQ((*nccl)->version_string().rfind("2.", 0), 0u) << (*nccl)->version_string();
    EXPECT_TRUE(contains((*nccl)->file(), "libnccl.so.2")) << (*nccl)->file();
    // The search (sonames, then /usr/local/cuda/lib64) finds it too.
    const ScopedEnvironment env(cuda::kNcclLibraryVariable, "");
    auto searched = cuda::load_nccl();
    ASSERT_TRUE(searched.ok()) << searched.error().message;
    EXPECT_EQ((*searched)->version().major, 2);
}

TEST(CudaLibraries, CublasLoadsFromTheToolkit) {
    const std::string file = kCudaLib64 + "libcublas.so.13";
    if (!std::filesystem::exists(file)) GTEST_SKIP() << file << " is not installed here";
    auto cublas = cuda::load_cublas(file);
    ASSERT_TRUE(cublas.ok()) << cublas.error().message;
    EXPECT_EQ((*cublas)->version().major, 13);
    EXPECT_EQ((*cublas)->version_string().rfind("13.", 0), 0u) << (*cublas)->version_string();
    EXPECT_TRUE(contains((*cublas)->file(), "libcublas.so.13")) << (*cublas)->file();
    const ScopedEnvironment env(cuda::kCublasLibraryVariable, "");
    auto searched = cuda::load_cublas();
    ASSERT_TRUE(searched.ok()) << searched.error().message;
}

TEST(CudaLibraries, CublasHandleWithoutAGpuIsAnErrorValue) {
    if (cuda::cuda_available()) GTEST_SKIP() << "a GPU is present: CublasGpu covers the handle";
    auto cublas = cuda::load_cublas();
    if (!cublas) GTEST_SKIP() << cublas.error().message;
    auto handle = CublasHandle::create(**cublas);
    ASSERT_FALSE(handle.ok());
    EXPECT_TRUE(contains(handle.error().message, "cuBLAS handle")) << handle.error().message;
}

TEST(CudaLibraries, NcclWithoutAGpuIsAnErrorValue) {
    if (cuda::cuda_available()) GTEST_SKIP() << "a GPU is present: NcclGpu covers the communicators";
    auto nccl = cuda::load_nccl();
    if (!nccl) GTEST_SKIP() << nccl.error().message;
    auto comms = NcclComms::init_all(**nccl, {0});
    ASSERT_FALSE(comms.ok());
    EXPECT_TRUE(contains(comms.error().message, "starting NCCL on GPU 0")) << comms.error().message;
}

TEST(CudaLibraries, BadArgumentsAreRefusedBeforeAnyCall) {
    auto nccl = cuda::load_nccl();
    if (!nccl) GTEST_SKIP() << nccl.error().message;
    EXPECT_EQ(NcclComms::init_all(**nccl, {}).error().code, ErrorCode::invalid_argument);
    auto twice = NcclComms::init_all(**nccl, {0, 1, 0});
    ASSERT_FALSE(twice.ok());
    EXPECT_TRUE(contains(twice.error().message, "GPU 0 is listed twice")) << twice.error().message;
    CublasHandle empty;
    EXPECT_EQ(empty.gemm_tf32(nullptr, 1, 1, 1, nullptr, nullptr, nullptr).error().code,
              ErrorCode::invalid_argument);
}

// --- on a GPU --------------------------------------------------------------------------

// A library the GPU tests need: loaded, or the test skips (fails where a GPU is required:
// there, a missing library is a broken setup, not a reason to pass).
#define SKIP_WITHOUT_LIBRARY(library)                                                               \
    do {                                                                                            \
        if (!(library).ok()) {                                                                      \
            if (test::gpu_required()) FAIL() << "GPU required, but: " << (library).error().message; \
            GTEST_SKIP() << (library).error().message;                                              \
        }                                                                                           \
    } while (0)

class CublasGpu : public test::GpuTest {};

// Values k/4 with |k| <= 4: exact in TF32, and every product and sum below is exact in
// F32, so cuBLAS (in any summation order, on tensor cores or not) must match the CPU loop
// exactly.
std::vector<float> small_values(size_t count, int seed) {
    std::vector<float> out(count);
    for (size_t i = 0; i < count; ++i) {
        out[i] = static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(seed) * 3) % 9) - 4) / 4;
    }
    return out;
}

void expect_gemm_matches_cpu(CublasHandle& handle, int m, int n, int k, cudaStream_t stream = nullptr) {
    SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
    const auto mm = static_cast<size_t>(m);
    const auto nn = static_cast<size_t>(n);
    const auto kk = static_cast<size_t>(k);
    const std::vector<float> a = small_values(mm * kk, 1);  // [m, k]
    const std::vector<float> b = small_values(nn * kk, 2);  // [n, k]
    std::vector<float> expected(nn * mm);                   // [n, m]
    for (size_t t = 0; t < nn; ++t) {
        for (size_t r = 0; r < mm; ++r) {
            float sum = 0.0f;
            for (size_t i = 0; i < kk; ++i) sum += a[r * kk + i] * b[t * kk + i];
            expected[t * mm + r] = sum;
        }
    }
    auto a_dev = cuda::DeviceBuffer::allocate(a.size() * sizeof(float));
    auto b_dev = cuda::DeviceBuffer::allocate(b.size() * sizeof(float));
    auto c_dev = cuda::DeviceBuffer::allocate(expected.size() * sizeof(float));
    ASSERT_TRUE(a_dev.ok() && b_dev.ok() && c_dev.ok());
    ASSERT_TRUE(a_dev->upload(a.data(), a.size() * sizeof(float)).ok());
    ASSERT_TRUE(b_dev->upload(b.data(), b.size() * sizeof(float)).ok());
    auto gemm = handle.gemm_tf32(stream, m, n, k, static_cast<const float*>(a_dev->data()),
                                 static_cast<const float*>(b_dev->data()), static_cast<float*>(c_dev->data()));
    ASSERT_TRUE(gemm.ok()) << gemm.error().message;
    ASSERT_TRUE(cuda::cuda_synchronize().ok());  // every stream of the device
    std::vector<float> got(expected.size());
    ASSERT_TRUE(c_dev->download(got.data(), got.size() * sizeof(float)).ok());
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], expected[i]) << "at token " << i / mm << ", row " << i % mm;
    }
}

TEST_F(CublasGpu, GemmMatchesTheCpu) {
    auto cublas = cuda::load_cublas();
    SKIP_WITHOUT_LIBRARY(cublas);
    auto handle = CublasHandle::create(**cublas);
    ASSERT_TRUE(handle.ok()) << handle.error().message;
    expect_gemm_matches_cpu(*handle, 3, 5, 7);
    expect_gemm_matches_cpu(*handle, 64, 48, 128);  // big enough for the tensor-core path
}

TEST_F(CublasGpu, GemmOnAStreamAndAfterAMove) {
    auto cublas = cuda::load_cublas();
    SKIP_WITHOUT_LIBRARY(cublas);
    auto created = CublasHandle::create(**cublas);
    ASSERT_TRUE(created.ok()) << created.error().message;
    CublasHandle handle = std::move(created).value();
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    expect_gemm_matches_cpu(handle, 17, 9, 33, stream);
    expect_gemm_matches_cpu(handle, 5, 3, 9);  // back on the default stream
    expect_gemm_matches_cpu(handle, 8, 16, 64, stream);
    EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

class NcclGpu : public test::GpuTest {};

TEST_F(NcclGpu, AllReduceOnOneGpuKeepsTheData) {
    auto nccl = cuda::load_nccl();
    SKIP_WITHOUT_LIBRARY(nccl);
    auto comms = NcclComms::init_all(**nccl, {0});
    ASSERT_TRUE(comms.ok()) << comms.error().message;
    EXPECT_EQ(comms->size(), 1);
    std::vector<float> data(1000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) - 500.0f;
    auto buffer = cuda::DeviceBuffer::allocate(data.size() * sizeof(float));
    ASSERT_TRUE(buffer.ok());
    ASSERT_TRUE(buffer->upload(data.data(), data.size() * sizeof(float)).ok());
    auto reduced = comms->all_reduce_sum_f32(0, static_cast<float*>(buffer->data()), data.size(), nullptr);
    ASSERT_TRUE(reduced.ok()) << reduced.error().message;
    ASSERT_TRUE(cuda::cuda_synchronize().ok());
    std::vector<float> got(data.size());
    ASSERT_TRUE(buffer->download(got.data(), got.size() * sizeof(float)).ok());
    EXPECT_EQ(got, data);
    EXPECT_EQ(comms->all_reduce_sum_f32(1, static_cast<float*>(buffer->data()), 1, nullptr).error().code,
              ErrorCode::invalid_argument);
}

TEST_F(NcclGpu, AllReduceAcrossEveryGpuSums) {
    auto count = cuda::cuda_device_count();
    ASSERT_TRUE(count.ok());
    if (*count < 2) GTEST_SKIP() << "one GPU: an all-reduce across GPUs needs two";
    auto nccl = cuda::load_nccl();
    SKIP_WITHOUT_LIBRARY(nccl);
    std::vector<int> devices;
    for (int d = 0; d < *count; ++d) devices.push_back(d);
    auto comms = NcclComms::init_all(**nccl, devices);
    ASSERT_TRUE(comms.ok()) << comms.error().message;
    const size_t n = 4096;
    std::vector<cuda::DeviceBuffer> buffers;
    for (int d : devices) {
        ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
        std::vector<float> data(n, static_cast<float>(d + 1));
        auto buffer = cuda::DeviceBuffer::allocate(n * sizeof(float));
        ASSERT_TRUE(buffer.ok());
        ASSERT_TRUE(buffer->upload(data.data(), n * sizeof(float)).ok());
        buffers.push_back(std::move(buffer).value());
    }
    ASSERT_TRUE(comms->group_start().ok());
    for (size_t r = 0; r < devices.size(); ++r) {
        auto reduced =
            comms->all_reduce_sum_f32(static_cast<int>(r), static_cast<float*>(buffers[r].data()), n, nullptr);
        ASSERT_TRUE(reduced.ok()) << reduced.error().message;
    }
    auto ended = comms->group_end();
    ASSERT_TRUE(ended.ok()) << ended.error().message;
    const float expected = static_cast<float>(*count * (*count + 1) / 2);
    for (size_t r = 0; r < devices.size(); ++r) {
        std::vector<float> got(n);
        ASSERT_EQ(cudaSetDevice(devices[r]), cudaSuccess);
        ASSERT_TRUE(cuda::cuda_synchronize().ok());
        ASSERT_TRUE(buffers[r].download(got.data(), n * sizeof(float)).ok());
        EXPECT_EQ(got, std::vector<float>(n, expected)) << "GPU " << devices[r];
    }
    EXPECT_EQ(cudaSetDevice(0), cudaSuccess);  // as the other tests expect
}

}  // namespace
}  // namespace powerhouse
