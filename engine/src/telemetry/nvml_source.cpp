// GPU readings from NVML, loaded with dlopen. Only nvmlInit_v2, nvmlShutdown,
// nvmlDeviceGetCount_v2 and nvmlDeviceGetHandleByIndex_v2 are required; every other function
// is optional (older drivers, consumer GPUs and virtual machines lack some) and its fields
// stay empty when it is missing or answers "not supported". The library is opened through
// platform/shared_library.h, which closes it when the source goes.
//
// Power limits: read with the limit functions (each optional), set with
// nvmlDeviceSetPowerManagementLimit, whose refusals (no permission, not supported, out of
// range, lost) become power_limit_error()s.
//
// Failures: the first answer "GPU is lost" marks that GPU lost for good, and it is not asked
// again (a GPU off the bus can make every query wait out the driver's timeouts). Xid events
// come through one event set registered on every GPU and emptied, without waiting, after
// each sample; the event functions are optional like the rest.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
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
    const std::string& xid_status() const override { return xid_status_; }
    const std::vector<GpuInfo>& gpus() const override { return gpus_; }
    const std::vector<GpuLink>& links() const override { return links_; }
    std::vector<GpuSample> sample(double time) override;
    void report_activity(uint32_t, float, uint64_t) override {}
    Result<PowerLimits> power_limits(uint32_t gpu) override;
    Result<void> set_power_limit(uint32_t gpu, uint32_t milliwatts) override;

private:
    template <class F>
    F symbol(const char* name) const {
        return library_.symbol<F>(name);
    }
    std::string error_string(nvml::Return r) const;
    bool answered(uint32_t i, nvml::Return r);
    void read_info();
    void read_links();
    void watch_events();
    GpuSample read(uint32_t i, double time);
    GpuSample lost_sample(uint32_t i, double time) const;
    nvml::Return read_memory(nvml::Device d, nvml::Memory& m) const;
    void read_events(double time, std::vector<GpuSample>& samples);

    SharedLibrary library_;  // empty when NVML could not be loaded
    bool initialized_ = false;
    std::string status_;
    std::string description_ = "NVML";
    std::vector<nvml::Device> devices_;
    std::vector<std::string> lost_;  // per GPU: empty, or the problem since NVML called it lost
    std::vector<GpuInfo> gpus_;
    std::vector<GpuLink> links_;
    std::string xid_status_;
    nvml::EventSet events_ = nullptr;  // null when no GPU's events are watched

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
    nvml::EventSetWaitFn wait_events_ = nullptr;
    nvml::DeviceGetUintFn limit_ = nullptr;           // nvmlDeviceGetPowerManagementLimit
    nvml::DeviceGetUintFn default_limit_ = nullptr;   // nvmlDeviceGetPowerManagementDefaultLimit
    nvml::DeviceGetUintFn enforced_limit_ = nullptr;  // nvmlDeviceGetEnforcedPowerLimit
    nvml::DeviceGetUintPairFn limit_range_ = nullptr;
    nvml::DeviceSetUintFn set_limit_ = nullptr;
    nvml::EventSetFreeFn free_events_ = nullptr;
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
    lost_.resize(n);
    for (unsigned int i = 0; i < n; ++i) {
        nvml::Device device = nullptr;
        if (!answered(i, by_index(i, &device))) device = nullptr;  // reported as not responding
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
    limit_ = symbol<nvml::DeviceGetUintFn>("nvmlDeviceGetPowerManagementLimit");
    default_limit_ = symbol<nvml::DeviceGetUintFn>("nvmlDeviceGetPowerManagementDefaultLimit");
    enforced_limit_ = symbol<nvml::DeviceGetUintFn>("nvmlDeviceGetEnforcedPowerLimit");
    limit_range_ = symbol<nvml::DeviceGetUintPairFn>("nvmlDeviceGetPowerManagementLimitConstraints");
    set_limit_ = symbol<nvml::DeviceSetUintFn>("nvmlDeviceSetPowerManagementLimit");
    read_info();
    read_links();
    watch_events();
}

// NVML is shut down here, before library_ (a member) closes the library behind shutdown_,
// and the event set is freed before that, while NVML can still free it.
NvmlSource::~NvmlSource() {
    if (events_ != nullptr) free_events_(events_);
    if (initialized_) shutdown_();
}

