// What the API server says about the model's devices after one of them failed
// (ARCHITECTURE.md section 7): GET /health, the refusal of new requests while no model can
// answer, and the /metrics series of failures and recoveries. The engine recovers by itself
// (its RecoveryPolicy); this only keeps what its RecoveryEvents, and the device_failed errors
// that the policy `stop` sends instead, have said, so that a load balancer or a person can
// see it:
//   ok          no device has failed;
//   recovering  a device failed and the model is being loaded again (requests in flight
//               wait and then go on; new ones are taken and wait too);
//   degraded    the model runs again, without the failed devices;
//   failed      no model can answer (the engine gave up, or the policy is stop): requests
//               get 503 with the reason.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "powerhouse/engine.h"
#include "requests.h"

namespace powerhouse::server {

class ServerHealth {
public:
    enum class Status { ok, recovering, degraded, failed };

    struct Snapshot {
        Status status = Status::ok;
        std::string message;               // the engine's banner, or the error's message
        std::vector<DeviceFault> failed;   // every device that failed, in order
        std::vector<std::string> devices;  // degraded: the devices the model runs on now
        uint64_t device_failures = 0;      // devices that failed while the server ran
        uint64_t recoveries = 0;           // recoveries that ended with the model running again
    };

    void record(const RecoveryEvent& event);
    // A request's error. One of ErrorCode::device_failed means that no model can answer any
    // more (the policy stop sends only these; a gave_up RecoveryEvent comes before its own).
    void record(const Error& error);
    Snapshot snapshot() const;
    // GET /health: its status code (503 when failed) and body.
    std::pair<int, json> report() const;
    // The 503 that requests get while no model can answer.
    std::optional<ApiError> refusal() const;
    // The Prometheus series: powerhouse_device_failures_total, powerhouse_recoveries_total,
    // powerhouse_degraded.
    std::string metrics() const;

private:
    void note(const DeviceFault& fault);  // under the lock

    mutable std::mutex mutex_;
    Snapshot state_;
};

}  // namespace powerhouse::server
