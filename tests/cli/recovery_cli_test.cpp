// powerhouse-cli generate and chat when a device fails mid-answer (issue 23, ARCHITECTURE.md
// section 7): both run the model on the engine thread, so the answer goes on without the
// failed device and ends as it would have without the fault (greedy), the banner on stderr.
// Faults are injected into virtual CPU devices (--fail-device N --fail-after STEPS, as a GPU
// that falls off the bus; --fail-hangs, as one that never answers).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_runner.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using test::CliRun;
using test::quoted;

// SmolLM2 split by layer over two CPU devices.
std::string smollm2_over_two_cpus() {
    return "-m " + quoted(test::test_model_path()) + " -t 2 --ctx 512 --devices cpu:2 --split layer";
}

const std::string kCounting = "generate --raw --json --temp 0 -n 24 -p '1, 2, 3, 4,' ";

TEST(CliRecovery, ABadPolicyIsRefusedWithTheChoices) {
    for (const char* command : {"generate -p hi ", "chat "}) {
        SCOPED_TRACE(command);
        const CliRun run =
            test::run_cli(std::string(command) + smollm2_over_two_cpus() + " --on-device-failure sometimes", "");
        EXPECT_EQ(run.status, 2);
        for (const char* choice : {"'sometimes'", "replan", "retry", "stop"}) {
            EXPECT_NE(run.err.find(choice), std::string::npos) << choice << " in: " << run.err;
        }
    }
    const CliRun no_device = test::run_cli("generate -p hi " + smollm2_over_two_cpus() + " --fail-after 3");
    EXPECT_EQ(no_device.status, 2);
    EXPECT_NE(no_device.err.find("--fail-device"), std::string::npos) << no_device.err;
    const CliRun help = test::run_cli("generate --help");
    EXPECT_NE(help.out.find("For testing failure handling"), std::string::npos) << help.out;
}

// generate --json's answer without its stats (their timings differ from run to run).
nlohmann::json answer_of(const CliRun& run) {
    nlohmann::json out = nlohmann::json::parse(run.out);
    out.erase("stats");
    return out;
}

TEST(CliRecovery, GenerateGoesOnWithoutTheFailedDeviceAndEndsAsWithoutTheFault) {
    const CliRun reference = test::run_cli(kCounting + smollm2_over_two_cpus());
    ASSERT_EQ(reference.status, 0) << reference.err;
    EXPECT_TRUE(reference.err.empty()) << reference.err;
    const CliRun run = test::run_cli(kCounting + smollm2_over_two_cpus() + " --fail-device 1 --fail-after 5");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(answer_of(run), answer_of(reference));
    EXPECT_NE(run.err.find("CPU 1 failed"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("Continuing on CPU"), std::string::npos) << run.err;

    // A device that never answers: found by the step deadline, and set aside alike.
    const CliRun hung = test::run_cli(kCounting + smollm2_over_two_cpus() +
                                      " --fail-device 1 --fail-after 5 --fail-hangs --step-deadline 1");
    ASSERT_EQ(hung.status, 0) << hung.err;
    EXPECT_EQ(answer_of(hung), answer_of(reference));
    EXPECT_NE(hung.err.find("CPU 1 stopped answering: did not answer within 1 s"), std::string::npos) << hung.err;
}

TEST(CliRecovery, WithStopTheAnswerEndsWithTheErrorNamingTheDevice) {
    const CliRun run =
        test::run_cli(kCounting + smollm2_over_two_cpus() + " --fail-device 1 --fail-after 5 --on-device-failure stop");
    EXPECT_EQ(run.status, 1);
    EXPECT_NE(run.err.find("error: CPU 1"), std::string::npos) << run.err;
    EXPECT_EQ(run.err.find("Continuing on"), std::string::npos) << run.err;
}

TEST(CliRecovery, ChatPrintsTheBannerAndStillAnswers) {
    const std::string input = "What is 2+2?\nName a colour.\n";
    const CliRun reference = test::run_cli("chat " + smollm2_over_two_cpus() + " --temp 0 -n 24", input);
    ASSERT_EQ(reference.status, 0) << reference.err;
    const CliRun run =
        test::run_cli("chat " + smollm2_over_two_cpus() + " --temp 0 -n 24 --fail-device 1 --fail-after 5", input);
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out, reference.out);
    EXPECT_NE(run.err.find("CPU 1 failed"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("Continuing on CPU"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace powerhouse