std::string NvmlSource::error_string(nvml::Return r) const {
    const char* text = error_string_ != nullptr ? error_string_(r) : nullptr;
    return text != nullptr ? fmt::format("{} (NVML error {})", text, r) : fmt::format("NVML error {}", r);
}

// Whether GPU i answered; the answer "GPU is lost" marks it lost (see read()).
bool NvmlSource::answered(uint32_t i, nvml::Return r) {
    if (r == nvml::kErrorGpuIsLost && lost_[i].empty()) {
        lost_[i] = fmt::format("GPU {} not responding: {}", i, error_string(r));
    }
    return r == nvml::kSuccess;
}

void NvmlSource::read_info() {
    const auto name = symbol<nvml::DeviceGetStringFn>("nvmlDeviceGetName");
    const auto uuid = symbol<nvml::DeviceGetStringFn>("nvmlDeviceGetUUID");
    const auto pci = symbol<nvml::DeviceGetPciInfoFn>("nvmlDeviceGetPciInfo_v3");
    const auto gen = symbol<nvml::DeviceGetUintFn>("nvmlDeviceGetCurrPcieLinkGeneration");
    const auto width = symbol<nvml::DeviceGetUintFn>("nvmlDeviceGetCurrPcieLinkWidth");
    const auto max_gen = symbol<nvml::DeviceGetUintFn>("nvmlDeviceGetMaxPcieLinkGeneration");
    const auto max_width = symbol<nvml::DeviceGetUintFn>("nvmlDeviceGetMaxPcieLinkWidth");
    const auto ecc = symbol<nvml::DeviceGetEccModeFn>("nvmlDeviceGetEccMode");
    constexpr auto kTextSize = static_cast<unsigned int>(96);
    for (uint32_t i = 0; i < devices_.size(); ++i) {
        const nvml::Device d = devices_[i];
        // Each query only while the GPU is there: the first "GPU is lost" ends them.
        const auto get = [&](auto f, auto&&... args) {
            return f != nullptr && d != nullptr && lost_[i].empty() && answered(i, f(d, args...));
        };
        const auto uint_of = [&](nvml::DeviceGetUintFn f) -> std::optional<uint32_t> {
            unsigned int v = 0;
            if (!get(f, &v)) return std::nullopt;
            return v;
        };
        GpuInfo info;
        info.index = i;
        char text[kTextSize] = {};
        info.name = get(name, text, kTextSize) ? std::string(text) : fmt::format("GPU {}", i);
        std::memset(text, 0, sizeof text);
        if (get(uuid, text, kTextSize)) info.uuid = text;
        nvml::PciInfo p{};
        if (get(pci, &p)) {
            p.bus_id[sizeof p.bus_id - 1] = '\0';
            info.pci_bus_id = normalize_pci_bus_id(p.bus_id);
        }
        nvml::Memory m{};
        if (get(memory_, &m)) info.memory_total = m.total;
        info.pcie_generation = uint_of(gen);
        info.pcie_width = uint_of(width);
        info.pcie_max_generation = uint_of(max_gen);
        info.pcie_max_width = uint_of(max_width);
        if (const std::optional<uint32_t> mw = uint_of(enforced_limit_)) info.power_limit_w = *mw / 1000.0;
        unsigned int current = 0, pending = 0;
        if (get(ecc, &current, &pending)) info.ecc_enabled = current == nvml::kEnableStateEnabled;
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
        for (unsigned int link = 0; link < nvml::kNvlinkMaxLinks && lost_[i].empty(); ++link) {
            unsigned int active = 0;
            if (!answered(i, state(devices_[i], link, &active)) || active != nvml::kEnableStateEnabled) continue;
            nvml::PciInfo p{};
            if (!answered(i, remote(devices_[i], link, &p))) continue;
            p.bus_id[sizeof p.bus_id - 1] = '\0';
            const std::optional<uint32_t> j = find_by_pci_bus_id(lookup, p.bus_id);
            if (!j || *j == i) continue;  // an NVSwitch or a GPU outside this process's view
            ++count[{std::min(i, *j), std::max(i, *j)}];
        }
    }
    // Each link is seen from both ends.
    for (const auto& [pair, n] : count) links_.push_back({pair.first, pair.second, (n + 1) / 2});
}

