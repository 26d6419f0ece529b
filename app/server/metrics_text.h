// Prometheus's text format (version 0.0.4) for GET /metrics: a metric with its help and
// type, label values with their escapes, and each GPU's series from the telemetry.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "powerhouse/telemetry.h"

namespace powerhouse::server {

// One metric with its help, type and samples (lines that end with '\n').
void add_metric(std::string& out, const char* name, const char* type, const char* help, const std::string& samples);

// A label value with Prometheus's escapes.
std::string label(std::string_view value);

// powerhouse_gpu_up, _utilization_ratio, _temperature_celsius, _memory_used_bytes,
// _memory_total_bytes and _power_watts, labelled with each GPU's index, UUID and name.
std::string gpu_metrics(const TelemetrySnapshot& telemetry);

}  // namespace powerhouse::server
