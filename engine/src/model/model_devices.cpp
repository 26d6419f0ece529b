#include "model/model_devices.h"
#include "powerhouse/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>

#ifdef POWERHOUSE_HAS_CUDA
#include "backend/cuda/cuda_libraries.h"
#include "backend/cuda/cuda_runtime.h"
#endif

namespace powerhouse {

namespace {

#ifdef POWERHOUSE_HAS_CUDA
Error bad_list(const std::string& spec) {
    return make_error(ErrorCode::invalid_argument,
                      fmt::format("'{}' does not name GPUs: write cuda for all of them, or cuda:0,1 with the GPU "
                                  "numbers (or GPU-... UUIDs) that `powerhouse-cli gpus` shows",
                                  spec));
}

// "0,GPU-8f3c...,2" -> its items, each a number (checked here) or a UUID (found later).
Result<std::vector<std::string>> split_list(const std::string& spec, const std::string& list) {
    std::vector<std::string> out;
    size_t at = 0;
    while (at <= list.size()) {
        const size_t comma = std::min(list.find(',', at), list.size());
        std::string item = list.substr(at, comma - at);
        if (item.rfind("GPU-", 0) != 0) {
            int value = -1;
            const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
            if (ec != std::errc() || ptr != item.data() + item.size() || value < 0 || value > 255) {
                return bad_list(spec);
            }
        } else if (item.size() < 8) {
            return bad_list(spec);
        }
        out.push_back(std::move(item));
        at = comma + 1;
    }
    if (out.size() > 16) return make_error(ErrorCode::invalid_argument, "at most 16 GPU shards");
    return out;
}

Result<ModelDevices> gpu_devices(const std::string& spec, const std::string& list,
                                 const std::vector<std::string>& excluded) {
    std::vector<std::string> items;
    if (!list.empty()) {
        Result<std::vector<std::string>> parsed = split_list(spec, list);
        if (!parsed) return parsed.error();
        items = *parsed;
    }
    Result<std::vector<cuda::CudaDeviceInfo>> gpus = cuda::cuda_devices(true);
    if (!gpus) {
        return make_error(ErrorCode::unsupported, fmt::format("no NVIDIA GPU can be used ({}); use the CPU instead "
                                                              "(devices: cpu)",
                                                              gpus.error().message));
    }
    std::vector<int> indices;
    for (const std::string& item : items) {
        if (item.rfind("GPU-", 0) == 0) {
            const auto it = std::find_if(gpus->begin(), gpus->end(),
                                         [&](const cuda::CudaDeviceInfo& g) { return g.uuid == item; });
            if (it == gpus->end()) {
                return make_error(ErrorCode::invalid_argument, fmt::format("no GPU here has the UUID {}", item));
            }
            indices.push_back(it->index);
        } else {
            indices.push_back(std::stoi(item));
        }
    }
    const auto set_aside = [&](const cuda::CudaDeviceInfo& g) {
        return std::find(excluded.begin(), excluded.end(), g.uuid) != excluded.end();
    };
    for (int i : indices) {
        if (i < static_cast<int>(gpus->size()) && set_aside((*gpus)[static_cast<size_t>(i)])) {
            return make_error(ErrorCode::unsupported,
                              fmt::format("GPU {} ({}) failed earlier in this session and is set aside: choose other "
                                          "devices, or restart Powerhouse to try it again",
                                          i, (*gpus)[static_cast<size_t>(i)].uuid));
        }
    }
    if (items.empty()) {
        for (const auto& g : *gpus) {
            if (!set_aside(g)) indices.push_back(g.index);
        }
        if (indices.empty()) {
            return make_error(ErrorCode::unsupported, "every GPU failed earlier in this session and is set aside: use "
                                                      "the CPU (devices: cpu), or restart Powerhouse to try them again");
        }
    }
    std::map<int, int> shards;  // GPU -> shards on it
    for (int i : indices) {
        if (i >= static_cast<int>(gpus->size())) {
            return make_error(ErrorCode::invalid_argument, fmt::format("there is no GPU {}: this machine has {} ({})", i,
                                                                       gpus->size(), spec));
        }
        ++shards[i];
    }
    ModelDevices out;
    out.cuda = true;
    for (int i : indices) {
        const cuda::CudaDeviceInfo& g = (*gpus)[static_cast<size_t>(i)];
        const auto share = static_cast<uint64_t>(shards[i]);
        DeviceDesc d;
        d.name = shards[i] > 1 ? fmt::format("{} (shard)", g.name) : g.name;
        d.uuid = g.uuid;
        d.total_bytes = g.total_memory / share;
        d.free_bytes = g.free_memory / share;
        const double bandwidth = cuda::peak_memory_bandwidth(g) / 1e9;
        d.bandwidth_gb_s = (bandwidth > 0 ? bandwidth : guess_bandwidth_gb_s(g.name)) / static_cast<double>(share);
        out.descs.push_back(std::move(d));
        out.cuda_index.push_back(i);
    }
    return out;
}

// "13.0.2 loaded at run time (/usr/local/cuda/lib64/libcublas.so.13)", or why not, without
// the library's name that starts the loader's message ("cuBLAS not found (...)").
template <class Library>
std::string library_line(const std::string& name, const Result<std::unique_ptr<Library>>& library) {
    if (library) return fmt::format("{} loaded at run time ({})", (*library)->version_string(), (*library)->file());
    std::string why = library.error().message;
    if (why.rfind(name + " ", 0) == 0) why.erase(0, name.size() + 1);
    return why;
}
#endif

}  // namespace

CudaReport cuda_report() {
    CudaReport r;
#ifdef POWERHOUSE_HAS_CUDA
    r.built = true;
    const cuda::CudaVersions versions = cuda::cuda_versions();
    r.runtime = cuda::format_cuda_version(versions.runtime);
    if (versions.driver > 0) r.driver = cuda::format_cuda_version(versions.driver);
    r.cublas = library_line("cuBLAS", cuda::load_cublas());
    r.nccl = library_line("NCCL", cuda::load_nccl());
#endif
    return r;
}

bool has_cuda_backend() {
#ifdef POWERHOUSE_HAS_CUDA
    return true;
#else
    return false;
#endif
}

std::string devices_spec_without(const ModelDevices& devices, size_t removed) {
    std::vector<std::string> left;
    const std::string gone = removed < devices.descs.size() ? devices.descs[removed].uuid : std::string();
    for (size_t i = 0; i < devices.descs.size(); ++i) {
        // A failed GPU takes its every shard with it: they share its context.
        if (i == removed || (devices.cuda && !gone.empty() && devices.descs[i].uuid == gone)) continue;
        if (!devices.cuda) {
            left.emplace_back("cpu");
        } else if (!devices.descs[i].uuid.empty()) {
            left.push_back(devices.descs[i].uuid);  // by UUID: the numbers may change
        } else {
            left.push_back(std::to_string(devices.cuda_index[i]));
        }
    }
    if (left.empty()) return {};
    if (!devices.cuda) return left.size() == 1 ? std::string("cpu") : fmt::format("cpu:{}", left.size());
    return fmt::format("cuda:{}", fmt::join(left, ","));
}

Result<ModelDevices> model_devices(const std::string& spec, const std::vector<std::string>& excluded) {
    const bool cuda = spec == "cuda" || spec.rfind("cuda:", 0) == 0;
    if (cuda || spec == "auto") {
#ifdef POWERHOUSE_HAS_CUDA
        const std::string list = cuda ? spec.substr(std::min<size_t>(spec.size(), 5)) : std::string();
        if (spec == "cuda:") return bad_list(spec);
        if (cuda) return gpu_devices(spec, list, excluded);
        Result<void> ok = cuda::cuda_available();
        if (ok) {
            Result<ModelDevices> gpus = gpu_devices(spec, list, excluded);
            if (gpus || excluded.empty()) return gpus;
            ok = gpus.error();  // every GPU was set aside: the CPU, saying why
        }
        {
            Result<std::vector<DeviceDesc>> cpu = cpu_devices("cpu");
            if (!cpu) return cpu.error();
            ModelDevices out;
            out.descs = *cpu;
            out.why_cpu = ok.error().message;
            return out;
        }
#else
        (void)excluded;
        if (cuda) {
            return make_error(ErrorCode::unsupported, "this build of Powerhouse has no CUDA backend (it was built "
                                                      "without nvcc); use devices cpu, or rebuild with the CUDA toolkit");
        }
        Result<std::vector<DeviceDesc>> cpu = cpu_devices("cpu");
        if (!cpu) return cpu.error();
        ModelDevices out;
        out.descs = *cpu;
        out.why_cpu = "this build has no CUDA backend";
        return out;
#endif
    }
    Result<std::vector<DeviceDesc>> cpu = cpu_devices(spec);
    if (!cpu) {
        return make_error(cpu.error().code, cpu.error().message + "; or cuda, cuda:0,1 for GPUs, auto for GPUs when "
                                                                  "there are any");
    }
    ModelDevices out;
    out.descs = *cpu;
    return out;
}

}  // namespace powerhouse