// Critical Xids, and double-bit ECC errors where the GPU has ECC on. NVML refuses a mask
// with a type the GPU lacks, so then Xids alone are asked for.
void NvmlSource::watch_events() {
    if (devices_.empty()) return;
    const auto create = symbol<nvml::EventSetCreateFn>("nvmlEventSetCreate");
    const auto register_events = symbol<nvml::DeviceRegisterEventsFn>("nvmlDeviceRegisterEvents");
    const auto supported = symbol<nvml::DeviceGetSupportedEventTypesFn>("nvmlDeviceGetSupportedEventTypes");
    wait_events_ = symbol<nvml::EventSetWaitFn>("nvmlEventSetWait_v2");
    free_events_ = symbol<nvml::EventSetFreeFn>("nvmlEventSetFree");
    if (create == nullptr || register_events == nullptr || wait_events_ == nullptr || free_events_ == nullptr) {
        xid_status_ = "Xid events not available: the NVML library has no event functions (nvmlEventSetWait_v2)";
        return;
    }
    if (const nvml::Return r = create(&events_); r != nvml::kSuccess) {
        events_ = nullptr;
        xid_status_ = fmt::format("Xid events not available: {}", error_string(r));
        return;
    }
    constexpr unsigned long long kXid = nvml::kEventTypeXidCriticalError;
    std::string unwatched, why;
    for (uint32_t i = 0; i < devices_.size(); ++i) {
        const nvml::Device d = devices_[i];
        nvml::Return r = nvml::kErrorGpuIsLost;
        if (d != nullptr && lost_[i].empty()) {
            unsigned long long types = kXid | nvml::kEventTypeDoubleBitEccError;
            if (unsigned long long have = 0; supported != nullptr && answered(i, supported(d, &have))) types &= have;
            r = (types & kXid) == 0 ? nvml::kErrorNotSupported : register_events(d, types, events_);
            if (r == nvml::kErrorNotSupported && (types & kXid) != 0 && types != kXid) {
                r = register_events(d, kXid, events_);
            }
            answered(i, r);
        }
        if (r == nvml::kErrorUnknown) {
            // NVML: the set is then in an undefined state, to be freed.
            free_events_(events_);
            events_ = nullptr;
            for (GpuInfo& g : gpus_) g.xid_events_watched = false;
            xid_status_ = fmt::format("Xid events not available: {}", error_string(r));
            return;
        }
        gpus_[i].xid_events_watched = r == nvml::kSuccess;
        if (r != nvml::kSuccess) {
            unwatched += fmt::format("{}{}", unwatched.empty() ? "" : ", ", i);
            if (why.empty()) why = d == nullptr ? std::string("the driver gave no handle for it") : error_string(r);
        }
    }
    if (!unwatched.empty()) xid_status_ = fmt::format("Xid events not available for GPU {}: {}", unwatched, why);
    if (std::none_of(gpus_.begin(), gpus_.end(), [](const GpuInfo& g) { return g.xid_events_watched; })) {
        free_events_(events_);
        events_ = nullptr;
    }
}

std::vector<GpuSample> NvmlSource::sample(double time) {
    std::vector<GpuSample> samples;
    samples.reserve(devices_.size());
    for (uint32_t i = 0; i < devices_.size(); ++i) samples.push_back(read(i, time));
    read_events(time, samples);
    return samples;
}

