// GPU telemetry: what each NVIDIA GPU is doing (load, memory, temperature, power, clocks,
// PCIe/NVLink, throttling, ECC) and how much of it this process uses, sampled on a thread
// of its own into a history per GPU.
//
// Sources:
//   - NVML, loaded at run time (libnvidia-ml.so.1 via dlopen, with Powerhouse's own
//     declarations of the functions it uses), so nothing NVIDIA is needed to build or to
//     start: without a driver the monitor reports a state ("no NVIDIA driver found"), never
//     fails. A function the installed driver lacks leaves its field empty; a GPU that stops
//     answering is marked as not responding, and the others go on.
//   - Simulated GPUs, from a spec like "RTX 4090:24;RTX 4090:24;A100:80" (name:GiB, see
//     POWERHOUSE_SIMULATE_GPUS), for tests, demos and screenshots on machines without GPUs:
//     plausible, moving readings that follow the activity the engine reports. Every
//     simulated reading says so (GpuInfo::simulated, TelemetrySnapshot::simulated).
//     A GPU can be told to fail, for end-to-end tests of what the app and engine do then:
//     NAME:GiB[:xid=CODE@N]...[:lost@N], N counting that GPU's samples from 1.
//       xid=CODE@N  its N-th sample carries Xid CODE; xid=79 ("fell off the bus") also
//                   loses the GPU from that sample on, as a real one is lost then
//       lost@N      from its N-th sample on it answers "GPU is lost"
//     "RTX 4090:24;RTX 4090:24:xid=79@3": GPU 1 reports Xid 79 and is lost from its 3rd
//     sample on. "A100:80:xid=48@2" reports a double-bit ECC error and goes on answering.
//     Setting a simulated GPU's power limit can be refused as a real one refuses it:
//       power=denied  as without root (the answer gives the nvidia-smi command)
//       power=fixed   as a board that does not allow it
//
// GPU failures: NVML's critical Xid events (and double-bit ECC events, reported as Xid 48)
// are collected every sample, without waiting. A GPU that NVML answers "GPU is lost" for
// is `lost` for the rest of the run; gpu_failed() says whether its work must move (lost, or
// a fatal Xid seen), gpu_failure_text() says why in a line. Drivers or GPUs without the
// event functions still sample; TelemetrySnapshot::xid_status says that Xids are not seen.
//
// GPUs are identified by UUID. NVML numbers them in PCI order, which CUDA does not by
// default; find_by_pci_bus_id() maps a CUDA device (cudaDeviceGetPCIBusId) to its NVML GPU.
//
// Power limits (issue 24): GpuMonitor reads each GPU's limit, default and range, and sets a
// limit through NVML where Powerhouse has the right to (root). Every limit it changes is
// recorded with the value before, and put back by restore_power_limit(s) or, unless the
// caller asked to keep them, when the monitor is destroyed: the app never leaves a limit
// changed silently. Simulated GPUs have limits too, and their power draw, temperature and
// a speed factor (GpuSample::simulated_speed) follow them. powerhouse/power.h builds the
// efficiency sweep on this; powerhouse/costs.h turns watts and tokens into money.
//
// Thread-safety: GpuMonitor's methods may be called from any thread; subscribers are called
// on the sampler thread (or the caller's, for sample_now()) and must be quick. Reading and
// setting power limits is serialized with sampling (one call into NVML at a time).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/result.h"

namespace powerhouse {

// What does not change while the program runs.
struct GpuInfo {
    uint32_t index = 0;       // NVML's order (PCI order)
    std::string uuid;         // "GPU-8f6d..."; the identity settings are stored under
    std::string name;         // "NVIDIA GeForce RTX 4090"
    std::string pci_bus_id;   // "0000:41:00.0" (normalized: see normalize_pci_bus_id)
    uint64_t memory_total = 0;
    std::optional<uint32_t> pcie_generation, pcie_width;          // the link as it runs now
    std::optional<uint32_t> pcie_max_generation, pcie_max_width;  // what it could run at
    // The power limit the driver enforces, as read when the monitor opened and again after
    // each change the monitor makes (a change made elsewhere shows in power_limits()).
    std::optional<double> power_limit_w;
    std::optional<bool> ecc_enabled;
    bool xid_events_watched = false;  // its Xid events reach the monitor (else see xid_status)
    bool simulated = false;
};

// An Xid: an error the NVIDIA driver reported for a GPU (NVML's "critical Xid" event).
struct XidEvent {
    uint32_t xid = 0;         // NVIDIA's code: 79 fell off the bus, 48 double-bit ECC error, ...
    double time = 0;          // the time of the sample that saw it (NVML gives none of its own)
    std::string description;  // xid_description(xid)
    bool fatal = false;       // xid_is_fatal(xid)
};

// One reading of one GPU. Empty fields: the GPU or driver does not report them.
struct GpuSample {
    double time = 0;  // seconds since the monitor started
    bool responding = true;
    std::string problem;  // why not responding: "GPU 1 not responding: GPU is lost (NVML error 15)"
    std::optional<uint32_t> gpu_utilization;     // percent of time a kernel ran
    std::optional<uint32_t> memory_utilization;  // percent of time memory was read or written
    std::optional<uint64_t> memory_used, memory_free;
    std::optional<uint32_t> temperature_c;
    std::optional<double> power_w;
    std::optional<uint32_t> sm_clock_mhz, memory_clock_mhz;
    std::optional<uint32_t> fan_percent;
    std::optional<uint64_t> process_memory;    // used by this process
    std::optional<uint64_t> throttle_reasons;  // NVML's bit mask: see throttle_reason_names()
    std::optional<uint64_t> ecc_uncorrected;   // volatile uncorrected ECC errors
    std::optional<bool> retired_pages_pending;  // pages waiting for retirement (reset needed)
    std::optional<double> energy_j;             // the GPU's energy counter, where it has one
    // Simulated GPUs only: the share of full speed their power limit leaves at the load the
    // engine reports (1: not slowed). A model's figure, never a measurement: see
    // simulated_source.cpp. Real GPUs leave it empty.
    std::optional<double> simulated_speed;

