// A stand-in for libnvidia-ml.so.1, built by the tests and loaded by the monitor in its
// place. It implements the NVML functions the monitor uses, with the real signatures and
// return codes, for two GPUs joined by NVLink. FAKE_NVML_SCENARIO, read by nvmlInit_v2,
// picks what goes wrong, as one item or several joined by ',':
//   normal          every reading present
//   no_driver       nvmlInit_v2 answers "driver not loaded"
//   no_gpus         the driver lists none
//   unsupported     temperature, power and fan answer "not supported"
//   lost_after:N    GPU 1 answers "GPU is lost" from its (N+1)-th memory reading on, and
//                   every query about it after that
//   timeout@N       GPU 1's N-th memory reading alone answers "timeout"
//   xid:CODE@N      GPU 1 raises Xid CODE at its N-th memory reading (the monitor's read of
//                   the GPU's information is the 1st, its first sample the 2nd), delivered
//                   by the next nvmlEventSetWait_v2; a reading that finds it lost counts
//   dbe@N           GPU 1 raises a double-bit ECC event (not an Xid) at its N-th memory reading
//   events_unsupported  nvmlDeviceRegisterEvents answers "not supported"
//   power_denied    nvmlDeviceSetPowerManagementLimit answers "no permission" (not root)
//   power_unsupported   GPU 1 reports its limits, but setting one answers "not supported"
//   power_range_hidden  the limit constraints answer "not supported"; a set out of range
//                   still answers "invalid argument", as the driver checks it anyway
//   set_fails@N     the N-th call to set a power limit (any GPU, from 1) answers "unknown error"
// Power limits (mW): GPU 0 an RTX 4090 (default 450 W, 150-600 W), GPU 1 an RTX A6000
// (300 W, 100-300 W); a set out of range answers "invalid argument", as NVML does. Every
// limit set is recorded: fake_nvml_power_limit(gpu) and fake_nvml_power_limit_sets() (not
// NVML's) give the limit now and the ones set, in order. GPU 0 draws 412.345 W or its limit,
// whichever is lower.
// Events follow NVML's rules: only types a GPU supports can be registered (GPU 0, without
// ECC, has no double-bit ECC events), and only what happens after registering is delivered.
// fake_nvml_open_event_sets() (not NVML's) says how many event sets are not freed yet.
// Built with FAKE_NVML_MINIMAL, it exports only the required functions and memory info, like
// an old driver.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "telemetry/nvml_api.h"

// The fake is defined with the monitor's own declarations, so each function has exactly the
// type the monitor calls it through (clang's -fsanitize=function checks that).
struct powerhouse::telemetry::nvml::DeviceOpaque {
    int index;
};
// An event set: the event types registered per GPU, and the events not delivered yet.
struct powerhouse::telemetry::nvml::EventSetOpaque {
    unsigned long long registered[2] = {0, 0};
    std::deque<powerhouse::telemetry::nvml::EventData> queue;
};

