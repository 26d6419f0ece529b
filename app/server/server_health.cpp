#include "server_health.h"

#include <fmt/format.h>

#include <algorithm>

#include "metrics_text.h"

namespace powerhouse::server {

namespace {

const char* status_name(ServerHealth::Status status) {
    switch (status) {
        case ServerHealth::Status::ok:
            return "ok";
        case ServerHealth::Status::recovering:
            return "recovering";
        case ServerHealth::Status::degraded:
            return "degraded";
        case ServerHealth::Status::failed:
            return "failed";
    }
    return "ok";
}

}  // namespace

void ServerHealth::record(const RecoveryEvent& event) {
    const std::lock_guard lock(mutex_);
    // A failure is announced by `reloading`, or, when the engine gives up at once (a fault
    // that came back after two reloads), by `gave_up` alone.
    if (event.phase == RecoveryEvent::Phase::reloading ||
        (event.phase == RecoveryEvent::Phase::gave_up && state_.status != Status::recovering)) {
        ++state_.device_failures;
        note(event.fault);
    }
    state_.message = event.message;
    switch (event.phase) {
        case RecoveryEvent::Phase::reloading:
            state_.status = Status::recovering;
            break;
        case RecoveryEvent::Phase::recovered:
            ++state_.recoveries;
            state_.status = Status::degraded;
            state_.devices.clear();
            for (const DeviceUsage& d : event.model.devices) state_.devices.push_back(d.name);
            break;
        case RecoveryEvent::Phase::gave_up:
            state_.status = Status::failed;
            state_.devices.clear();
            break;
    }
}

void ServerHealth::note(const DeviceFault& fault) {
    // A collective that never completed blames no device: the message says so.
    if (fault.name.empty() && fault.uuid.empty()) return;
    // A device that fails again (the policy retry) is listed once, with its latest cause.
    auto same = std::find_if(state_.failed.begin(), state_.failed.end(),
                             [&](const DeviceFault& d) { return d.name == fault.name && d.uuid == fault.uuid; });
    if (same == state_.failed.end()) {
        state_.failed.push_back(fault);
    } else {
        *same = fault;
    }
}

void ServerHealth::record(const Error& error) {
    if (error.code != ErrorCode::device_failed) return;
    const std::lock_guard lock(mutex_);
    if (state_.status == Status::failed) return;  // the gave_up event, or an earlier request's error, said it
    // Under the policy stop no RecoveryEvent comes: this error is the failure's only word.
    if (state_.status != Status::recovering) ++state_.device_failures;
    state_.status = Status::failed;
    state_.message = error.message;
    state_.devices.clear();
}

ServerHealth::Snapshot ServerHealth::snapshot() const {
    const std::lock_guard lock(mutex_);
    return state_;
}

std::pair<int, json> ServerHealth::report() const {
    const Snapshot s = snapshot();
    if (s.status == Status::ok) return {200, json{{"status", "ok"}}};
    json failed = json::array();
    for (const DeviceFault& f : s.failed) {
        failed.push_back(
            {{"name", f.name}, {"uuid", f.uuid.empty() ? json(nullptr) : json(f.uuid)}, {"cause", f.cause}});
    }
    json body = {{"status", status_name(s.status)}, {"message", s.message}, {"failed_devices", failed}};
    if (s.status == Status::degraded) body["devices"] = s.devices;
    return {s.status == Status::failed ? 503 : 200, body};
}

std::optional<ApiError> ServerHealth::refusal() const {
    const std::lock_guard lock(mutex_);
    if (state_.status != Status::failed) return std::nullopt;
    return ApiError{503, state_.message, "server_error", std::nullopt, std::string("device_failed")};
}

std::string ServerHealth::metrics() const {
    const Snapshot s = snapshot();
    std::string out;
    add_metric(out, "powerhouse_device_failures_total", "counter",
               "Devices that failed while the server ran (an error, or no answer within the step deadline).",
               fmt::format("powerhouse_device_failures_total {}\n", s.device_failures));
    add_metric(out, "powerhouse_recoveries_total", "counter",
               "Device failures after which the model ran again (planned without the device, or reloaded).",
               fmt::format("powerhouse_recoveries_total {}\n", s.recoveries));
    add_metric(out, "powerhouse_degraded", "gauge",
               "1 once a device has failed: the model is reloading, runs on the devices left, or cannot answer "
               "(GET /health says which).",
               fmt::format("powerhouse_degraded {}\n", s.status == Status::ok ? 0 : 1));
    return out;
}

}  // namespace powerhouse::server