    // The driver answered "GPU is lost" (NVML_ERROR_GPU_IS_LOST: fallen off the bus, or
    // otherwise gone until a reset). Unlike !responding alone, which a query that timed out
    // once also gives, it stays set for the rest of the run and the GPU is no longer asked.
    bool lost = false;
    std::vector<XidEvent> xid_events;        // seen since the previous sample, oldest first
    std::optional<XidEvent> last_xid;        // the latest Xid since the monitor started
    std::optional<XidEvent> last_fatal_xid;  // the latest fatal one: the GPU is not to be trusted
};

// NVLink connections between two GPUs (pairs not listed talk over PCIe).
struct GpuLink {
    uint32_t a = 0, b = 0;  // GpuInfo::index, a < b
    uint32_t nvlinks = 0;   // active links between them
};

struct TelemetrySnapshot {
    std::string source;  // "NVML (driver 575.51.03)", "simulated"
    std::string status;  // empty when GPUs were read; else why not ("no NVIDIA driver found")
    // Empty when every GPU's Xid events are watched (or there are no GPUs); else, once for
    // all of them, why not: "Xid events not available: the NVML library has no event functions".
    std::string xid_status;
    bool simulated = false;
    std::vector<GpuInfo> gpus;
    std::vector<GpuSample> latest;  // one per GPU, same order
    std::vector<GpuLink> links;
};

// Names of the bits of GpuSample::throttle_reasons: "idle", "power cap", "thermal", ...
std::vector<std::string> throttle_reason_names(uint64_t mask);

// What an Xid means, in a few words for a banner ("fell off the bus"), after NVIDIA's Xid
// catalogue; codes it does not list get "an error Powerhouse does not know".
std::string xid_description(uint32_t xid);
// Whether, after this Xid, the GPU or the context on it can no longer be trusted and the
// work on it must move (79 fell off the bus, 48 double-bit ECC, 31 MMU fault, ...), as
// opposed to reports the work survives (63 row remapping, 92 high corrected-error rate,
// 94 contained ECC error). Unknown codes are not fatal: a lost GPU is caught by `lost`.
bool xid_is_fatal(uint32_t xid);

// The GPU is lost or had a fatal Xid: what runs on it must move elsewhere.
bool gpu_failed(const GpuSample& sample);
// Why, in a line ("GPU 1 stopped answering: Xid 79, fell off the bus"); empty when
// gpu_failed() is false. `gpu` is GpuInfo::index.
std::string gpu_failure_text(uint32_t gpu, const GpuSample& sample);

// "00000000:41:00.0", "0000:41:00.0" and "0000:41:00.0 " all become "0000:41:00.0".
std::string normalize_pci_bus_id(std::string_view id);

// The GPU with that PCI bus id (any spelling), if any.
std::optional<uint32_t> find_by_pci_bus_id(const TelemetrySnapshot& snapshot, std::string_view pci_bus_id);

// A GPU's power limits in watts (NVML counts milliwatts). Empty: the GPU or driver does not say.
struct PowerLimits {
    uint32_t gpu = 0;                     // GpuInfo::index (NVML's and nvidia-smi's -i)
    std::optional<double> current_w;      // the limit set now (what setting one changes)
    std::optional<double> enforced_w;     // what the driver enforces, other limiters included
    std::optional<double> default_w;      // what the GPU boots with
    std::optional<double> min_w, max_w;   // the range a limit may be set in
    std::optional<double> changed_from_w; // Powerhouse changed it: the limit before its first change
    bool simulated = false;
};

// A limit Powerhouse changed and has not put back yet.
struct PowerLimitChange {
    uint32_t gpu = 0;  // GpuInfo::index
    std::string uuid;
    double before_w = 0;  // the limit before Powerhouse first changed it: what restoring sets
    double now_w = 0;     // the limit Powerhouse set last
};

// The command that sets a GPU's power limit by hand, for the user to run when Powerhouse
// may not: "sudo nvidia-smi -i 0 -pl 300" (`gpu` is NVML's index, which nvidia-smi's -i takes).
std::string nvidia_smi_power_limit_command(uint32_t gpu, double watts);

struct GpuMonitorOptions {
    std::chrono::milliseconds interval{1000};
    size_t history = 600;         // samples kept per GPU (10 minutes at 1 Hz)
    std::string simulate;         // simulated GPUs ("RTX 4090:24;A100:80"); empty: real ones
    std::filesystem::path nvml;   // the NVML library; empty: libnvidia-ml.so.1
    // Leave the power limits this monitor changed as they are when it is destroyed. By
    // default they are put back, so that quitting never leaves a GPU's limit changed unasked.
    bool keep_power_limits = false;
};

// POWERHOUSE_SIMULATE_GPUS and POWERHOUSE_NVML_LIBRARY applied to `options`.
GpuMonitorOptions options_from_environment(GpuMonitorOptions options = {});

class GpuMonitor {
public:
    // Opens the source (does not start sampling). Never fails: problems go to the status.
    explicit GpuMonitor(GpuMonitorOptions options = {});
    ~GpuMonitor();
    GpuMonitor(const GpuMonitor&) = delete;
    GpuMonitor& operator=(const GpuMonitor&) = delete;