namespace {

namespace nvml = powerhouse::telemetry::nvml;
using Device = nvml::Device;
using Pci = nvml::PciInfo;
using Utilization = nvml::Utilization;
using Memory = nvml::Memory;
using Process = nvml::ProcessInfo;

constexpr unsigned long long kXidEvent = nvml::kEventTypeXidCriticalError;
constexpr unsigned long long kDbeEvent = nvml::kEventTypeDoubleBitEccError;

// An event GPU 1 raises at a given memory reading.
struct PlannedEvent {
    unsigned long long type;
    unsigned long long data;  // the Xid
    int at;
};

nvml::DeviceOpaque g_gpus[2] = {{0}, {1}};
std::vector<std::string> g_scenario;
int g_lost_after = -1;
int g_timeout_at = -1;
bool g_lost = false;  // GPU 1, once its memory reading said so
int g_memory_reads[2] = {0, 0};
std::vector<PlannedEvent> g_planned;
nvml::EventSetOpaque g_set;  // one event set is all the monitor makes
int g_open_sets = 0;

constexpr unsigned int kDefaultLimit[2] = {450000, 300000};
constexpr unsigned int kMinLimit[2] = {150000, 100000};
constexpr unsigned int kMaxLimit[2] = {600000, 300000};
unsigned int g_limit[2] = {kDefaultLimit[0], kDefaultLimit[1]};
std::vector<unsigned int> g_limit_sets[2];  // every limit set, in order
int g_set_calls = 0;
int g_set_fails_at = -1;

int index_of(Device d) { return d == nullptr ? -1 : d->index; }
bool has(const char* item) {
    for (const std::string& s : g_scenario) {
        if (s == item) return true;
    }
    return false;
}
bool unsupported() { return has("unsupported"); }
bool gone(Device d) { return index_of(d) == 1 && g_lost; }

// A query's answer: `value`, unless the GPU is gone.
template <class T>
int answer(Device d, T* out, T value) {
    if (gone(d)) return 15;
    *out = value;
    return 0;
}

// Events raised at GPU i's n-th memory reading join the set if it listens for them.
void raise_events(int i, int n) {
    if (i != 1) return;
    for (const PlannedEvent& p : g_planned) {
        if (p.at == n && (g_set.registered[1] & p.type) != 0) {
            g_set.queue.push_back({&g_gpus[1], p.type, p.data, 0xFFFFFFFFu, 0xFFFFFFFFu});
        }
    }
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
    const char* s = std::getenv("FAKE_NVML_SCENARIO");
    const std::string scenario = s != nullptr ? s : "normal";
    g_scenario.clear();
    for (size_t at = 0; at <= scenario.size();) {
        const size_t end = std::min(scenario.find(',', at), scenario.size());
        g_scenario.push_back(scenario.substr(at, end - at));
        at = end + 1;
    }
    g_lost_after = g_timeout_at = -1;
    g_lost = false;
    g_memory_reads[0] = g_memory_reads[1] = 0;
    g_planned.clear();
    g_set = {};
    g_limit[0] = kDefaultLimit[0];
    g_limit[1] = kDefaultLimit[1];
    g_limit_sets[0].clear();
    g_limit_sets[1].clear();
    g_set_calls = 0;
    g_set_fails_at = -1;
    for (const std::string& item : g_scenario) {
        if (item.rfind("lost_after:", 0) == 0) g_lost_after = std::atoi(item.c_str() + 11);
        if (item.rfind("xid:", 0) == 0 && item.find('@') != std::string::npos) {
            g_planned.push_back({kXidEvent, std::strtoull(item.c_str() + 4, nullptr, 10),
                                 std::atoi(item.c_str() + item.find('@') + 1)});
        }
        if (item.rfind("timeout@", 0) == 0) g_timeout_at = std::atoi(item.c_str() + 8);
        if (item.rfind("dbe@", 0) == 0) g_planned.push_back({kDbeEvent, 0, std::atoi(item.c_str() + 4)});
        if (item.rfind("set_fails@", 0) == 0) g_set_fails_at = std::atoi(item.c_str() + 10);
    }
    return has("no_driver") ? 9 : 0;
}
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int r) {
    switch (r) {
        case 2: return "Invalid Argument";
        case 3: return "Not Supported";
        case 4: return "Insufficient Permissions";
        case 9: return "Driver Not Loaded";
        case 10: return "Timeout";
        case 15: return "GPU is lost";
        default: return "Unknown Error";
    }
}
int nvmlDeviceGetCount_v2(unsigned int* n) {
    *n = has("no_gpus") ? 0 : 2;
    return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, Device* d) {
    if (i > 1) return 2;
    *d = &g_gpus[i];
    return 0;
}
// The memory the driver reserves for itself: the first call counts it as used, the v2
// call (which the full fake has, as drivers from 510 on) apart, as nvidia-smi shows it.
#ifdef FAKE_NVML_MINIMAL
constexpr unsigned long long kReserved = 0;
#else
constexpr unsigned long long kReserved = 512ull << 20;
#endif
int nvmlDeviceGetMemoryInfo(Device d, Memory* m) {
    const int i = index_of(d);
    if (gone(d)) return 15;
    const int n = ++g_memory_reads[i];
    if (i == 1 && g_lost_after >= 0 && n > g_lost_after) g_lost = true;
    raise_events(i, n);  // before answering: the driver notices the fault as the GPU goes
    if (gone(d)) return 15;
    if (i == 1 && n == g_timeout_at) return 10;
    m->total = 24ull << 30;
    m->used = ((i == 0 ? 3ull : 1ull) << 30) + kReserved;
    m->free = m->total - m->used;
    return 0;
}

#ifndef FAKE_NVML_MINIMAL
int nvmlDeviceGetMemoryInfo_v2(Device d, nvml::MemoryV2* m) {
    if (gone(d)) return 15;
    if (m->version != nvml::kMemoryV2Version) return 25;  // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    Memory v1{};
    if (const int r = nvmlDeviceGetMemoryInfo(d, &v1); r != 0) return r;
    m->total = v1.total;
    m->reserved = kReserved;
    m->used = v1.used - kReserved;
    m->free = v1.free;
    return 0;
}
#endif

