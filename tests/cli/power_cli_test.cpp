// Power and money in the CLI (issue 24): bench --power-sweep on simulated GPUs standing in for
// the test model on the CPU (a row per limit, the marks, the label, the limits put back or one
// applied, a refused limit's nvidia-smi command, bad values), bench's cost lines against
// hand-worked figures, and powerhouse-cli power on simulated GPUs and the fake NVML library.
// Speed is never asserted: only what follows from it by arithmetic.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_runner.h"
#include "powerhouse/costs.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using test::CliRun;
using test::quoted;
using test::run_cli;

// The test model on the CPU, briefly: a few tokens per step.
std::string bench(const std::string& args) {
    return "bench -p 4 -n 4 -r 1 -t 2 --devices cpu -m " + quoted(test::test_model_path()) + " " + args;
}

bool has(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// The words of the first line of a table that begins with `first` (empty when none does).
std::vector<std::string> row(const std::string& text, const std::string& first) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream words(line);
        std::vector<std::string> out;
        for (std::string w; words >> w;) out.push_back(w);
        if (!out.empty() && out[0] == first) return out;
    }
    return {};
}

// A request bench refuses: its exit status (2: bad usage, 1: refused) and words on stderr.
struct Refusal {
    std::string args;
    int status;
    std::string message;
};

void expect_refused(const std::vector<Refusal>& refusals) {
    for (const Refusal& r : refusals) {
        SCOPED_TRACE(r.args);
        const CliRun run = run_cli(bench(r.args));
        EXPECT_EQ(run.status, r.status) << run.out;
        EXPECT_TRUE(has(run.err, r.message)) << run.err;
        EXPECT_FALSE(has(run.out, "t/s")) << run.out;  // refused before anything ran
    }
}