    // The sampler thread: one sample every interval until stop() (or destruction).
    void start();
    void stop();

    // Takes a sample now, on the calling thread, and publishes it like the sampler does.
    TelemetrySnapshot sample_now();
    // The latest sample (empty readings before the first one).
    TelemetrySnapshot snapshot() const;
    // The samples of one GPU, oldest first (at most options.history).
    std::vector<GpuSample> history(uint32_t gpu) const;

    using Subscriber = std::function<void(const TelemetrySnapshot&)>;
    uint64_t subscribe(Subscriber subscriber);
    void unsubscribe(uint64_t id);

    // What the engine is doing on a GPU (0..1 busy, bytes allocated). Simulated GPUs follow
    // it; real ones ignore it.
    void report_activity(uint32_t gpu, float load, uint64_t memory_bytes);

    // Power limits. `gpu` is GpuInfo::index. Errors (each message says what is wrong and
    // what to do; the error codes let a caller tell them apart):
    //   io                no permission: changing a limit needs root; the message gives the
    //                     nvidia-smi command to run instead (nvidia_smi_power_limit_command)
    //   unsupported       the GPU does not allow setting its limit, or does not report it
    //   invalid_argument  no such GPU, or a limit outside the GPU's range (given in watts)
    //   device_failed     the GPU is lost (fallen off the bus, or gone until a reset)
    //   internal          the driver failed otherwise (its own words are quoted)
    Result<PowerLimits> power_limits(uint32_t gpu) const;
    // Sets the limit (watts, rounded to NVML's milliwatts) and records the one before, the
    // first time this GPU's limit is changed; setting it back to that value drops the
    // record. A limit outside the GPU's range is refused before the driver is asked.
    // Returns the limits as they are afterwards.
    Result<PowerLimits> set_power_limit(uint32_t gpu, double watts);
    // Puts one GPU's limit back to what it was before Powerhouse changed it (nothing to do
    // when it did not). On failure the record stays, for a later try or the destructor.
    Result<void> restore_power_limit(uint32_t gpu);
    // Every GPU's; tries them all, and the error names each one that failed.
    Result<void> restore_power_limits();
    // The limits changed and not put back, by GPU index.
    std::vector<PowerLimitChange> power_limit_changes() const;
    // GpuMonitorOptions::keep_power_limits, for a user who changes their mind while it runs.
    void keep_power_limits(bool keep);

    struct State;

private:
    std::shared_ptr<State> state_;
};

// Energy over a generation: the power of the GPUs it ran on, integrated over time.
class EnergyMeter {
public:
    // A reading of the total power (W) at `time` (seconds); readings must come in time order.
    void add(double time, double watts);
    double joules() const { return joules_; }
    double seconds() const { return have_last_ ? last_time_ - first_time_ : 0.0; }

private:
    double joules_ = 0, first_time_ = 0, last_time_ = 0, last_watts_ = 0;
    bool have_last_ = false;
};

// Electricity cost of a million tokens at `joules_per_token` and `price_per_kwh`.
double cost_per_million_tokens(double joules_per_token, double price_per_kwh);

}  // namespace powerhouse