// Every event waiting, without waiting for more. After the readings, so that an Xid the
// driver raised while a GPU was being read comes with that reading, not an interval later.
void NvmlSource::read_events(double time, std::vector<GpuSample>& samples) {
    if (events_ == nullptr) return;
    // A double-bit ECC error comes twice, as its own event and as Xid 48: one of each pair
    // is kept. Per GPU, > 0: ECC events waiting for their Xid 48, < 0: the other way round.
    std::vector<int> unpaired(devices_.size(), 0);
    // Bounded, should a driver never run out: the rest comes with the next sample.
    constexpr int kMaxEvents = 1024;
    for (int n = 0; n < kMaxEvents; ++n) {
        nvml::EventData e{};
        // Anything but an event ends it: a timeout (none left), or "GPU is lost" for a GPU
        // it does not name (the readings have found which).
        if (wait_events_(events_, &e, 0) != nvml::kSuccess) return;
        const auto it = std::find(devices_.begin(), devices_.end(), e.device);
        if (e.device == nullptr || it == devices_.end()) continue;
        const auto i = static_cast<size_t>(it - devices_.begin());
        const bool is_xid = (e.event_type & nvml::kEventTypeXidCriticalError) != 0;
        if (!is_xid && (e.event_type & nvml::kEventTypeDoubleBitEccError) == 0) continue;
        const uint32_t xid =
            is_xid ? static_cast<uint32_t>(std::min<unsigned long long>(e.event_data, UINT32_MAX)) : 48;
        if (xid == 48) {
            const int side = is_xid ? -1 : 1;
            const bool pairs = unpaired[i] * side < 0;
            unpaired[i] += side;
            if (pairs) continue;
        }
        samples[i].xid_events.push_back(make_xid_event(xid, time));
    }
}

// Used memory as nvidia-smi shows it: without what the driver reserves for itself, which
// the first nvmlDeviceGetMemoryInfo counts as used (615 MiB on an idle H200). The v2 call
// where the driver has it, else the first.
nvml::Return NvmlSource::read_memory(nvml::Device d, nvml::Memory& m) const {
    if (memory_v2_ != nullptr) {
        nvml::MemoryV2 v2{};
        v2.version = nvml::kMemoryV2Version;
        const nvml::Return r = memory_v2_(d, &v2);
        if (r == nvml::kSuccess) {
            m.total = v2.total;
            m.used = v2.used;
            m.free = v2.free;
            return nvml::kSuccess;
        }
        // The GPU's own trouble is the answer (asking again would only wait again); other
        // refusals, such as an older driver's of the v2 struct, leave the first call to try.
        if (r == nvml::kErrorGpuIsLost || r == nvml::kErrorTimeout || r == nvml::kErrorUnknown) return r;
    }
    return memory_(d, &m);
}

GpuSample NvmlSource::lost_sample(uint32_t i, double time) const {
    GpuSample s;
    s.time = time;
    s.responding = false;
    s.lost = true;
    s.problem = lost_[i];
    return s;
}

GpuSample NvmlSource::read(uint32_t i, double time) {
    if (!lost_[i].empty()) return lost_sample(i, time);
    GpuSample s;
    s.time = time;
    const nvml::Device d = devices_[i];
    // Not answering now, which may pass; "GPU is lost" (answered() notes it) does not.
    const auto silent = [](nvml::Return r) { return r == nvml::kErrorUnknown || r == nvml::kErrorTimeout; };
    if (d == nullptr) {
        s.responding = false;
        s.problem = fmt::format("GPU {} not responding: the driver gave no handle for it", i);
        return s;
    }
    // Memory first: every GPU reports it, so its failure means the GPU is gone.
    if (memory_ != nullptr) {
        nvml::Memory m{};
        const nvml::Return r = read_memory(d, m);
        if (answered(i, r)) {
            s.memory_used = m.used;
            s.memory_free = m.free;
        } else if (!lost_[i].empty()) {
            return lost_sample(i, time);
        } else if (silent(r)) {
            s.responding = false;
            s.problem = fmt::format("GPU {} not responding: {}", i, error_string(r));
            return s;
        }
    }
    const auto get = [&](auto f, auto&&... args) {
        return f != nullptr && lost_[i].empty() && answered(i, f(d, args...));
    };
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
    if (processes_ != nullptr && lost_[i].empty()) {
        std::vector<nvml::ProcessInfo> list(64);
        auto n = static_cast<unsigned int>(list.size());
        nvml::Return r = processes_(d, &n, list.data());
        if (r == nvml::kErrorInsufficientSize && n > list.size() && n < 100000) {
            list.resize(n);
            r = processes_(d, &n, list.data());
        }
        if (answered(i, r)) {
            const auto self = static_cast<unsigned int>(getpid());
            uint64_t mine = 0;
            for (unsigned int k = 0; k < std::min<size_t>(n, list.size()); ++k) {
                if (list[k].pid == self) mine += list[k].used_gpu_memory;
            }
            s.process_memory = mine;
        }
    }
    // Lost while being read: what it answered before is not to be believed either.
    return lost_[i].empty() ? s : lost_sample(i, time);
}

