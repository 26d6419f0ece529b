#include "support/engine_runs.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>

namespace powerhouse::test {

using namespace std::chrono_literals;

std::vector<GenerateCommand> greedy_requests(int max_tokens) {
    const char* prompts[] = {"Once upon a time", "The capital of France is a city that",
                             "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20", "Hello"};
    std::vector<GenerateCommand> out;
    uint64_t id = 1;
    for (const char* p : prompts) {
        GenerateCommand c;
        c.request_id = id++;
        c.raw_prompt = p;
        c.settings.max_tokens = max_tokens;
        c.settings.ignore_eos = true;
        c.settings.sampling.temperature = 0;
        out.push_back(std::move(c));
    }
    return out;
}

std::vector<EngineEvent> events_until(Engine& engine, const std::function<bool(const EngineEvent&)>& last) {
    std::vector<EngineEvent> events;
    const auto deadline = std::chrono::steady_clock::now() + 300s;
    while (std::chrono::steady_clock::now() < deadline) {
        std::optional<EngineEvent> e = engine.wait_event(100ms);
        if (!e) continue;
        events.push_back(std::move(*e));
        if (last(events.back())) return events;
    }
    ADD_FAILURE() << "no such event within 300 s";
    return events;
}

EngineOutcome run_requests(Engine& engine, LoadCommand load, const std::vector<GenerateCommand>& reqs) {
    EngineOutcome out;
    engine.submit(std::move(load));
    const auto deadline = std::chrono::steady_clock::now() + 240s;
    while (std::chrono::steady_clock::now() < deadline && !out.loaded) {
        std::optional<EngineEvent> e = engine.wait_event(100ms);
        if (!e) continue;
        if (std::holds_alternative<LoadedEvent>(*e)) out.loaded = true;
        if (const auto* error = std::get_if<ErrorEvent>(&*e)) {
            out.load_error = error->error;
            return out;
        }
    }
    for (const GenerateCommand& r : reqs) engine.submit(r);
    while (std::chrono::steady_clock::now() < deadline && out.done.size() + out.failed.size() < reqs.size()) {
        std::optional<EngineEvent> e = engine.wait_event(100ms);
        if (!e) continue;
        if (auto* done = std::get_if<DoneEvent>(&*e)) out.done[done->request_id] = std::move(*done);
        if (auto* error = std::get_if<ErrorEvent>(&*e)) out.failed[error->request_id] = error->error;
        if (auto* recovery = std::get_if<RecoveryEvent>(&*e)) out.recoveries.push_back(std::move(*recovery));
    }
    EXPECT_EQ(out.done.size() + out.failed.size(), reqs.size()) << "requests still running after the deadline";
    return out;
}

}  // namespace powerhouse::test
