// What the desktop app's C++ tests share: a store in a temporary folder, simulated GPUs, and
// llama.cpp's greedy answers to the chat cases (tests/data/generation/smollm2_greedy.json).
#pragma once

#include <QTest>
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "powerhouse/telemetry.h"
#include "store/store.h"
#include "support/test_support.h"

namespace powerhouse::test {

// Runs the event loop until `done` or `ms` (sleeping between checks, so that the engine's
// threads have the cores).
template <class Done>
bool wait_for(Done done, int ms = 120000) {
    return QTest::qWaitFor(done, ms);
}

// The store of a temporary folder; a test that cannot open it stops there.
inline store::Store open_store(const TempDir& dir) {
    auto s = store::Store::open(dir / "p.db");
    if (!s) {
        ADD_FAILURE() << s.error().message;
        std::abort();
    }
    return std::move(s).value();
}

// One reading of simulated GPUs (a POWERHOUSE_SIMULATE_GPUS spec), as the monitor gives it.
inline TelemetrySnapshot simulated_gpus(const std::string& spec) {
    GpuMonitorOptions options;
    options.simulate = spec;
    return GpuMonitor(options).sample_now();
}

// llama.cpp's greedy answer to a chat case of tests/data/generation/smollm2_greedy.json.
inline std::string reference_answer(const std::string& name) {
    const auto fixture = nlohmann::json::parse(read_file(data_dir() / "generation" / "smollm2_greedy.json"));
    for (const auto& c : fixture.at("cases")) {
        if (c.at("name") == name) return c.at("generated_text").get<std::string>();
    }
    ADD_FAILURE() << "no case " << name;
    return {};
}

// The stored answer is the start of llama.cpp's (the tests stop answers early).
inline void expect_reference_answer(const std::string& answer, const std::string& name) {
    const std::string want = reference_answer(name);
    EXPECT_GT(answer.size(), 20u) << answer;
    EXPECT_EQ(want.substr(0, answer.size()), answer) << "llama.cpp: " << want;
}

}  // namespace powerhouse::test
