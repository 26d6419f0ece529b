// A device that fails while requests run (issue 23, ARCHITECTURE.md section 7): the engine
// sets it aside, loads the model on what is left and continues every request from its last
// token, so that each ends as it would have without the fault. Faults are injected into CPU
// virtual devices (ModelOptions::fail_device) at random steps, with several sequences in
// flight, in both split modes and with a mixture's experts in RAM; a device that hangs
// instead is found by the step deadline.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/step_watchdog.h"
#include "model/model_devices.h"
#include "powerhouse/engine.h"
#include "powerhouse/model.h"
#include "support/engine_runs.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using namespace std::chrono_literals;
using test::EngineOutcome;
using test::greedy_requests;
using test::run_requests;

std::filesystem::path arch_model(const std::string& name) { return test::data_dir() / "arch" / (name + ".gguf"); }

ModelOptions options_for(const std::string& devices, SplitMode split) {
    ModelOptions o;
    o.n_ctx = 256;
    o.n_threads = 2;
    o.n_batch = 16;
    o.max_sequences = 4;
    o.devices = devices;
    o.split = split;
    return o;
}

struct Case {
    std::filesystem::path model;
    const char* devices;
    SplitMode split;
    int32_t experts_in_ram;
    int n_devices;
};

std::vector<Case> cases() {
    return {{arch_model("llama-q8_0"), "cpu:2", SplitMode::layer, kExpertsInRamAuto, 2},
            {arch_model("llama-q8_0"), "cpu:2", SplitMode::tensor, kExpertsInRamAuto, 2},
            {arch_model("qwen3moe-q8_0"), "cpu:2", SplitMode::tensor, 1, 2},
            {arch_model("qwen3moe-q8_0"), "cpu:2", SplitMode::layer, 2, 2},
            {test::test_model_path(), "cpu:3", SplitMode::layer, kExpertsInRamAuto, 3}};
}

TEST(Recovery, AFailedDeviceAtARandomStepIsSetAsideAndEveryRequestEndsAsWithoutTheFault) {
    const std::vector<GenerateCommand> reqs = greedy_requests(20);
    std::mt19937 random(20261205);
    int mid_answer = 0;  // recoveries of an answer already begun: its tokens so far were kept
    for (const Case& c : cases()) {
        SCOPED_TRACE(c.model.filename().string() + " " + c.devices + " " + split_mode_name(c.split));
        ModelOptions options = options_for(c.devices, c.split);
        options.experts_in_ram = c.experts_in_ram;
        Engine reference_engine;
        const EngineOutcome reference = run_requests(reference_engine, LoadCommand{c.model, options}, reqs);
        ASSERT_TRUE(reference.loaded) << reference.load_error.message;
        ASSERT_EQ(reference.done.size(), reqs.size());

        for (int trial = 0; trial < 3; ++trial) {
            ModelOptions failing = options;
            failing.fail_device = std::uniform_int_distribution<int>(0, c.n_devices - 1)(random);
            // Within the first dozen steps: every request (20 tokens, 20 steps at least) is under way.
            failing.fail_after = std::uniform_int_distribution<uint32_t>(0, 12)(random);
            SCOPED_TRACE(testing::Message() << "device " << failing.fail_device << " fails after "
                                            << failing.fail_after << " steps");
            Engine engine;
            const EngineOutcome got = run_requests(engine, LoadCommand{c.model, failing}, reqs);
            ASSERT_TRUE(got.loaded) << got.load_error.message;
            EXPECT_TRUE(got.failed.empty()) << got.failed.begin()->second.message;
            for (const auto& [id, done] : reference.done) {
                ASSERT_EQ(got.done.count(id), 1u) << "request " << id;
                EXPECT_EQ(got.done.at(id).generated_ids, done.generated_ids) << "request " << id;
                EXPECT_EQ(got.done.at(id).text, done.text) << "request " << id;
            }
            // The fault happened while requests ran: one recovery, announced then done.
            ASSERT_EQ(got.recoveries.size(), 2u);
            const RecoveryEvent& announced = got.recoveries[0];
            const RecoveryEvent& recovered = got.recoveries[1];
            EXPECT_EQ(announced.phase, RecoveryEvent::Phase::reloading);
            EXPECT_EQ(recovered.phase, RecoveryEvent::Phase::recovered);
            EXPECT_EQ(recovered.fault.device, failing.fail_device);
            EXPECT_EQ(recovered.fault.name, "CPU " + std::to_string(failing.fail_device));
            EXPECT_FALSE(recovered.fault.timed_out);
            EXPECT_EQ(recovered.model.devices.size(), static_cast<size_t>(c.n_devices - 1));
            EXPECT_NE(recovered.message.find("Continuing on"), std::string::npos) << recovered.message;
            EXPECT_FALSE(recovered.requests.empty());
            // Every request that was under way says where it went on.
            for (uint64_t id : recovered.requests) {
                ASSERT_EQ(got.done.count(id), 1u);
                const std::vector<RecoveryNote>& notes = got.done.at(id).recoveries;
                ASSERT_EQ(notes.size(), 1u) << "request " << id;
                EXPECT_EQ(notes[0].failed, recovered.fault.name);
                EXPECT_EQ(notes[0].continued_on, recovered.model.device);
                EXPECT_LE(notes[0].at_token, got.done.at(id).generated_ids.size());
                if (notes[0].at_token > 0) ++mid_answer;
            }
        }
    }
    EXPECT_GT(mid_answer, 10);
}

