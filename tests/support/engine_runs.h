// Running requests through an Engine and gathering how they ended, for the tests of device
// failures (tests/engine/runtime/recovery_test.cpp on CPU devices, the CUDA backend's on a
// GPU): the same requests, the same bookkeeping, on either kind of device.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "powerhouse/engine.h"

namespace powerhouse::test {

// Greedy requests of different lengths (raw prompts, the end-of-text token ignored), to be
// submitted at once: ids 1, 2, ...
std::vector<GenerateCommand> greedy_requests(int max_tokens);

// What a run's events came to: each request's end, and the recovery events in order.
struct EngineOutcome {
    bool loaded = false;
    Error load_error;
    std::map<uint64_t, DoneEvent> done;
    std::map<uint64_t, Error> failed;
    std::vector<RecoveryEvent> recoveries;
};

// The engine's events up to the first for which `last` is true (included); a test failure
// when none comes within 300 s.
std::vector<EngineEvent> events_until(Engine& engine, const std::function<bool(const EngineEvent&)>& last);

// Loads, submits the requests and waits (240 s at most) for every one of them to end.
EngineOutcome run_requests(Engine& engine, LoadCommand load, const std::vector<GenerateCommand>& requests);

}  // namespace powerhouse::test