Error no_handle(uint32_t gpu) {
    return make_error(ErrorCode::device_failed,
                      fmt::format("GPU {} is not responding: the driver gave no handle for it", gpu));
}

Result<PowerLimits> NvmlSource::power_limits(uint32_t gpu) {
    if (gpu >= devices_.size()) return no_such_gpu(gpu, devices_.size());
    PowerLimits out;
    out.gpu = gpu;
    const nvml::Device d = devices_[gpu];
    if (d == nullptr) return no_handle(gpu);
    const auto watts = [&](nvml::DeviceGetUintFn f) -> std::optional<double> {
        unsigned int mw = 0;
        if (f == nullptr || !lost_[gpu].empty() || !answered(gpu, f(d, &mw))) return std::nullopt;
        return mw / 1000.0;
    };
    out.current_w = watts(limit_);
    out.enforced_w = watts(enforced_limit_);
    out.default_w = watts(default_limit_);
    unsigned int min_mw = 0, max_mw = 0;
    if (limit_range_ != nullptr && lost_[gpu].empty() && answered(gpu, limit_range_(d, &min_mw, &max_mw))) {
        out.min_w = min_mw / 1000.0;
        out.max_w = max_mw / 1000.0;
    }
    if (!lost_[gpu].empty()) return power_limit_error(PowerLimitRefusal::lost, gpus_[gpu], 0, out);
    return out;
}

Result<void> NvmlSource::set_power_limit(uint32_t gpu, uint32_t milliwatts) {
    if (gpu >= devices_.size()) return no_such_gpu(gpu, devices_.size());
    const double watts = milliwatts / 1000.0;
    const nvml::Device d = devices_[gpu];
    if (d == nullptr) return no_handle(gpu);
    if (!lost_[gpu].empty()) return power_limit_error(PowerLimitRefusal::lost, gpus_[gpu], watts, {});
    if (set_limit_ == nullptr) {
        return power_limit_error(PowerLimitRefusal::not_supported, gpus_[gpu], watts, {},
                                 "its NVML library has no nvmlDeviceSetPowerManagementLimit");
    }
    const nvml::Return r = set_limit_(d, milliwatts);
    answered(gpu, r);
    switch (r) {
        case nvml::kSuccess: {
            unsigned int enforced = 0;
            if (enforced_limit_ != nullptr && answered(gpu, enforced_limit_(d, &enforced))) {
                gpus_[gpu].power_limit_w = enforced / 1000.0;
            }
            return {};
        }
        case nvml::kErrorNoPermission:
            return power_limit_error(PowerLimitRefusal::no_permission, gpus_[gpu], watts, {});
        case nvml::kErrorNotSupported:
            return power_limit_error(PowerLimitRefusal::not_supported, gpus_[gpu], watts, {}, error_string(r));
        case nvml::kErrorInvalidArgument: {
            // The monitor checks the range it is told before asking; the driver's own word
            // comes when it does not tell one, or the limit changed meanwhile.
            PowerLimits range;
            unsigned int min_mw = 0, max_mw = 0;
            if (limit_range_ != nullptr && answered(gpu, limit_range_(d, &min_mw, &max_mw))) {
                range.min_w = min_mw / 1000.0;
                range.max_w = max_mw / 1000.0;
            }
            return power_limit_error(PowerLimitRefusal::out_of_range, gpus_[gpu], watts, range, error_string(r));
        }
        case nvml::kErrorGpuIsLost:
            return power_limit_error(PowerLimitRefusal::lost, gpus_[gpu], watts, {});
        default:
            return power_limit_error(PowerLimitRefusal::failed, gpus_[gpu], watts, {}, error_string(r));
    }
}

}  // namespace

std::unique_ptr<GpuSource> open_nvml_source(const std::filesystem::path& library) {
    return std::make_unique<NvmlSource>(library);
}

}  // namespace powerhouse::telemetry
