// A stand-in for libnvidia-ml.so.1, built by the tests and loaded by the monitor in its
// place. It implements the NVML functions the monitor uses, with the real signatures and
// return codes, for two GPUs joined by NVLink. FAKE_NVML_SCENARIO, read by nvmlInit_v2,
// picks what goes wrong:
//   normal          every reading present
//   no_driver       nvmlInit_v2 answers "driver not loaded"
//   no_gpus         the driver lists none
//   unsupported     temperature, power and fan answer "not supported"
//   lost_after:N    GPU 1 answers "GPU is lost" from its (N+1)-th memory reading on
// Built with FAKE_NVML_MINIMAL, it exports only the required functions and memory info, like
// an old driver.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "telemetry/nvml_api.h"

// The fake is defined with the monitor's own declarations, so each function has exactly the
// type the monitor calls it through (clang's -fsanitize=function checks that).
struct powerhouse::telemetry::nvml::DeviceOpaque {
    int index;
};

namespace {

namespace nvml = powerhouse::telemetry::nvml;
using Device = nvml::Device;
using Pci = nvml::PciInfo;
using Utilization = nvml::Utilization;
using Memory = nvml::Memory;
using Process = nvml::ProcessInfo;

nvml::DeviceOpaque g_gpus[2] = {{0}, {1}};
std::string g_scenario;
int g_lost_after = -1;
int g_memory_reads[2] = {0, 0};

int index_of(Device d) { return d == nullptr ? -1 : d->index; }
bool unsupported() { return g_scenario == "unsupported"; }

}  // namespace

extern "C" {

int nvmlInit_v2() {
    const char* s = std::getenv("FAKE_NVML_SCENARIO");
    g_scenario = s != nullptr ? s : "normal";
    g_lost_after = -1;
    g_memory_reads[0] = g_memory_reads[1] = 0;
    if (g_scenario.rfind("lost_after:", 0) == 0) g_lost_after = std::atoi(g_scenario.c_str() + 11);
    return g_scenario == "no_driver" ? 9 : 0;
}
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int r) {
    switch (r) {
        case 3: return "Not Supported";
        case 9: return "Driver Not Loaded";
        case 15: return "GPU is lost";
        default: return "Unknown Error";
    }
}
int nvmlDeviceGetCount_v2(unsigned int* n) {
    *n = g_scenario == "no_gpus" ? 0 : 2;
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
    if (i == 1 && g_lost_after >= 0 && g_memory_reads[1] >= g_lost_after) return 15;
    ++g_memory_reads[i];
    m->total = 24ull << 30;
    m->used = ((i == 0 ? 3ull : 1ull) << 30) + kReserved;
    m->free = m->total - m->used;
    return 0;
}

#ifndef FAKE_NVML_MINIMAL
int nvmlDeviceGetMemoryInfo_v2(Device d, nvml::MemoryV2* m) {
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
    std::strncpy(text, index_of(d) == 0 ? "NVIDIA GeForce RTX 4090" : "NVIDIA RTX A6000", size);
    return 0;
}
int nvmlDeviceGetUUID(Device d, char* text, unsigned int size) {
    std::strncpy(text, index_of(d) == 0 ? "GPU-00000000-1111-2222-3333-444444444444"
                                        : "GPU-55555555-6666-7777-8888-999999999999", size);
    return 0;
}
int nvmlDeviceGetPciInfo_v3(Device d, Pci* p) {
    std::memset(p, 0, sizeof *p);
    std::strcpy(p->bus_id, index_of(d) == 0 ? "00000000:01:00.0" : "00000000:41:00.0");
    p->bus = index_of(d) == 0 ? 1 : 0x41;
    return 0;
}
int nvmlDeviceGetUtilizationRates(Device d, Utilization* u) {
    u->gpu = index_of(d) == 0 ? 97 : 3;
    u->memory = index_of(d) == 0 ? 61 : 1;
    return 0;
}
int nvmlDeviceGetTemperature(Device d, unsigned int sensor, unsigned int* t) {
    if (unsupported()) return 3;
    if (sensor != 0) return 2;
    *t = index_of(d) == 0 ? 71 : 38;
    return 0;
}
int nvmlDeviceGetPowerUsage(Device d, unsigned int* mw) {
    if (unsupported()) return 3;
    *mw = index_of(d) == 0 ? 412345 : 21000;
    return 0;
}
int nvmlDeviceGetEnforcedPowerLimit(Device d, unsigned int* mw) {
    *mw = index_of(d) == 0 ? 450000 : 300000;
    return 0;
}
int nvmlDeviceGetFanSpeed(Device d, unsigned int* f) {
    if (unsupported()) return 3;
    *f = index_of(d) == 0 ? 64 : 30;
    return 0;
}
int nvmlDeviceGetClockInfo(Device d, unsigned int type, unsigned int* mhz) {
    if (type == 1) *mhz = index_of(d) == 0 ? 2520 : 210;
    else if (type == 2) *mhz = index_of(d) == 0 ? 10501 : 405;
    else return 2;
    return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(Device d, unsigned long long* r) {
    *r = index_of(d) == 0 ? 0x4ull : 0x1ull;  // power cap; idle
    return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(Device d, unsigned long long* mj) {
    *mj = index_of(d) == 0 ? 123456789ull : 1000ull;
    return 0;
}
int nvmlDeviceGetCurrPcieLinkGeneration(Device, unsigned int* v) { *v = 4; return 0; }
int nvmlDeviceGetCurrPcieLinkWidth(Device d, unsigned int* v) { *v = index_of(d) == 0 ? 16 : 8; return 0; }
int nvmlDeviceGetMaxPcieLinkGeneration(Device, unsigned int* v) { *v = 4; return 0; }
int nvmlDeviceGetMaxPcieLinkWidth(Device, unsigned int* v) { *v = 16; return 0; }
int nvmlDeviceGetEccMode(Device d, unsigned int* current, unsigned int* pending) {
    if (index_of(d) == 0) return 3;  // consumer card: no ECC
    *current = *pending = 1;
    return 0;
}
int nvmlDeviceGetTotalEccErrors(Device d, unsigned int, unsigned int, unsigned long long* n) {
    if (index_of(d) == 0) return 3;
    *n = 2;
    return 0;
}
int nvmlDeviceGetRetiredPagesPendingStatus(Device d, unsigned int* pending) {
    if (index_of(d) == 0) return 3;
    *pending = 0;
    return 0;
}
int nvmlDeviceGetComputeRunningProcesses_v3(Device d, unsigned int* n, Process* list) {
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
int nvmlDeviceGetNvLinkState(Device, unsigned int link, unsigned int* active) {
    if (link >= 18) return 2;
    *active = link <= 2 ? 1 : 0;
    return 0;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(Device d, unsigned int link, Pci* p) {
    std::memset(p, 0, sizeof *p);
    if (link == 2) std::strcpy(p->bus_id, "00000000:C1:00.0");  // an NVSwitch
    else std::strcpy(p->bus_id, index_of(d) == 0 ? "00000000:41:00.0" : "00000000:01:00.0");
    return 0;
}
#endif
}