#ifndef FAKE_NVML_MINIMAL
int nvmlSystemGetDriverVersion(char* text, unsigned int size) {
    std::strncpy(text, "575.51.03", size);
    return 0;
}
int nvmlDeviceGetName(Device d, char* text, unsigned int size) {
    if (gone(d)) return 15;
    std::strncpy(text, index_of(d) == 0 ? "NVIDIA GeForce RTX 4090" : "NVIDIA RTX A6000", size);
    return 0;
}
int nvmlDeviceGetUUID(Device d, char* text, unsigned int size) {
    if (gone(d)) return 15;
    std::strncpy(text, index_of(d) == 0 ? "GPU-00000000-1111-2222-3333-444444444444"
                                        : "GPU-55555555-6666-7777-8888-999999999999", size);
    return 0;
}
int nvmlDeviceGetPciInfo_v3(Device d, Pci* p) {
    if (gone(d)) return 15;
    std::memset(p, 0, sizeof *p);
    std::strcpy(p->bus_id, index_of(d) == 0 ? "00000000:01:00.0" : "00000000:41:00.0");
    p->bus = index_of(d) == 0 ? 1 : 0x41;
    return 0;
}
int nvmlDeviceGetUtilizationRates(Device d, Utilization* u) {
    if (gone(d)) return 15;
    u->gpu = index_of(d) == 0 ? 97 : 3;
    u->memory = index_of(d) == 0 ? 61 : 1;
    return 0;
}
int nvmlDeviceGetTemperature(Device d, unsigned int sensor, unsigned int* t) {
    if (gone(d)) return 15;
    if (unsupported()) return 3;
    if (sensor != 0) return 2;
    *t = index_of(d) == 0 ? 71 : 38;
    return 0;
}
int nvmlDeviceGetPowerUsage(Device d, unsigned int* mw) {
    if (gone(d)) return 15;
    if (unsupported()) return 3;
    *mw = index_of(d) == 0 ? std::min(412345u, g_limit[0]) : 21000;
    return 0;
}
int nvmlDeviceGetEnforcedPowerLimit(Device d, unsigned int* mw) {
    return index_of(d) < 0 ? 2 : answer(d, mw, g_limit[index_of(d)]);
}
int nvmlDeviceGetPowerManagementLimit(Device d, unsigned int* mw) {
    return index_of(d) < 0 ? 2 : answer(d, mw, g_limit[index_of(d)]);
}
int nvmlDeviceGetPowerManagementDefaultLimit(Device d, unsigned int* mw) {
    return index_of(d) < 0 ? 2 : answer(d, mw, kDefaultLimit[index_of(d)]);
}
int nvmlDeviceGetPowerManagementLimitConstraints(Device d, unsigned int* min_mw, unsigned int* max_mw) {
    const int i = index_of(d);
    if (i < 0 || min_mw == nullptr || max_mw == nullptr) return 2;
    if (gone(d)) return 15;
    if (has("power_range_hidden")) return 3;
    *min_mw = kMinLimit[i];
    *max_mw = kMaxLimit[i];
    return 0;
}
// Checked in NVML's order as far as a caller can tell: the GPU, the right, the board, the range.
int nvmlDeviceSetPowerManagementLimit(Device d, unsigned int mw) {
    const int i = index_of(d);
    if (i < 0) return 2;
    ++g_set_calls;
    if (gone(d)) return 15;
    if (has("power_denied")) return 4;
    if (i == 1 && has("power_unsupported")) return 3;
    if (mw < kMinLimit[i] || mw > kMaxLimit[i]) return 2;
    if (g_set_calls == g_set_fails_at) return 999;
    g_limit[i] = mw;
    g_limit_sets[i].push_back(mw);
    return 0;
}
int nvmlDeviceGetFanSpeed(Device d, unsigned int* f) {
    if (gone(d)) return 15;
    if (unsupported()) return 3;
    *f = index_of(d) == 0 ? 64 : 30;
    return 0;
}
int nvmlDeviceGetClockInfo(Device d, unsigned int type, unsigned int* mhz) {
    if (gone(d)) return 15;
    if (type == 1) *mhz = index_of(d) == 0 ? 2520 : 210;
    else if (type == 2) *mhz = index_of(d) == 0 ? 10501 : 405;
    else return 2;
    return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(Device d, unsigned long long* r) {
    return answer(d, r, index_of(d) == 0 ? 0x4ull : 0x1ull);  // power cap; idle
}
int nvmlDeviceGetTotalEnergyConsumption(Device d, unsigned long long* mj) {
    return answer(d, mj, index_of(d) == 0 ? 123456789ull : 1000ull);
}
int nvmlDeviceGetCurrPcieLinkGeneration(Device d, unsigned int* v) { return answer(d, v, 4u); }
int nvmlDeviceGetCurrPcieLinkWidth(Device d, unsigned int* v) { return answer(d, v, index_of(d) == 0 ? 16u : 8u); }
int nvmlDeviceGetMaxPcieLinkGeneration(Device d, unsigned int* v) { return answer(d, v, 4u); }
int nvmlDeviceGetMaxPcieLinkWidth(Device d, unsigned int* v) { return answer(d, v, 16u); }
int nvmlDeviceGetEccMode(Device d, unsigned int* current, unsigned int* pending) {
    if (gone(d)) return 15;
    if (index_of(d) == 0) return 3;  // consumer card: no ECC
    *current = *pending = 1;
    return 0;
}
int nvmlDeviceGetTotalEccErrors(Device d, unsigned int, unsigned int, unsigned long long* n) {
    if (gone(d)) return 15;
    if (index_of(d) == 0) return 3;
    *n = 2;
    return 0;
}
int nvmlDeviceGetRetiredPagesPendingStatus(Device d, unsigned int* pending) {
    if (gone(d)) return 15;
    if (index_of(d) == 0) return 3;
    *pending = 0;
    return 0;
}
int nvmlDeviceGetComputeRunningProcesses_v3(Device d, unsigned int* n, Process* list) {
    if (gone(d)) return 15;
    // GPU 0 runs this process (2 GiB) and another one; GPU 1 runs nothing.
    const unsigned int have = index_of(d) == 0 ? 2 : 0;
    if (*n < have) {
        *n = have;
        return 7;
    }
    *n = have;
    if (have == 2) {
        list[0] = {static_cast<unsigned int>(getpid()), 2ull << 30, 0, 0};
        list[1] = {1, 5ull << 30, 0, 0};
    }
    return 0;
}
// Two NVLinks between the GPUs (links 0 and 1 of each), link 2 active towards an unknown device.
int nvmlDeviceGetNvLinkState(Device d, unsigned int link, unsigned int* active) {
    if (gone(d)) return 15;
    if (link >= 18) return 2;
    *active = link <= 2 ? 1 : 0;
    return 0;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(Device d, unsigned int link, Pci* p) {
    if (gone(d)) return 15;
    std::memset(p, 0, sizeof *p);
    if (link == 2) std::strcpy(p->bus_id, "00000000:C1:00.0");  // an NVSwitch
    else std::strcpy(p->bus_id, index_of(d) == 0 ? "00000000:41:00.0" : "00000000:01:00.0");
    return 0;
}
int nvmlEventSetCreate(nvml::EventSet* set) {
    if (set == nullptr) return 2;
    *set = &g_set;
    ++g_open_sets;
    return 0;
}
int nvmlEventSetFree(nvml::EventSet set) {
    if (set != &g_set) return 2;
    --g_open_sets;
    return 0;
}
// GPU 0 has no ECC, so no double-bit ECC events; both have P-state events, which the
// monitor does not ask for.
int nvmlDeviceGetSupportedEventTypes(Device d, unsigned long long* types) {
    if (gone(d)) return 15;
    *types = kXidEvent | 0x4 | (index_of(d) == 1 ? kDbeEvent : 0);
    return 0;
}
int nvmlDeviceRegisterEvents(Device d, unsigned long long types, nvml::EventSet set) {
    if (set != &g_set || index_of(d) < 0) return 2;
    if (gone(d)) return 15;
    unsigned long long supported = 0;
    nvmlDeviceGetSupportedEventTypes(d, &supported);
    // As NVML: one unsupported type and none of them are registered.
    if (has("events_unsupported") || (types & ~supported) != 0) return 3;
    set->registered[index_of(d)] |= types;
    return 0;
}
int nvmlEventSetWait_v2(nvml::EventSet set, nvml::EventData* data, unsigned int) {
    if (set != &g_set || data == nullptr) return 2;
    if (set->queue.empty()) return 10;  // timeout
    *data = set->queue.front();
    set->queue.pop_front();
    return 0;
}
#endif

// Not NVML's: for the tests, the event sets created and not freed.
int fake_nvml_open_event_sets() {
    return g_open_sets;
}
// Not NVML's: GPU `gpu`'s power limit now (mW).
unsigned int fake_nvml_power_limit(int gpu) {
    return gpu == 0 || gpu == 1 ? g_limit[gpu] : 0;
}
// Not NVML's: how many limits were set on GPU `gpu` since nvmlInit_v2, the first `max` of
// them (mW, in order) copied to `out`.
int fake_nvml_power_limit_sets(int gpu, unsigned int* out, int max) {
    if (gpu != 0 && gpu != 1) return 0;
    const std::vector<unsigned int>& sets = g_limit_sets[gpu];
    for (int k = 0; k < max && k < static_cast<int>(sets.size()); ++k) out[k] = sets[static_cast<size_t>(k)];
    return static_cast<int>(sets.size());
}
}
