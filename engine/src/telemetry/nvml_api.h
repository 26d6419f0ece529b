// The part of NVML's C interface that Powerhouse uses, declared here from NVIDIA's public
// API reference so that building needs neither the header nor the library: everything is
// looked up with dlsym at run time. Layouts and values are NVML's (stable across drivers).
#pragma once

#include <cstdint>

namespace powerhouse::telemetry::nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorTimeout = 10;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorUnknown = 999;

using Device = struct DeviceOpaque*;  // nvmlDevice_t

struct PciInfo {  // nvmlPciInfo_t
    char bus_id_legacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pci_device_id;
    unsigned int pci_subsystem_id;
    char bus_id[32];
};

struct Utilization {  // nvmlUtilization_t
    unsigned int gpu;
    unsigned int memory;
};

struct Memory {  // nvmlMemory_t: `used` counts the driver's reserved memory too
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};

// nvmlMemory_v2_t (drivers from 510 on): `used` without the memory the driver reserves for
// itself, which is what nvidia-smi shows as "used"; `free` is total - reserved - used.
struct MemoryV2 {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
};
// NVML_STRUCT_VERSION(Memory, 2): the struct's size, and the version in the top byte.
inline constexpr unsigned int kMemoryV2Version = static_cast<unsigned int>(sizeof(MemoryV2)) | (2u << 24);

struct ProcessInfo {  // nvmlProcessInfo_t, as filled by nvmlDeviceGetComputeRunningProcesses_v3
    unsigned int pid;
    unsigned long long used_gpu_memory;
    unsigned int gpu_instance_id;
    unsigned int compute_instance_id;
};

inline constexpr unsigned int kTemperatureGpu = 0;    // NVML_TEMPERATURE_GPU
inline constexpr unsigned int kClockSm = 1;           // NVML_CLOCK_SM
inline constexpr unsigned int kClockMem = 2;          // NVML_CLOCK_MEM
inline constexpr unsigned int kNvlinkMaxLinks = 18;   // NVML_NVLINK_MAX_LINKS
inline constexpr unsigned int kEnableStateEnabled = 1;
inline constexpr unsigned int kMemoryErrorUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
inline constexpr unsigned int kVolatileEcc = 0;             // NVML_VOLATILE_ECC

// Events (nvml.h's "Event Handling Methods"; Linux only).
using EventSet = struct EventSetOpaque*;                                // nvmlEventSet_t
inline constexpr unsigned long long kEventTypeDoubleBitEccError = 0x2;  // nvmlEventTypeDoubleBitEccError
inline constexpr unsigned long long kEventTypeXidCriticalError = 0x8;   // nvmlEventTypeXidCriticalError

struct EventData {  // nvmlEventData_t, as filled by nvmlEventSetWait_v2 (v1 lacks the instance ids)
    Device device;
    unsigned long long event_type;
    unsigned long long event_data;  // for kEventTypeXidCriticalError the Xid (999: one without a name); else 0
    unsigned int gpu_instance_id;   // MIG: 0xFFFFFFFF when not attributable to an instance
    unsigned int compute_instance_id;
};
static_assert(sizeof(EventData) == 32, "nvmlEventData_t on a 64-bit Linux");

extern "C" {
using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using SystemGetDriverVersionFn = Return (*)(char*, unsigned int);
using DeviceGetCountFn = Return (*)(unsigned int*);
using DeviceGetHandleByIndexFn = Return (*)(unsigned int, Device*);
using DeviceGetStringFn = Return (*)(Device, char*, unsigned int);  // name, UUID
using DeviceGetPciInfoFn = Return (*)(Device, PciInfo*);
using DeviceGetUtilizationRatesFn = Return (*)(Device, Utilization*);
using DeviceGetMemoryInfoFn = Return (*)(Device, Memory*);
using DeviceGetMemoryInfoV2Fn = Return (*)(Device, MemoryV2*);
using DeviceGetTemperatureFn = Return (*)(Device, unsigned int, unsigned int*);
using DeviceGetUintFn = Return (*)(Device, unsigned int*);  // power, limits, fan, PCIe gen/width
// nvmlDeviceGetPowerManagementLimitConstraints: the range a power limit may be set in (mW).
using DeviceGetUintPairFn = Return (*)(Device, unsigned int*, unsigned int*);
// nvmlDeviceSetPowerManagementLimit (mW). Root only; INVALID_ARGUMENT for a limit out of range.
using DeviceSetUintFn = Return (*)(Device, unsigned int);
using DeviceGetClockInfoFn = Return (*)(Device, unsigned int, unsigned int*);
using DeviceGetUllFn = Return (*)(Device, unsigned long long*);  // throttle reasons, energy
using DeviceGetEccModeFn = Return (*)(Device, unsigned int*, unsigned int*);
using DeviceGetTotalEccErrorsFn = Return (*)(Device, unsigned int, unsigned int, unsigned long long*);
using DeviceGetRetiredPagesPendingStatusFn = Return (*)(Device, unsigned int*);
using DeviceGetProcessesFn = Return (*)(Device, unsigned int*, ProcessInfo*);
using DeviceGetNvLinkStateFn = Return (*)(Device, unsigned int, unsigned int*);
using DeviceGetNvLinkRemotePciInfoFn = Return (*)(Device, unsigned int, PciInfo*);
using EventSetCreateFn = Return (*)(EventSet*);
using EventSetFreeFn = Return (*)(EventSet);
using DeviceRegisterEventsFn = Return (*)(Device, unsigned long long, EventSet);
using DeviceGetSupportedEventTypesFn = Return (*)(Device, unsigned long long*);
using EventSetWaitFn = Return (*)(EventSet, EventData*, unsigned int);  // nvmlEventSetWait_v2
}

}  // namespace powerhouse::telemetry::nvml
