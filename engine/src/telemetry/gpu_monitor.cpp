#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "powerhouse/telemetry.h"
#include "telemetry/gpu_source.h"
#include "telemetry/power_limit_book.h"

namespace powerhouse {

std::vector<std::string> throttle_reason_names(uint64_t mask) {
    // NVML's clock event reason bits.
    static constexpr std::pair<uint64_t, const char*> names[] = {
        {0x1, "idle"},           {0x2, "application clocks"}, {0x4, "power cap"},
        {0x8, "hardware slowdown"}, {0x10, "sync boost"},     {0x20, "thermal (software)"},
        {0x40, "thermal (hardware)"}, {0x80, "power brake"},   {0x100, "display clocks"},
    };
    std::vector<std::string> out;
    uint64_t known = 0;
    for (const auto& [bit, name] : names) {
        known |= bit;
        if ((mask & bit) != 0) out.emplace_back(name);
    }
    if ((mask & ~known) != 0) out.push_back(fmt::format("other (0x{:x})", mask & ~known));
    return out;
}

namespace {

struct KnownXid {
    uint32_t xid;
    bool fatal;
    const char* description;
};

// After NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors), the codes a machine
// running CUDA work meets. Fatal: the catalogue's remedy is at least restarting the
// application (the CUDA context is dead) or resetting the GPU. Not fatal: the driver
// recorded something the running work survives, or an engine Powerhouse does not use.
constexpr KnownXid kKnownXids[] = {
    {8, true, "the GPU stopped processing (a channel timed out)"},
    {13, true, "the compute engine hit an exception"},
    {31, true, "memory page fault (an access to an unmapped address)"},
    {32, true, "corrupted command stream"},
    {38, true, "the driver's firmware failed"},
    {43, true, "the GPU stopped processing"},
    {44, true, "engine fault while switching contexts"},
    {45, true, "work cleaned up after an earlier fault"},
    {46, true, "the GPU stopped processing"},
    {48, true, "double-bit ECC error"},
    {61, false, "micro-controller warning"},
    {62, true, "micro-controller halted"},
    {63, false, "memory row marked for remapping (applied at the next reset)"},
    {64, false, "memory row remapping could not be recorded"},
    {68, false, "video decoder exception"},
    {69, true, "engine class error"},
    {74, true, "NVLink error"},
    {79, true, "fell off the bus"},
    {92, false, "many corrected (single-bit) ECC errors"},
    {94, false, "contained ECC error (only the program that met it was stopped)"},
    {95, true, "uncontained ECC error"},
    {109, true, "context switch timed out"},
    {119, true, "the GSP firmware stopped answering"},
    {120, true, "GSP firmware error"},
    {121, false, "corrected C2C link error"},
    {140, true, "unrecovered ECC error"},
    {143, true, "the GPU failed to initialise"},
    {154, true, "the GPU needs a reset or a reboot"},
    {999, false, "an error the driver could not name"},  // NVML's code for an Xid it does not know
};

const KnownXid* find_xid(uint32_t xid) {
    for (const KnownXid& k : kKnownXids) {
        if (k.xid == xid) return &k;
    }
    return nullptr;
}

}  // namespace

std::string xid_description(uint32_t xid) {
    const KnownXid* k = find_xid(xid);
    return k != nullptr ? k->description : "an error Powerhouse does not know";
}

bool xid_is_fatal(uint32_t xid) {
    const KnownXid* k = find_xid(xid);
    return k != nullptr && k->fatal;
}

bool gpu_failed(const GpuSample& sample) {
    return sample.lost || sample.last_fatal_xid.has_value();
}

std::string gpu_failure_text(uint32_t gpu, const GpuSample& sample) {
    if (!gpu_failed(sample)) return {};
    if (const std::optional<XidEvent>& x = sample.last_fatal_xid) {
        return fmt::format("GPU {} {}: Xid {}, {}", gpu, sample.lost ? "stopped answering" : "failed", x->xid,
                           x->description);
    }
    return fmt::format("GPU {} stopped answering: the driver reports it lost", gpu);
}

std::string normalize_pci_bus_id(std::string_view id) {
    std::string s;
    for (char c : id) {
        if (!std::isspace(static_cast<unsigned char>(c))) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    // domain:bus:device.function; NVML writes the domain with 8 digits, CUDA with 4.
    const size_t colon = s.find(':');
    if (colon != std::string::npos && s.find(':', colon + 1) != std::string::npos) {
        std::string domain = s.substr(0, colon);
        const size_t nonzero = domain.find_first_not_of('0');
        domain = nonzero == std::string::npos ? "" : domain.substr(nonzero);
        if (domain.size() < 4) domain.insert(0, 4 - domain.size(), '0');
        s = domain + s.substr(colon);
    }
    return s;
}

std::optional<uint32_t> find_by_pci_bus_id(const TelemetrySnapshot& snapshot, std::string_view pci_bus_id) {
    const std::string wanted = normalize_pci_bus_id(pci_bus_id);
    for (const GpuInfo& g : snapshot.gpus) {
        if (!g.pci_bus_id.empty() && normalize_pci_bus_id(g.pci_bus_id) == wanted) return g.index;
    }
    return std::nullopt;
}

GpuMonitorOptions options_from_environment(GpuMonitorOptions options) {
    if (const char* sim = std::getenv("POWERHOUSE_SIMULATE_GPUS"); sim != nullptr && *sim != '\0') {
        options.simulate = sim;
    }
    if (const char* lib = std::getenv("POWERHOUSE_NVML_LIBRARY"); lib != nullptr && *lib != '\0') options.nvml = lib;
    return options;
}

void EnergyMeter::add(double time, double watts) {
    if (!have_last_) {
        first_time_ = time;
        have_last_ = true;
    } else if (time < last_time_) {
        return;  // out of order: ignored
    } else {
        joules_ += 0.5 * (watts + last_watts_) * (time - last_time_);  // trapezoid
    }
    last_time_ = time;
    last_watts_ = watts;
}

double cost_per_million_tokens(double joules_per_token, double price_per_kwh) {
    return joules_per_token * 1e6 / 3.6e6 * price_per_kwh;
}

struct GpuMonitor::State {
    GpuMonitorOptions options;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

    std::mutex source_mutex;  // one sample at a time
    std::unique_ptr<telemetry::GpuSource> source;
    // Per GPU, under source_mutex: the Xids to repeat in every sample, so that one seen once
    // (an event is delivered once) still marks the GPU when the app or engine looks later.
    std::vector<std::optional<XidEvent>> last_xid, last_fatal_xid;
    // Under source_mutex: the power limits changed, so that a set never races a sample.
    telemetry::PowerLimitBook power_book;
    bool keep_power_limits = false;

    mutable std::mutex mutex;
    TelemetrySnapshot latest;
    std::vector<std::deque<GpuSample>> history;
    std::map<uint64_t, Subscriber> subscribers;
    uint64_t next_subscriber = 1;

    std::condition_variable wake;
    bool stopping = false;
    std::thread thread;

    TelemetrySnapshot take_sample();
    TelemetrySnapshot describe_source() const;
    void remember_xids(std::vector<GpuSample>& samples);
};

// The parts of a snapshot that do not change from sample to sample.
TelemetrySnapshot GpuMonitor::State::describe_source() const {
    TelemetrySnapshot snap;
    snap.source = source->description();
    snap.status = source->status();
    snap.xid_status = source->xid_status();
    snap.simulated = source->simulated();
    snap.gpus = source->gpus();
    snap.links = source->links();
    return snap;
}

void GpuMonitor::State::remember_xids(std::vector<GpuSample>& samples) {
    last_xid.resize(samples.size());
    last_fatal_xid.resize(samples.size());
    for (size_t i = 0; i < samples.size(); ++i) {
        for (const XidEvent& x : samples[i].xid_events) {
            last_xid[i] = x;
            if (x.fatal) last_fatal_xid[i] = x;
        }
        samples[i].last_xid = last_xid[i];
        samples[i].last_fatal_xid = last_fatal_xid[i];
    }
}

TelemetrySnapshot GpuMonitor::State::take_sample() {
    TelemetrySnapshot snap;
    {
        const std::lock_guard lock(source_mutex);
        const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        snap = describe_source();
        snap.latest = source->sample(now);
        remember_xids(snap.latest);
    }
    std::vector<Subscriber> to_call;
    {
        const std::lock_guard lock(mutex);
        latest = snap;
        history.resize(snap.latest.size());
        for (size_t i = 0; i < snap.latest.size(); ++i) {
            history[i].push_back(snap.latest[i]);
            while (history[i].size() > std::max<size_t>(1, options.history)) history[i].pop_front();
        }
        for (const auto& [id, s] : subscribers) to_call.push_back(s);
    }
    for (const Subscriber& s : to_call) s(snap);
    return snap;
}

GpuMonitor::GpuMonitor(GpuMonitorOptions options) : state_(std::make_shared<State>()) {
    state_->options = std::move(options);
    state_->keep_power_limits = state_->options.keep_power_limits;
    state_->source = state_->options.simulate.empty() ? telemetry::open_nvml_source(state_->options.nvml)
                                                      : telemetry::open_simulated_source(state_->options.simulate);
    TelemetrySnapshot& s = state_->latest;
    s = state_->describe_source();
    s.latest.resize(s.gpus.size());
}

// Limits are put back after the sampler has stopped and before the source (NVML) closes.
// Failures cannot be reported from here: callers that want to tell the user call
// restore_power_limits() first.
GpuMonitor::~GpuMonitor() {
    stop();
    const std::lock_guard lock(state_->source_mutex);
    if (!state_->keep_power_limits) (void)state_->power_book.restore_all(*state_->source);
}

void GpuMonitor::start() {
    const std::lock_guard lock(state_->mutex);
    if (state_->thread.joinable()) return;
    state_->stopping = false;
    state_->thread = std::thread([state = state_.get()] {
        for (;;) {
            state->take_sample();
            std::unique_lock wait_lock(state->mutex);
            const auto interval = std::max(state->options.interval, std::chrono::milliseconds(10));
            if (state->wake.wait_for(wait_lock, interval, [&] { return state->stopping; })) return;
        }
    });
}

void GpuMonitor::stop() {
    std::thread thread;
    {
        const std::lock_guard lock(state_->mutex);
        state_->stopping = true;
        thread = std::move(state_->thread);
    }
    state_->wake.notify_all();
    if (thread.joinable()) thread.join();
}

TelemetrySnapshot GpuMonitor::sample_now() { return state_->take_sample(); }

TelemetrySnapshot GpuMonitor::snapshot() const {
    const std::lock_guard lock(state_->mutex);
    return state_->latest;
}

std::vector<GpuSample> GpuMonitor::history(uint32_t gpu) const {
    const std::lock_guard lock(state_->mutex);
    if (gpu >= state_->history.size()) return {};
    return {state_->history[gpu].begin(), state_->history[gpu].end()};
}

uint64_t GpuMonitor::subscribe(Subscriber subscriber) {
    const std::lock_guard lock(state_->mutex);
    const uint64_t id = state_->next_subscriber++;
    state_->subscribers.emplace(id, std::move(subscriber));
    return id;
}

void GpuMonitor::unsubscribe(uint64_t id) {
    const std::lock_guard lock(state_->mutex);
    state_->subscribers.erase(id);
}

void GpuMonitor::report_activity(uint32_t gpu, float load, uint64_t memory_bytes) {
    const std::lock_guard lock(state_->source_mutex);
    state_->source->report_activity(gpu, load, memory_bytes);
}

Result<PowerLimits> GpuMonitor::power_limits(uint32_t gpu) const {
    const std::lock_guard lock(state_->source_mutex);
    return state_->power_book.read(*state_->source, gpu);
}

Result<PowerLimits> GpuMonitor::set_power_limit(uint32_t gpu, double watts) {
    const std::lock_guard lock(state_->source_mutex);
    return state_->power_book.set(*state_->source, gpu, watts);
}

Result<void> GpuMonitor::restore_power_limit(uint32_t gpu) {
    const std::lock_guard lock(state_->source_mutex);
    return state_->power_book.restore(*state_->source, gpu);
}

Result<void> GpuMonitor::restore_power_limits() {
    const std::lock_guard lock(state_->source_mutex);
    return state_->power_book.restore_all(*state_->source);
}

std::vector<PowerLimitChange> GpuMonitor::power_limit_changes() const {
    const std::lock_guard lock(state_->source_mutex);
    return state_->power_book.changes(*state_->source);
}

void GpuMonitor::keep_power_limits(bool keep) {
    const std::lock_guard lock(state_->source_mutex);
    state_->keep_power_limits = keep;
}

}  // namespace powerhouse