class CliPower : public ::testing::Test {
protected:
    void SetUp() override {
        unsetenv("POWERHOUSE_SIMULATE_GPUS");
        // No real GPU leaks into what the tests see, should the machine have one.
        setenv("POWERHOUSE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    }
    void TearDown() override {
        unsetenv("POWERHOUSE_SIMULATE_GPUS");
        unsetenv("POWERHOUSE_NVML_LIBRARY");
        unsetenv("FAKE_NVML_SCENARIO");
    }
    static void simulate(const char* spec) { setenv("POWERHOUSE_SIMULATE_GPUS", spec, 1); }
};

TEST_F(CliPower, SweepOnSimulatedGpusHasARowPerLimitTheMarksAndTheLabel) {
    simulate("RTX 4090:24;RTX 4090:24");
    const CliRun run = run_cli(bench("--power-sweep --power-limits 450,315,270"));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_TRUE(has(run.out, "Power sweep on GPU 0 and GPU 1 (RTX 4090, RTX 4090)")) << run.out;
    EXPECT_TRUE(has(run.out,
                    "SIMULATED: simulated GPUs: the watts, temperatures and speed come from a model, not "
                    "from hardware"))
        << run.out;
    for (const char* row : {"\n450 W ", "\n315 W ", "\n270 W "}) EXPECT_TRUE(has(run.out, row)) << row << run.out;
    EXPECT_TRUE(has(run.out, "most efficient: ")) << run.out;
    EXPECT_TRUE(has(run.out, "knee: ")) << run.out;
    EXPECT_TRUE(has(run.out, "power cap")) << run.out;  // 270 W is below the 414 W an RTX 4090 draws
    EXPECT_TRUE(has(run.out, "The power limits are back at 450 W, as before the sweep.")) << run.out;
    EXPECT_TRUE(has(run.err, "power sweep: step 3 at 270 W")) << run.err;
}

TEST_F(CliPower, SweepJsonHasEachStepsFiguresAndPutsTheLimitsBack) {
    simulate("RTX 4090:24;RTX 4090:24");
    const CliRun run = run_cli(bench("--power-sweep --power-limits 450,270 --json"));
    ASSERT_EQ(run.status, 0) << run.err;
    const auto json = nlohmann::json::parse(run.out);
    EXPECT_EQ(json["n_gen"], 4);
    const auto& sweep = json["power_sweep"];
    EXPECT_EQ(sweep["simulated"], true);
    EXPECT_EQ(sweep["label"], "simulated GPUs: the watts, temperatures and speed come from a model, not from hardware");
    EXPECT_EQ(sweep["gpus"], nlohmann::json::array({0, 1}));
    ASSERT_EQ(sweep["points"].size(), 2u);
    const double limits[] = {450, 270};
    for (size_t i = 0; i < 2; ++i) {
        const auto& p = sweep["points"][i];
        SCOPED_TRACE(i);
        EXPECT_EQ(p["limits_w"], nlohmann::json::array({limits[i], limits[i]}));
        EXPECT_EQ(p["tokens"], 4);
        EXPECT_NEAR(p["tokens_per_second"].get<double>(), 4 / p["seconds"].get<double>(), 1e-9);
        // The two GPUs draw under their limits, and tokens per joule is speed over power.
        EXPECT_GT(p["average_w"].get<double>(), 0.0);
        EXPECT_LE(p["average_w"].get<double>(), 2 * limits[i]);
        EXPECT_NEAR(p["tokens_per_joule"].get<double>(),
                    p["tokens_per_second"].get<double>() / p["average_w"].get<double>(), 1e-9);
        EXPECT_TRUE(p["peak_temperature_c"].is_number());
    }
    // Unlimited (414 W under 450 W) at full speed; at 270 W the power model's 0.93175.
    EXPECT_EQ(sweep["points"][0]["simulated_speed"], 1.0);
    EXPECT_TRUE(sweep["points"][0]["throttle_reasons"].empty());
    EXPECT_NEAR(sweep["points"][1]["simulated_speed"].get<double>(), 0.93175, 1e-5);
    EXPECT_EQ(sweep["points"][1]["throttle_reasons"], nlohmann::json::array({"power cap"}));
    EXPECT_TRUE(sweep["most_efficient"].is_number());
    EXPECT_TRUE(sweep["knee"].is_number());
    EXPECT_EQ(sweep["restored_w"], nlohmann::json::array({450.0, 450.0}));
    EXPECT_TRUE(sweep["applied"].is_null());
}

TEST_F(CliPower, SweepOfChosenGpusByIndexOrUuid) {
    simulate("RTX 4090:24;A100:80");
    CliRun run = run_cli(bench("--power-sweep --power-limits 300,250 --sweep-gpus 1 --json"));
    ASSERT_EQ(run.status, 0) << run.err;
    auto sweep = nlohmann::json::parse(run.out)["power_sweep"];
    EXPECT_EQ(sweep["gpus"], nlohmann::json::array({1}));
    EXPECT_EQ(sweep["points"][1]["limits_w"], nlohmann::json::array({250.0}));
    EXPECT_EQ(sweep["restored_w"], nlohmann::json::array({400.0}));  // an A100's default

    run = run_cli("power --json");
    const std::string uuid = nlohmann::json::parse(run.out)["gpus"][0]["uuid"];
    run = run_cli(bench("--power-sweep --power-limits 300 --sweep-gpus " + uuid + " --json"));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(nlohmann::json::parse(run.out)["power_sweep"]["gpus"], nlohmann::json::array({0}));
}

TEST_F(CliPower, ApplyLeavesTheChosenLimitAndSaysHowToRestore) {
    simulate("RTX 4090:24;RTX 4090:24");
    CliRun run = run_cli(bench("--power-sweep --power-limits 450,315 --apply knee --json"));
    ASSERT_EQ(run.status, 0) << run.err;
    const auto sweep = nlohmann::json::parse(run.out)["power_sweep"];
    ASSERT_TRUE(sweep["knee"].is_number());
    EXPECT_EQ(sweep["applied"]["choice"], "knee");
    EXPECT_EQ(sweep["applied"]["limits_w"], sweep["points"][sweep["knee"].get<size_t>()]["limits_w"]);
    EXPECT_EQ(sweep["applied"]["kept"], true);

    run = run_cli(bench("--power-sweep --power-limits 450,315 --apply 300W"));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_TRUE(has(run.out,
                    "Applied 300 W to GPU 0 and GPU 1 and left it so: it stays after this command ends. "
                    "To put back the default: powerhouse-cli power --restore, or sudo nvidia-smi -i 0 -pl "
                    "450; sudo nvidia-smi -i 1 -pl 450"))
        << run.out;
    EXPECT_TRUE(has(run.out, "Simulated GPUs: nothing real was changed")) << run.out;
    EXPECT_FALSE(has(run.out, "are back at")) << run.out;

    run = run_cli(bench("--power-sweep --power-limits 450 --apply best"));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_TRUE(has(run.out, "Applied 450 W (the most efficient)")) << run.out;
}

TEST_F(CliPower, ARefusedLimitFailsWithTheNvidiaSmiCommand) {
    simulate("RTX 4090:24;RTX 4090:24:power=denied");
    const CliRun run = run_cli(bench("--power-sweep --power-limits 400,300"));
    EXPECT_EQ(run.status, 1);
    EXPECT_TRUE(has(run.err,
                    "error: power sweep: at 400 W: Powerhouse lacks the right to change the power limit of "
                    "GPU 1 (RTX 4090)"))
        << run.err;
    EXPECT_TRUE(has(run.err, "To set it yourself, run: sudo nvidia-smi -i 1 -pl 400")) << run.err;
    EXPECT_TRUE(has(run.err, "(the power limits are back at 450 W)")) << run.err;
    EXPECT_FALSE(has(run.out, "most efficient")) << run.out;
}

// Ctrl-C (or a timeout's SIGTERM) mid-sweep: the limits go back before the process ends.
TEST_F(CliPower, AnInterruptedSweepPutsTheLimitsBack) {
    simulate("RTX 4090:24");
    test::TempDir dir;
    const std::string err = (dir / "stderr").string();
    // Enough tokens per step that the sweep is still running when the signal comes.
    const std::string command = "exec " + std::string(POWERHOUSE_CLI_PATH) + " " +
                                "bench -p 4 -n 200 -r 1 -t 2 --devices cpu -m " +
                                test::quoted(test::test_model_path()) +
                                " --power-sweep --power-limits 450,400,350,300 >/dev/null 2>" + test::quoted(err);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    // Waits for the second step (the first limit is set) before interrupting.
    bool stepping = false;
    for (int i = 0; i < 1200 && !stepping; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        stepping = has(test::read_file(dir / "stderr"), "power sweep: step 2 at 400 W");
    }
    ::kill(pid, SIGINT);
    int raw = 0;
    ASSERT_EQ(::waitpid(pid, &raw, 0), pid);
    ASSERT_TRUE(stepping) << test::read_file(dir / "stderr");
    EXPECT_TRUE(WIFEXITED(raw));
    EXPECT_EQ(WEXITSTATUS(raw), 128 + SIGINT);
    EXPECT_TRUE(has(test::read_file(dir / "stderr"), "interrupted: the power limits are back as they were before"))
        << test::read_file(dir / "stderr");
}

TEST_F(CliPower, BadSweepRequestsAreRefusedWithAMessage) {
    simulate("RTX 4090:24;RTX 4090:24");
    expect_refused({
        {"--power-sweep --apply fast", 2, "--apply takes best (the most tokens per joule), knee"},
        {"--power-sweep --apply 0", 2, "--apply takes best"},
        {"--apply knee", 2, "--apply requires --power-sweep"},
        {"--power-limits 300", 2, "--power-limits requires --power-sweep"},
        {"--power-sweep --power-limits 300,-5", 2, "a power limit is a number of watts above 0, not \"-5\""},
        {"--power-sweep --power-limits 50", 1, "power sweep: 50 W is outside GPU 0's range, 150 W to 600 W"},
        {"--power-sweep --apply 700", 1, "--apply 700 W is outside GPU 0's range, 150 W to 600 W"},
        {"--power-sweep --sweep-gpus 7", 1, "no GPU numbered \"7\": the GPUs are 0 (GPU-"},
        {"--power-sweep --parallel 2", 1, "--power-sweep does not combine with --parallel"},
        {"--power-sweep --price-per-kwh 0.3", 1, "--price-per-kwh does not combine with --power-sweep"},
    });
    // No simulated GPUs: none at all, or real ones (the fake NVML) while the model is on the CPU.
    unsetenv("POWERHOUSE_SIMULATE_GPUS");
    CliRun run = run_cli(bench("--power-sweep"));
    EXPECT_EQ(run.status, 1);
    EXPECT_TRUE(has(run.err, "a power sweep needs a GPU, and none was found (no NVIDIA driver found")) << run.err;
    setenv("POWERHOUSE_NVML_LIBRARY", FAKE_NVML_PATH, 1);
    setenv("FAKE_NVML_SCENARIO", "normal", 1);
    run = run_cli(bench("--power-sweep"));
    EXPECT_EQ(run.status, 1);
    EXPECT_TRUE(has(run.err, "the model runs on the CPU, whose speed no GPU power limit changes")) << run.err;
}

// 10 h a day at 200 W and 0.25 per kWh, 1500 written off over 24 months, and an A100 rented
// at 1.6 an hour: every figure but the speed is given, so the rest follows by hand.
TEST_F(CliPower, CostsFollowFromTheMeasuredSpeedAndTheGivenFigures) {
    const std::string costs =
        "--price-per-kwh 0.25 --hours-per-day 10 --watts 200 --hardware-price 1500 --write-off-months 24 "
        "--cloud-price-per-hour 1.6 --cloud-gpu A100";
    CliRun run = run_cli(bench(costs + " --json"));
    ASSERT_EQ(run.status, 0) << run.err;
    const auto json = nlohmann::json::parse(run.out);
    const double speed = json["tg"]["tokens_per_second"]["mean"].get<double>();
    const auto& c = json["costs"];
    EXPECT_EQ(c["tokens_per_second"].get<double>(), speed);
    EXPECT_EQ(c["watts"], 200.0);
    EXPECT_EQ(c["watts_source"], "given with --watts");
    const double month_days = 365.25 / 12;
    const double hardware_a_day = 1500 / (24 * month_days);  // 2.0534...
    for (const auto& [period, days] : {std::pair{"day", 1.0}, {"week", 7.0}, {"month", month_days}}) {
        SCOPED_TRACE(period);
        const auto& p = c[period];
        const double tokens = speed * 10 * days * 3600;
        const double kwh = 200 * 10 * days / 1000;
        const double total = kwh * 0.25 + hardware_a_day * days;
        EXPECT_NEAR(p["tokens"].get<double>(), tokens, 1e-9 * tokens);
        EXPECT_NEAR(p["kwh"].get<double>(), kwh, 1e-12 * kwh);
        EXPECT_NEAR(p["energy_cost"].get<double>(), kwh * 0.25, 1e-12 * kwh);
        EXPECT_NEAR(p["hardware_cost"].get<double>(), hardware_a_day * days, 1e-12 * days);
        EXPECT_NEAR(p["total_cost"].get<double>(), total, 1e-12 * total);
        EXPECT_NEAR(p["tokens_per_unit"].get<double>(), tokens / total, 1e-9 * tokens / total);
        EXPECT_NEAR(p["cost_per_million_tokens"].get<double>(), total / tokens * 1e6, 1e-9 * total / tokens * 1e6);
    }
    // And as the engine computes them.
    LocalUsage usage{speed, 200, 10, 0.25, 1500, 24};
    const Result<UsageCosts> expected = local_costs(usage);
    ASSERT_TRUE(expected);
    EXPECT_DOUBLE_EQ(c["month"]["total_cost"].get<double>(), expected->month.total_cost);

    // The rented A100 (2039 GB/s in the planner's table) at its whole roofline, since the model
    // ran on the CPU: its bandwidth over the bytes the planner reads per token, which are about
    // the weights (the embedding's rows aside).
    const auto& cloud = c["cloud"];
    const double bytes = cloud["bytes_per_token"].get<double>();
    const auto weights = json["model_size_bytes"].get<double>();
    EXPECT_GT(bytes, 0.5 * weights);
    EXPECT_LT(bytes, 1.1 * weights);
    EXPECT_EQ(cloud["bandwidth_gb_s"], 2039.0);
    EXPECT_EQ(cloud["roofline_share"], 1.0);
    const double cloud_speed = 2039e9 / bytes;
    EXPECT_NEAR(cloud["tokens_per_second"].get<double>(), cloud_speed, 1e-9 * cloud_speed);
    const double month_tokens = c["month"]["tokens"].get<double>();
    EXPECT_NEAR(cloud["month"]["hours"].get<double>(), month_tokens / cloud_speed / 3600, 1e-9);
    EXPECT_NEAR(cloud["month"]["cost"].get<double>(), month_tokens / cloud_speed / 3600 * 1.6, 1e-9);

    // The table: the figures that do not depend on the speed, as a person would work them out.
    run = run_cli(bench(costs + " --currency EUR"));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_TRUE(has(run.out,
                    "and 200.0 W (given with --watts), generating 10 h a day, electricity at 0.25 per kWh, "
                    "hardware of 1500 written off over 24 months; amounts in EUR:"))
        << run.out;
    EXPECT_TRUE(has(run.out, "tokens per EUR")) << run.out;
    // period, tokens (2 words), kWh, electricity, hardware. Day: 2 kWh, 0.5 of electricity,
    // 2.053 of hardware; month (30.4375 days): 60.875 kWh, 15.22 and 62.5.
    using Words = std::vector<std::string>;
    const Words day = row(run.out, "day"), month = row(run.out, "month");
    ASSERT_GE(day.size(), 6u) << run.out;
    ASSERT_GE(month.size(), 6u) << run.out;
    EXPECT_EQ(Words(day.begin() + 3, day.begin() + 6), (Words{"2.000", "0.5", "2.053"})) << run.out;
    EXPECT_EQ(Words(month.begin() + 3, month.begin() + 6), (Words{"60.875", "15.22", "62.5"})) << run.out;
    EXPECT_TRUE(has(run.out, "Rented: one A100 at 1.6 per hour, 2039 GB/s:")) << run.out;
    EXPECT_TRUE(has(run.out, "A month's tokens cost ")) << run.out;
}

TEST_F(CliPower, BadCostFiguresAreRefusedBeforeTheRun) {
    expect_refused({
        {"--price-per-kwh 0.3", 1,
         "the model runs on the CPU, whose power Powerhouse cannot read: give the machine's "
         "power while generating with --watts"},
        {"--price-per-kwh -1 --watts 100", 1, "the electricity price (per kWh) must be 0 or more, not -1"},
        {"--price-per-kwh 0.3 --watts 100 --hours-per-day 25", 1,
         "the hours of generation a day must be above 0 and at most 24, not 25"},
        {"--price-per-kwh 0.3 --watts -5", 1, "the power (W) must be 0 or more, not -5"},
        {"--price-per-kwh 0.3 --watts 100 --hardware-price 1000", 2, "--hardware-price requires --write-off-months"},
        {"--price-per-kwh 0.3 --watts 100 --cloud-gpu A100", 2, "--cloud-gpu requires --cloud-price-per-hour"},
        {"--price-per-kwh 0.3 --watts 100 --cloud-price-per-hour -2 --cloud-gpu A100", 1,
         "the rented GPU's price per hour must be 0 or more, not -2"},
        {"--hours-per-day 4", 2, "--hours-per-day requires --price-per-kwh"},
        {"--price-per-kwh 0.3 --watts 100 --parallel 2", 1, "--price-per-kwh does not combine with --parallel"},
    });
}

TEST_F(CliPower, PowerShowsAndSetsTheLimits) {
    simulate("RTX 4090:24;A100:80");
    CliRun run = run_cli("power");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_TRUE(has(run.out, "SIMULATED")) << run.out;
    // GPU, name (2 words), draw (2), limit, enforced, default (2 words each), range (2).
    const std::vector<std::string> a100 = row(run.out, "1");
    ASSERT_EQ(a100.size(), 12u) << run.out;
    EXPECT_EQ(a100[1], "A100");
    EXPECT_EQ(std::vector<std::string>(a100.begin() + 4, a100.end()),
              (std::vector<std::string>{"400", "W", "400", "W", "400", "W", "100-400", "W"}))
        << run.out;
    run = run_cli("power --json");
    ASSERT_EQ(run.status, 0) << run.err;
    const auto json = nlohmann::json::parse(run.out);
    EXPECT_EQ(json["gpus"][1]["default_w"], 400.0);
    EXPECT_EQ(json["gpus"][1]["min_w"], 100.0);
    EXPECT_EQ(json["gpus"][1]["max_w"], 400.0);
    EXPECT_TRUE(json["gpus"][0]["power_w"].is_number());

    run = run_cli("power --set 0=300 --set 1=250");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_TRUE(has(run.out, "GPU 0 (RTX 4090): power limit 300 W, was 450 W (default 450 W)")) << run.out;
    EXPECT_TRUE(has(run.out, "GPU 1 (A100): power limit 250 W, was 400 W (default 400 W)")) << run.out;
    EXPECT_TRUE(has(run.out,
                    "The limits stay after this command ends, until you restore them (powerhouse-cli "
                    "power --restore, or sudo nvidia-smi -i 0 -pl 450; sudo nvidia-smi -i 1 -pl 400)"))
        << run.out;
    run = run_cli("power --set 1=300 --json");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(nlohmann::json::parse(run.out)["gpus"][1]["limit_w"], 300.0);  // what changed went to stderr
    EXPECT_TRUE(has(run.err, "GPU 1 (A100): power limit 300 W, was 400 W")) << run.err;

    run = run_cli("power --restore --gpus 1");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_TRUE(has(run.out, "GPU 1 (A100): already at its default power limit, 400 W")) << run.out;
    EXPECT_FALSE(has(run.out, "GPU 0")) << run.out;

    run = run_cli("power --set 0=700");
    EXPECT_EQ(run.status, 1);
    EXPECT_TRUE(has(run.err, "takes a power limit from 150 W to 600 W; 700 W is outside that range")) << run.err;
    run = run_cli("power --set 0=300 --set 5=300");  // nothing is changed when a GPU is unknown
    EXPECT_EQ(run.status, 1);
    EXPECT_TRUE(has(run.err, "no GPU numbered \"5\"")) << run.err;
    EXPECT_FALSE(has(run.out, "power limit 300 W")) << run.out;
    for (const char* bad : {"power --set 300", "power --set 0=fast", "power --set =300", "power --gpus 0",
                            "power --set 0=300 --restore"}) {
        SCOPED_TRACE(bad);
        run = run_cli(bad);
        EXPECT_EQ(run.status, 2) << run.out;
    }
    run = run_cli("power --set 300");
    EXPECT_TRUE(has(run.err, "--set takes GPU=WATTS, the GPU by index or UUID (for example 0=300), not \"300\""))
        << run.err;
}

TEST_F(CliPower, PowerWithoutTheRightGivesTheCommandAndPutsBackWhatItSet) {
    setenv("POWERHOUSE_NVML_LIBRARY", FAKE_NVML_PATH, 1);
    setenv("FAKE_NVML_SCENARIO", "power_denied", 1);
    CliRun run = run_cli("power --set 0=300");
    EXPECT_EQ(run.status, 1);
    EXPECT_TRUE(has(run.err, "To set it yourself, run: sudo nvidia-smi -i 0 -pl 300")) << run.err;
    // GPU 0 takes its limit; GPU 1 refuses: GPU 0 goes back.
    simulate("RTX 4090:24;RTX 4090:24:power=denied");
    run = run_cli("power --set 0=300 --set 1=300");
    EXPECT_EQ(run.status, 1);
    EXPECT_TRUE(has(run.err, "sudo nvidia-smi -i 1 -pl 300 (GPU 0 put back as it was)")) << run.err;

    unsetenv("POWERHOUSE_SIMULATE_GPUS");
    setenv("FAKE_NVML_SCENARIO", "normal", 1);
    run = run_cli("power");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_TRUE(has(run.out, "NVIDIA GeForce RTX 4090")) << run.out;
    run = run_cli("power --restore");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_TRUE(has(run.out, "GPU 0 (NVIDIA GeForce RTX 4090): already at its default power limit, 450 W")) << run.out;
}

}  // namespace
}  // namespace powerhouse
