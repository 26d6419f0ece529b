// GPU readings from NVML, loaded with dlopen. Only nvmlInit_v2, nvmlShutdown,
// nvmlDeviceGetCount_v2 and nvmlDeviceGetHandleByIndex_v2 are required; every other function
// is optional (older drivers, consumer GPUs and virtual machines lack some) and its fields
// stay empty when it is missing or answers "not supported". The library is opened through
// platform/shared_library.h, which closes it when the source goes.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "platform/shared_library.h"
#include "telemetry/gpu_source.h"
#include "telemetry/nvml_api.h"

namespace powerhouse::telemetry {
namespace {

class NvmlSource final : public GpuSource {
public:
    explicit NvmlSource(const std::filesystem::path& library);
    ~NvmlSource() override;
    NvmlSource(const NvmlSource&) = delete;
    NvmlSource& operator=(const NvmlSource&) = delete;

    const std::string& status() const override { return status_; }
    const std::string& description() const override { return description_; }
    bool simulated() const override { return false; }
    const std::vector<GpuInfo>& gpus() const override { return gpus_; }
    const std::vector<GpuLink>& links() const override { return links_; }
    std::vector<GpuSample> sample(double time) override;
    void report_activity(uint32_t, float, uint64_t) override {}

private:
    template <class F>
    F symbol(const char* name) const {
        return library_.symbol<F>(name);
    }
    std::string error_string(nvml::Return r) const;
    void read_info();
    void read_links();
    GpuSample read(uint32_t i, double time);
    nvml::Return read_memory(nvml::Device d, nvml::Memory& m) const;

    SharedLibrary library_;  // empty when NVML could not be loaded
    bool initialized_ = false;
    std::string status_;
    std::string description_ = "NVML";
    std::vector<nvml::Device> devices_;
    std::vector<GpuInfo> gpus_;
    std::vector<GpuLink> links_;