TEST(Recovery, ADeviceThatNeverAnswersIsFoundByTheStepDeadlineAndSetAside) {
    const std::vector<GenerateCommand> reqs = greedy_requests(12);
    ModelOptions options = options_for("cpu:2", SplitMode::tensor);
    Engine reference_engine;
    const EngineOutcome reference = run_requests(reference_engine, LoadCommand{arch_model("llama-q8_0"), options}, reqs);
    ASSERT_TRUE(reference.loaded) << reference.load_error.message;

    options.fail_device = 1;
    options.fail_after = 3;
    options.fail_hangs = true;  // it never returns: only the deadline ends its step
    options.step_deadline = 500ms;
    Engine engine;
    const auto start = std::chrono::steady_clock::now();
    const EngineOutcome got = run_requests(engine, LoadCommand{arch_model("llama-q8_0"), options}, reqs);
    ASSERT_TRUE(got.loaded) << got.load_error.message;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 120s);
    ASSERT_EQ(got.recoveries.size(), 2u);
    const DeviceFault& fault = got.recoveries[1].fault;
    EXPECT_TRUE(fault.timed_out);
    EXPECT_EQ(fault.device, 1);
    EXPECT_EQ(fault.name, "CPU 1");
    EXPECT_NE(got.recoveries[0].message.find("CPU 1 stopped answering: did not answer within 0.5 s"),
              std::string::npos)
        << got.recoveries[0].message;
    EXPECT_EQ(got.recoveries[1].model.devices.size(), 1u);
    for (const auto& [id, done] : reference.done) {
        ASSERT_EQ(got.done.count(id), 1u) << "request " << id;
        EXPECT_EQ(got.done.at(id).generated_ids, done.generated_ids) << "request " << id;
    }
}

TEST(Recovery, ThePolicyStopEndsTheRequestsWithAnErrorThatNamesTheDevice) {
    ModelOptions options = options_for("cpu:2", SplitMode::layer);
    options.fail_device = 0;
    options.fail_after = 2;
    Engine engine;
    LoadCommand load{arch_model("llama-q8_0"), options};
    load.recovery = RecoveryPolicy::stop;
    const std::vector<GenerateCommand> reqs = greedy_requests(12);
    const EngineOutcome got = run_requests(engine, load, reqs);
    ASSERT_TRUE(got.loaded) << got.load_error.message;
    // The requests are submitted one by one: those under way when the step fails end with the
    // step's error ("CPU 0: ..."); any the engine had not taken yet (a loaded machine can
    // step in between) end with the policy's words, announced by one gave_up event. Either
    // way each names the device and nothing goes on elsewhere.
    ASSERT_LE(got.recoveries.size(), 1u);
    if (!got.recoveries.empty()) {
        EXPECT_EQ(got.recoveries[0].phase, RecoveryEvent::Phase::gave_up);
    }
    ASSERT_EQ(got.failed.size(), reqs.size());
    for (const auto& [id, error] : got.failed) {
        EXPECT_EQ(error.code, ErrorCode::device_failed);
        const bool by_step = error.message.rfind("CPU 0: ", 0) == 0;
        const bool by_policy = error.message.rfind("CPU 0 failed: ", 0) == 0 &&
                               error.message.find("Stopped, as the recovery setting asks") != std::string::npos;
        EXPECT_TRUE(by_step || by_policy) << error.message;
        if (by_policy) {
            EXPECT_FALSE(got.recoveries.empty()) << "a request ended by the policy without its event";
        }
    }
}

TEST(Recovery, RetryingWhereTheFaultStaysGivesUpAfterTwoReloadsAndSaysWhy) {
    ModelOptions options = options_for("cpu:2", SplitMode::layer);
    options.fail_device = 1;
    options.fail_after = 1;  // the device fails again after every reload
    Engine engine;
    LoadCommand load{arch_model("llama-q8_0"), options};
    load.recovery = RecoveryPolicy::retry;
    const std::vector<GenerateCommand> reqs = greedy_requests(12);
    const EngineOutcome got = run_requests(engine, load, reqs);
    ASSERT_TRUE(got.loaded) << got.load_error.message;
    // Two reloads (announced, recovered), then the third fault gives up.
    ASSERT_EQ(got.recoveries.size(), 5u);
    EXPECT_EQ(got.recoveries[1].phase, RecoveryEvent::Phase::recovered);
    EXPECT_EQ(got.recoveries[1].devices, "cpu:2") << "retry loads on the same devices";
    EXPECT_EQ(got.recoveries[4].phase, RecoveryEvent::Phase::gave_up);
    EXPECT_NE(got.recoveries[4].message.find("twice did not help"), std::string::npos) << got.recoveries[4].message;
    ASSERT_EQ(got.failed.size(), reqs.size());
    for (const auto& [id, error] : got.failed) {
        EXPECT_EQ(error.code, ErrorCode::device_failed);
        EXPECT_NE(error.message.find("CPU 1 failed"), std::string::npos) << error.message;
    }
    // No model is left; a new load works.
    GenerateCommand after = reqs.front();
    after.request_id = 99;
    engine.submit(after);
    std::optional<EngineEvent> e = engine.wait_event(30s);
    ASSERT_TRUE(e && std::holds_alternative<ErrorEvent>(*e));
    EXPECT_NE(std::get<ErrorEvent>(*e).error.message.find("no model is loaded"), std::string::npos);
}

TEST(Recovery, AGpuTheMonitorReportsLostMovesTheModelEvenBetweenAnswers) {
    Engine engine;
    const std::vector<GenerateCommand> reqs = greedy_requests(16);
    const EngineOutcome reference = run_requests(engine, LoadCommand{arch_model("llama-q8_0"), options_for("cpu:2", SplitMode::layer)},
                                  reqs);
    ASSERT_TRUE(reference.loaded) << reference.load_error.message;

    // Idle: the model moves at once.
    engine.submit(DeviceFailedCommand{"CPU 0", "Xid 79, fell off the bus", true});
    std::vector<RecoveryEvent> seen;
    const auto until = std::chrono::steady_clock::now() + 60s;
    while (seen.size() < 2 && std::chrono::steady_clock::now() < until) {
        std::optional<EngineEvent> e = engine.wait_event(100ms);
        if (e && std::holds_alternative<RecoveryEvent>(*e)) seen.push_back(std::get<RecoveryEvent>(*e));
    }
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[1].phase, RecoveryEvent::Phase::recovered);
    EXPECT_EQ(seen[1].devices, "cpu");
    EXPECT_TRUE(seen[1].requests.empty());
    EXPECT_EQ(seen[1].message.rfind("CPU 0 stopped answering: Xid 79, fell off the bus. Continuing on CPU", 0), 0u)
        << seen[1].message;
    // A device the model does not use: nothing happens. The answers are those of before.
    engine.submit(DeviceFailedCommand{"CPU 7", "Xid 79, fell off the bus", true});
    for (GenerateCommand r : reqs) {
        r.request_id += 100;
        engine.submit(r);
    }
    std::map<uint64_t, DoneEvent> done;
    while (done.size() < reqs.size() && std::chrono::steady_clock::now() < until) {
        std::optional<EngineEvent> e = engine.wait_event(100ms);
        if (!e) continue;
        EXPECT_FALSE(std::holds_alternative<RecoveryEvent>(*e));
        if (auto* d = std::get_if<DoneEvent>(&*e)) done[d->request_id - 100] = std::move(*d);
    }
    for (const auto& [id, d] : reference.done) {
        ASSERT_EQ(done.count(id), 1u);
        EXPECT_EQ(done.at(id).generated_ids, d.generated_ids);
    }
}