    nvml::ShutdownFn shutdown_ = nullptr;
    nvml::ErrorStringFn error_string_ = nullptr;
    nvml::DeviceGetUtilizationRatesFn utilization_ = nullptr;
    nvml::DeviceGetMemoryInfoFn memory_ = nullptr;
    nvml::DeviceGetMemoryInfoV2Fn memory_v2_ = nullptr;
    nvml::DeviceGetTemperatureFn temperature_ = nullptr;
    nvml::DeviceGetUintFn power_ = nullptr;
    nvml::DeviceGetUintFn fan_ = nullptr;
    nvml::DeviceGetClockInfoFn clock_ = nullptr;
    nvml::DeviceGetUllFn throttle_ = nullptr;
    nvml::DeviceGetUllFn energy_ = nullptr;
    nvml::DeviceGetTotalEccErrorsFn ecc_errors_ = nullptr;
    nvml::DeviceGetRetiredPagesPendingStatusFn retired_pending_ = nullptr;
    nvml::DeviceGetProcessesFn processes_ = nullptr;
};

NvmlSource::NvmlSource(const std::filesystem::path& library) {
    const std::string path = library.empty() ? std::string("libnvidia-ml.so.1") : library.string();
    auto opened = SharedLibrary::open(path);
    if (!opened) {
        status_ = library.empty() ? "no NVIDIA driver found (libnvidia-ml.so.1 is not installed)"
                                  : fmt::format("no NVIDIA driver found ({} could not be loaded)", path);
        return;
    }
    library_ = std::move(opened).value();
    const auto init = symbol<nvml::InitFn>("nvmlInit_v2");
    shutdown_ = symbol<nvml::ShutdownFn>("nvmlShutdown");
    const auto count = symbol<nvml::DeviceGetCountFn>("nvmlDeviceGetCount_v2");
    const auto by_index = symbol<nvml::DeviceGetHandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
    error_string_ = symbol<nvml::ErrorStringFn>("nvmlErrorString");
    if (init == nullptr || shutdown_ == nullptr || count == nullptr || by_index == nullptr) {
        status_ = fmt::format("the NVIDIA driver's NVML library ({}) is too old: it lacks nvmlInit_v2", path);
        return;
    }
    if (const nvml::Return r = init(); r != nvml::kSuccess) {
        status_ = r == nvml::kErrorDriverNotLoaded
                      ? std::string("no NVIDIA driver found (the kernel driver is not loaded)")
                      : fmt::format("the NVIDIA driver did not start: {}", error_string(r));
        return;
    }
    initialized_ = true;
    if (const auto version = symbol<nvml::SystemGetDriverVersionFn>("nvmlSystemGetDriverVersion")) {
        char text[96] = {};
        if (version(text, sizeof text) == nvml::kSuccess) description_ = fmt::format("NVML (driver {})", text);
    }
    unsigned int n = 0;
    if (const nvml::Return r = count(&n); r != nvml::kSuccess) {
        status_ = fmt::format("the NVIDIA driver could not list the GPUs: {}", error_string(r));
        return;
    }
    for (unsigned int i = 0; i < n; ++i) {
        nvml::Device device = nullptr;
        if (by_index(i, &device) != nvml::kSuccess) device = nullptr;  // reported as not responding
        devices_.push_back(device);
    }
    if (devices_.empty()) {
        status_ = "no NVIDIA GPU found";
        return;
    }
    utilization_ = symbol<nvml::DeviceGetUtilizationRatesFn>("nvmlDeviceGetUtilizationRates");
    memory_ = symbol<nvml::DeviceGetMemoryInfoFn>("nvmlDeviceGetMemoryInfo");
    memory_v2_ = symbol<nvml::DeviceGetMemoryInfoV2Fn>("nvmlDeviceGetMemoryInfo_v2");
    temperature_ = symbol<nvml::DeviceGetTemperatureFn>("nvmlDeviceGetTemperature");
    power_ = symbol<nvml::DeviceGetUintFn>("nvmlDeviceGetPowerUsage");
    fan_ = symbol<nvml::DeviceGetUintFn>("nvmlDeviceGetFanSpeed");
    clock_ = symbol<nvml::DeviceGetClockInfoFn>("nvmlDeviceGetClockInfo");
    throttle_ = symbol<nvml::DeviceGetUllFn>("nvmlDeviceGetCurrentClocksEventReasons");
    if (throttle_ == nullptr) throttle_ = symbol<nvml::DeviceGetUllFn>("nvmlDeviceGetCurrentClocksThrottleReasons");
    energy_ = symbol<nvml::DeviceGetUllFn>("nvmlDeviceGetTotalEnergyConsumption");
    ecc_errors_ = symbol<nvml::DeviceGetTotalEccErrorsFn>("nvmlDeviceGetTotalEccErrors");
    retired_pending_ = symbol<nvml::DeviceGetRetiredPagesPendingStatusFn>("nvmlDeviceGetRetiredPagesPendingStatus");
    processes_ = symbol<nvml::DeviceGetProcessesFn>("nvmlDeviceGetComputeRunningProcesses_v3");
    read_info();
    read_links();
}

// NVML is shut down here, before library_ (a member) closes the library behind shutdown_.
NvmlSource::~NvmlSource() {
    if (initialized_) shutdown_();
}

std::string NvmlSource::error_string(nvml::Return r) const {
    const char* text = error_string_ != nullptr ? error_string_(r) : nullptr;
    return text != nullptr ? fmt::format("{} (NVML error {})", text, r) : fmt::format("NVML error {}", r);
}

void NvmlSource::read_info() {
    const auto name = symbol<nvml::DeviceGetStringFn>("nvmlDeviceGetName");
    const auto uuid = symbol<nvml::DeviceGetStringFn>("nvmlDeviceGetUUID");
    const auto pci = symbol<nvml::DeviceGetPciInfoFn>("nvmlDeviceGetPciInfo_v3");
    const auto gen = symbol<nvml::DeviceGetUintFn>("nvmlDeviceGetCurrPcieLinkGeneration");
    const auto width = symbol<nvml::DeviceGetUintFn>("nvmlDeviceGetCurrPcieLinkWidth");
    const auto max_gen = symbol<nvml::DeviceGetUintFn>("nvmlDeviceGetMaxPcieLinkGeneration");
    const auto max_width = symbol<nvml::DeviceGetUintFn>("nvmlDeviceGetMaxPcieLinkWidth");
    const auto limit = symbol<nvml::DeviceGetUintFn>("nvmlDeviceGetEnforcedPowerLimit");
    const auto ecc = symbol<nvml::DeviceGetEccModeFn>("nvmlDeviceGetEccMode");
    const auto uint_of = [](nvml::DeviceGetUintFn f, nvml::Device d) -> std::optional<uint32_t> {
        unsigned int v = 0;
        if (f == nullptr || d == nullptr || f(d, &v) != nvml::kSuccess) return std::nullopt;
        return v;
    };
    for (uint32_t i = 0; i < devices_.size(); ++i) {
        const nvml::Device d = devices_[i];
        GpuInfo info;
        info.index = i;
        char text[96] = {};
        info.name = name != nullptr && d != nullptr && name(d, text, sizeof text) == nvml::kSuccess
                        ? std::string(text)
                        : fmt::format("GPU {}", i);
        std::memset(text, 0, sizeof text);
        if (uuid != nullptr && d != nullptr && uuid(d, text, sizeof text) == nvml::kSuccess) info.uuid = text;
        nvml::PciInfo p{};
        if (pci != nullptr && d != nullptr && pci(d, &p) == nvml::kSuccess) {
            p.bus_id[sizeof p.bus_id - 1] = '\0';
            info.pci_bus_id = normalize_pci_bus_id(p.bus_id);
        }
        nvml::Memory m{};
        if (memory_ != nullptr && d != nullptr && memory_(d, &m) == nvml::kSuccess) info.memory_total = m.total;
        info.pcie_generation = uint_of(gen, d);
        info.pcie_width = uint_of(width, d);
        info.pcie_max_generation = uint_of(max_gen, d);
        info.pcie_max_width = uint_of(max_width, d);
        if (const std::optional<uint32_t> mw = uint_of(limit, d)) info.power_limit_w = *mw / 1000.0;
        unsigned int current = 0, pending = 0;
        if (ecc != nullptr && d != nullptr && ecc(d, &current, &pending) == nvml::kSuccess) {
            info.ecc_enabled = current == nvml::kEnableStateEnabled;
        }
        gpus_.push_back(std::move(info));
    }
}

void NvmlSource::read_links() {
    const auto state = symbol<nvml::DeviceGetNvLinkStateFn>("nvmlDeviceGetNvLinkState");
    const auto remote = symbol<nvml::DeviceGetNvLinkRemotePciInfoFn>("nvmlDeviceGetNvLinkRemotePciInfo_v2");
    if (state == nullptr || remote == nullptr) return;
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> count;
    TelemetrySnapshot lookup;
    lookup.gpus = gpus_;
    for (uint32_t i = 0; i < devices_.size(); ++i) {
        if (devices_[i] == nullptr) continue;
        for (unsigned int link = 0; link < nvml::kNvlinkMaxLinks; ++link) {
            unsigned int active = 0;
            if (state(devices_[i], link, &active) != nvml::kSuccess || active != nvml::kEnableStateEnabled) continue;
            nvml::PciInfo p{};
            if (remote(devices_[i], link, &p) != nvml::kSuccess) continue;
            p.bus_id[sizeof p.bus_id - 1] = '\0';
            const std::optional<uint32_t> j = find_by_pci_bus_id(lookup, p.bus_id);
            if (!j || *j == i) continue;  // an NVSwitch or a GPU outside this process's view
            ++count[{std::min(i, *j), std::max(i, *j)}];
        }
    }
    // Each link is seen from both ends.
    for (const auto& [pair, n] : count) links_.push_back({pair.first, pair.second, (n + 1) / 2});
}

std::vector<GpuSample> NvmlSource::sample(double time) {
    std::vector<GpuSample> samples;
    samples.reserve(devices_.size());
    for (uint32_t i = 0; i < devices_.size(); ++i) samples.push_back(read(i, time));
    return samples;
}

// Used memory as nvidia-smi shows it: without what the driver reserves for itself, which
// the first nvmlDeviceGetMemoryInfo counts as used (615 MiB on an idle H200). The v2 call
// where the driver has it, else the first.
nvml::Return NvmlSource::read_memory(nvml::Device d, nvml::Memory& m) const {
    if (memory_v2_ != nullptr) {
        nvml::MemoryV2 v2{};
        v2.version = nvml::kMemoryV2Version;
        if (memory_v2_(d, &v2) == nvml::kSuccess) {
            m.total = v2.total;
            m.used = v2.used;
            m.free = v2.free;
            return nvml::kSuccess;
        }
    }
    return memory_(d, &m);
}

GpuSample NvmlSource::read(uint32_t i, double time) {
    GpuSample s;
    s.time = time;
    const nvml::Device d = devices_[i];
    const auto lost = [&](nvml::Return r) {
        return r == nvml::kErrorGpuIsLost || r == nvml::kErrorUnknown || r == nvml::kErrorTimeout;
    };
    if (d == nullptr) {
        s.responding = false;
        s.problem = fmt::format("GPU {} not responding: the driver gave no handle for it", i);
        return s;
    }
    // Memory first: every GPU reports it, so its failure means the GPU is gone.
    if (memory_ != nullptr) {
        nvml::Memory m{};
        const nvml::Return r = read_memory(d, m);
        if (r == nvml::kSuccess) {
            s.memory_used = m.used;
            s.memory_free = m.free;
        } else if (lost(r)) {
            s.responding = false;
            s.problem = fmt::format("GPU {} not responding: {}", i, error_string(r));
            return s;
        }
    }
    const auto get = [&](auto f, auto&&... args) { return f != nullptr && f(d, args...) == nvml::kSuccess; };
    nvml::Utilization u{};
    if (get(utilization_, &u)) {
        s.gpu_utilization = u.gpu;
        s.memory_utilization = u.memory;
    }
    unsigned int v = 0;
    if (get(temperature_, nvml::kTemperatureGpu, &v)) s.temperature_c = v;
    if (get(power_, &v)) s.power_w = v / 1000.0;
    if (get(fan_, &v)) s.fan_percent = v;
    if (get(clock_, nvml::kClockSm, &v)) s.sm_clock_mhz = v;
    if (get(clock_, nvml::kClockMem, &v)) s.memory_clock_mhz = v;
    unsigned long long ull = 0;
    if (get(throttle_, &ull)) s.throttle_reasons = ull;
    if (get(energy_, &ull)) s.energy_j = static_cast<double>(ull) / 1000.0;
    if (get(ecc_errors_, nvml::kMemoryErrorUncorrected, nvml::kVolatileEcc, &ull)) s.ecc_uncorrected = ull;
    if (get(retired_pending_, &v)) s.retired_pages_pending = v == nvml::kEnableStateEnabled;
    if (processes_ != nullptr) {
        std::vector<nvml::ProcessInfo> list(64);
        auto n = static_cast<unsigned int>(list.size());
        nvml::Return r = processes_(d, &n, list.data());
        if (r == nvml::kErrorInsufficientSize && n > list.size() && n < 100000) {
            list.resize(n);
            r = processes_(d, &n, list.data());
        }
        if (r == nvml::kSuccess) {
            const auto self = static_cast<unsigned int>(getpid());
            uint64_t mine = 0;
            for (unsigned int k = 0; k < std::min<size_t>(n, list.size()); ++k) {
                if (list[k].pid == self) mine += list[k].used_gpu_memory;
            }
            s.process_memory = mine;
        }
    }
    return s;
}

}  // namespace

std::unique_ptr<GpuSource> open_nvml_source(const std::filesystem::path& library) {
    return std::make_unique<NvmlSource>(library);
}

}  // namespace powerhouse::telemetry