TEST(Recovery, WithThePolicyStopAReportedFailureUnloadsTheModelAndSaysSo) {
    Engine engine;
    LoadCommand load{arch_model("llama-q8_0"), options_for("cpu:2", SplitMode::layer)};
    load.recovery = RecoveryPolicy::stop;
    ASSERT_TRUE(run_requests(engine, load, {}).loaded);
    engine.submit(DeviceFailedCommand{"CPU 1", "Xid 48, double-bit ECC error", false});
    std::optional<EngineEvent> e = engine.wait_event(30s);
    ASSERT_TRUE(e && std::holds_alternative<RecoveryEvent>(*e));
    const RecoveryEvent& gave_up = std::get<RecoveryEvent>(*e);
    EXPECT_EQ(gave_up.phase, RecoveryEvent::Phase::gave_up);
    EXPECT_EQ(gave_up.message.rfind("CPU 1 failed: Xid 48, double-bit ECC error. Stopped", 0), 0u) << gave_up.message;
    GenerateCommand ask = greedy_requests(4).front();
    engine.submit(ask);
    e = engine.wait_event(30s);
    ASSERT_TRUE(e && std::holds_alternative<ErrorEvent>(*e));
    EXPECT_NE(std::get<ErrorEvent>(*e).error.message.find("no model is loaded"), std::string::npos);
}

TEST(Recovery, TheDevicesLeftAreNamedInTheirOrderAndGpusByUuid) {
    ModelDevices cpus;
    cpus.descs.resize(3);
    EXPECT_EQ(devices_spec_without(cpus, 1), "cpu:2");
    cpus.descs.resize(2);
    EXPECT_EQ(devices_spec_without(cpus, 0), "cpu");
    cpus.descs.resize(1);
    EXPECT_EQ(devices_spec_without(cpus, 0), "");

    ModelDevices gpus;
    gpus.cuda = true;
    for (const char* uuid : {"GPU-aaaa-1", "GPU-bbbb-2", "GPU-cccc-3"}) {
        DeviceDesc d;
        d.uuid = uuid;
        gpus.descs.push_back(d);
    }
    gpus.cuda_index = {0, 1, 2};
    EXPECT_EQ(devices_spec_without(gpus, 1), "cuda:GPU-aaaa-1,GPU-cccc-3");
    gpus.descs[2].uuid.clear();  // no UUID known: the CUDA number
    EXPECT_EQ(devices_spec_without(gpus, 0), "cuda:GPU-bbbb-2,2");
    // Two shards of one GPU ("cuda:0,0,1"): the GPU's failure takes both.
    gpus.descs[1].uuid = "GPU-aaaa-1";
    gpus.descs[2].uuid = "GPU-dddd-4";
    gpus.cuda_index = {0, 0, 1};
    EXPECT_EQ(devices_spec_without(gpus, 1), "cuda:GPU-dddd-4");
}

TEST(Recovery, AModelSaysWhichDeviceFailedAndWhatIsLeft) {
    ModelOptions options = options_for("cpu:2", SplitMode::layer);
    options.fail_device = 1;
    options.fail_after = 0;
    Result<Model> model = Model::load(arch_model("llama-q8_0"), options);
    ASSERT_TRUE(model) << model.error().message;
    EXPECT_FALSE(model->fault());
    const TokenId prompt[] = {1, 2, 3};
    Result<std::span<const float>> failed = model->decode(prompt);
    ASSERT_FALSE(failed);
    EXPECT_EQ(failed.error().code, ErrorCode::device_failed);
    const std::optional<DeviceFault> fault = model->fault();
    ASSERT_TRUE(fault);
    EXPECT_EQ(fault->device, 1);
    EXPECT_EQ(fault->name, "CPU 1");
    EXPECT_TRUE(fault->uuid.empty());
    EXPECT_NE(fault->cause.find("stopped answering"), std::string::npos) << fault->cause;
    const Model::DevicesLeft left = model->devices_without(*fault);
    EXPECT_EQ(left.devices, "cpu");
    EXPECT_EQ(left.removed, 1);
    // A failed model runs nothing more, on any device.
    const Result<std::span<const float>> again = model->decode(prompt);
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().message, failed.error().message);
}

TEST(StepWatchdog, FiresOnceAStepOutlivesItsDeadlineAndNotBefore) {
    std::atomic<int> fired{0};
    StepWatchdog quick(50ms, [&] { ++fired; });
    quick.arm();
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (fired.load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
    EXPECT_TRUE(quick.disarm());
    EXPECT_EQ(fired.load(), 1);
    // Disarmed in time: never.
    StepWatchdog slow(60s, [&] { ++fired; });
    for (int i = 0; i < 100; ++i) {
        slow.arm();
        EXPECT_FALSE(slow.disarm());
    }
    EXPECT_EQ(fired.load(), 1);
    // Armed again after firing: it starts afresh.
    quick.arm();
    EXPECT_FALSE(quick.disarm());
}

}  // namespace
}  // namespace powerhouse
