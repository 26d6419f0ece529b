// A GPU failing under the monitor (issue 23): Xid events and lost GPUs from the fake NVML
// library (fake_nvml.cpp) and from simulated GPUs, the event functions missing or refused,
// and what Xid codes mean.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "platform/shared_library.h"
#include "powerhouse/telemetry.h"

namespace powerhouse {
namespace {

constexpr const char* kGpu1Uuid = "GPU-55555555-6666-7777-8888-999999999999";

GpuMonitor nvml_monitor(const char* scenario, const char* library = FAKE_NVML_PATH) {
    setenv("FAKE_NVML_SCENARIO", scenario, 1);
    GpuMonitorOptions options;
    options.nvml = library;
    return GpuMonitor(options);
}

GpuMonitor simulated_monitor(const char* spec) {
    GpuMonitorOptions options;
    options.simulate = spec;
    return GpuMonitor(options);
}

// Whether a GPU answers, whether it is lost, and whether its work must move.
void expect_gpu(const GpuSample& s, bool responding, bool lost, bool failed) {
    EXPECT_EQ(s.responding, responding) << s.problem;
    EXPECT_EQ(s.lost, lost) << s.problem;
    EXPECT_EQ(gpu_failed(s), failed) << s.problem;
}

std::vector<uint32_t> codes(const std::vector<XidEvent>& events) {
    std::vector<uint32_t> out;
    for (const XidEvent& e : events) out.push_back(e.xid);
    return out;
}

TEST(Xid, DescriptionsAndFatality) {
    EXPECT_EQ(xid_description(79), "fell off the bus");
    EXPECT_EQ(xid_description(48), "double-bit ECC error");
    EXPECT_EQ(xid_description(999), "an error the driver could not name");
    EXPECT_EQ(xid_description(12345), "an error Powerhouse does not know");
    for (uint32_t fatal : {13u, 31u, 43u, 45u, 48u, 62u, 74u, 79u, 95u, 119u, 120u}) {
        EXPECT_TRUE(xid_is_fatal(fatal)) << fatal;
        EXPECT_NE(xid_description(fatal), xid_description(12345)) << fatal;
    }
    for (uint32_t survivable : {63u, 64u, 92u, 94u, 999u, 0u, 12345u})
        EXPECT_FALSE(xid_is_fatal(survivable)) << survivable;
}

TEST(Xid, FailureTextNamesTheGpuAndTheXid) {
    GpuSample s;
    EXPECT_FALSE(gpu_failed(s));
    EXPECT_EQ(gpu_failure_text(1, s), "");
    s.last_xid = XidEvent{63, 1.0, xid_description(63), false};
    EXPECT_FALSE(gpu_failed(s));  // a survivable Xid
    s.last_fatal_xid = XidEvent{48, 2.0, xid_description(48), true};
    EXPECT_TRUE(gpu_failed(s));
    EXPECT_EQ(gpu_failure_text(1, s), "GPU 1 failed: Xid 48, double-bit ECC error");
    s.lost = true;
    s.last_fatal_xid = XidEvent{79, 3.0, xid_description(79), true};
    EXPECT_EQ(gpu_failure_text(1, s), "GPU 1 stopped answering: Xid 79, fell off the bus");
    s.last_fatal_xid.reset();
    EXPECT_EQ(gpu_failure_text(2, s), "GPU 2 stopped answering: the driver reports it lost");
}

TEST(GpuFailure, AnXidFromNvmlReachesItsGpusSampleOnce) {
    GpuMonitor monitor = nvml_monitor("xid:13@2");  // GPU 1's first sample is its 2nd memory reading
    TelemetrySnapshot s = monitor.sample_now();
    EXPECT_EQ(s.xid_status, "");
    ASSERT_EQ(s.gpus.size(), 2u);
    EXPECT_TRUE(s.gpus[0].xid_events_watched);
    EXPECT_TRUE(s.gpus[1].xid_events_watched);
    EXPECT_EQ(s.gpus[1].uuid, kGpu1Uuid);
    EXPECT_TRUE(s.latest[0].xid_events.empty());
    ASSERT_EQ(codes(s.latest[1].xid_events), std::vector<uint32_t>{13});
    const XidEvent& x = s.latest[1].xid_events[0];
    EXPECT_EQ(x.description, "the compute engine hit an exception");
    EXPECT_TRUE(x.fatal);
    EXPECT_DOUBLE_EQ(x.time, s.latest[1].time);
    // The GPU still answers, but its work must move.
    expect_gpu(s.latest[1], true, false, true);
    expect_gpu(s.latest[0], true, false, false);
    EXPECT_EQ(gpu_failure_text(1, s.latest[1]), "GPU 1 failed: Xid 13, the compute engine hit an exception");

    // Delivered once; remembered after.
    s = monitor.sample_now();
    EXPECT_TRUE(s.latest[1].xid_events.empty());
    ASSERT_TRUE(s.latest[1].last_xid.has_value());
    EXPECT_EQ(s.latest[1].last_xid->xid, 13u);
    EXPECT_EQ(s.latest[1].last_fatal_xid->xid, 13u);
    EXPECT_EQ(monitor.history(1).front().xid_events.size(), 1u);
}

TEST(GpuFailure, AGpuThatFallsOffTheBusIsLostWithItsXid) {
    // GPU 1's third reading (the second sample) finds it gone, Xid 79 raised as it went.
    GpuMonitor monitor = nvml_monitor("lost_after:2,xid:79@3");
    TelemetrySnapshot s = monitor.sample_now();
    expect_gpu(s.latest[1], true, false, false);

    s = monitor.sample_now();
    const GpuSample& lost = s.latest[1];
    EXPECT_EQ(s.gpus[1].uuid, kGpu1Uuid);
    expect_gpu(lost, false, true, true);
    EXPECT_EQ(lost.problem, "GPU 1 not responding: GPU is lost (NVML error 15)");
    EXPECT_FALSE(lost.memory_used || lost.temperature_c || lost.gpu_utilization);
    ASSERT_EQ(codes(lost.xid_events), std::vector<uint32_t>{79});
    EXPECT_EQ(lost.xid_events[0].description, "fell off the bus");
    EXPECT_EQ(gpu_failure_text(1, lost), "GPU 1 stopped answering: Xid 79, fell off the bus");
    expect_gpu(s.latest[0], true, false, false);
    EXPECT_EQ(s.latest[0].temperature_c, 71u);

    s = monitor.sample_now();
    EXPECT_TRUE(s.latest[1].lost);
    EXPECT_TRUE(s.latest[1].xid_events.empty());
    EXPECT_EQ(s.latest[1].last_fatal_xid->xid, 79u);
}

TEST(GpuFailure, AQueryThatTimesOutOnceIsNotALostGpu) {
    GpuMonitor monitor = nvml_monitor("timeout@2");
    TelemetrySnapshot s = monitor.sample_now();
    expect_gpu(s.latest[1], false, false, false);
    EXPECT_EQ(s.latest[1].problem, "GPU 1 not responding: Timeout (NVML error 10)");
    s = monitor.sample_now();
    EXPECT_TRUE(s.latest[1].responding);
    EXPECT_EQ(s.latest[1].memory_used, 1ull << 30);
}

TEST(GpuFailure, AGpuLostBeforeTheFirstSampleIsLostFromIt) {
    GpuMonitor monitor = nvml_monitor("lost_after:0");
    const TelemetrySnapshot s = monitor.sample_now();
    ASSERT_EQ(s.gpus.size(), 2u);
    EXPECT_EQ(s.gpus[1].uuid, kGpu1Uuid);  // asked before its memory, which found it lost
    EXPECT_EQ(s.gpus[1].memory_total, 0u);
    EXPECT_FALSE(s.gpus[1].pcie_width.has_value());
    EXPECT_FALSE(s.gpus[1].xid_events_watched);
    EXPECT_TRUE(s.gpus[0].xid_events_watched);
    EXPECT_EQ(s.xid_status, "Xid events not available for GPU 1: GPU is lost (NVML error 15)");
    EXPECT_TRUE(s.latest[1].lost);
    EXPECT_EQ(gpu_failure_text(1, s.latest[1]), "GPU 1 stopped answering: the driver reports it lost");
    EXPECT_TRUE(s.latest[0].responding);
}

TEST(GpuFailure, ADoubleBitEccErrorIsOneXid48) {
    {
        GpuMonitor monitor = nvml_monitor("dbe@2");
        const TelemetrySnapshot s = monitor.sample_now();
        ASSERT_EQ(codes(s.latest[1].xid_events), std::vector<uint32_t>{48});
        EXPECT_EQ(s.latest[1].xid_events[0].description, "double-bit ECC error");
    }
    {
        // The driver reports it both ways; one Xid 48 is shown, two of them twice.
        GpuMonitor monitor = nvml_monitor("dbe@2,xid:48@2,xid:31@2");
        const TelemetrySnapshot s = monitor.sample_now();
        EXPECT_EQ(codes(s.latest[1].xid_events), (std::vector<uint32_t>{48, 31}));
        EXPECT_EQ(s.latest[1].last_xid->xid, 31u);
    }
    {
        GpuMonitor monitor = nvml_monitor("dbe@2,dbe@2,xid:48@2,xid:48@2");
        EXPECT_EQ(codes(monitor.sample_now().latest[1].xid_events), (std::vector<uint32_t>{48, 48}));
    }
}

TEST(GpuFailure, WithoutTheEventFunctionsSamplingGoesOn) {
    GpuMonitor monitor = nvml_monitor("xid:79@2", FAKE_NVML_MINIMAL_PATH);
    const TelemetrySnapshot s = monitor.sample_now();
    EXPECT_EQ(s.status, "");
    EXPECT_EQ(s.xid_status, "Xid events not available: the NVML library has no event functions (nvmlEventSetWait_v2)");
    ASSERT_EQ(s.gpus.size(), 2u);
    EXPECT_FALSE(s.gpus[0].xid_events_watched);
    EXPECT_TRUE(s.latest[1].responding);
    EXPECT_EQ(s.latest[1].memory_used, 1ull << 30);
    EXPECT_TRUE(s.latest[1].xid_events.empty());
}

TEST(GpuFailure, EventsRefusedBySomeOrAllGpus) {
    {
        GpuMonitor monitor = nvml_monitor("events_unsupported,xid:79@2");
        const TelemetrySnapshot s = monitor.sample_now();
        EXPECT_EQ(s.xid_status, "Xid events not available for GPU 0, 1: Not Supported (NVML error 3)");
        EXPECT_FALSE(s.gpus[0].xid_events_watched || s.gpus[1].xid_events_watched);
        EXPECT_TRUE(s.latest[1].responding);
        EXPECT_EQ(s.latest[0].temperature_c, 71u);
        EXPECT_TRUE(s.latest[1].xid_events.empty());
    }
    {
        // GPU 0 has no ECC: its double-bit ECC events are refused, its Xids watched all the same.
        GpuMonitor monitor = nvml_monitor("normal");
        const TelemetrySnapshot s = monitor.sample_now();
        EXPECT_EQ(s.xid_status, "");
        EXPECT_TRUE(s.gpus[0].xid_events_watched);
    }
}

TEST(GpuFailure, TheEventSetIsFreedWithTheMonitor) {
    // Loaded here too, the fake stays loaded, and its count with it, once the monitor closes it.
    Result<SharedLibrary> fake = SharedLibrary::open(FAKE_NVML_PATH);
    ASSERT_TRUE(fake) << fake.error().message;
    const auto open_sets = fake->symbol<int (*)()>("fake_nvml_open_event_sets");
    ASSERT_NE(open_sets, nullptr);
    const int before = open_sets();
    {
        GpuMonitor monitor = nvml_monitor("normal");
        monitor.sample_now();
        EXPECT_EQ(open_sets(), before + 1);
    }
    EXPECT_EQ(open_sets(), before);
    {
        GpuMonitor monitor = nvml_monitor("events_unsupported");  // no GPU to watch: freed at once
        EXPECT_EQ(open_sets(), before);
    }
}

TEST(GpuFailure, ASimulatedGpuFallsOffTheBusOnCue) {
    GpuMonitor monitor = simulated_monitor("RTX 4090:24;RTX 4090:24:xid=79@3");
    GpuMonitor healthy = simulated_monitor("RTX 4090:24;RTX 4090:24");
    for (int sample = 1; sample <= 4; ++sample) {
        const TelemetrySnapshot s = monitor.sample_now();
        const TelemetrySnapshot h = healthy.sample_now();
        EXPECT_TRUE(s.simulated);
        EXPECT_EQ(s.status, "");
        EXPECT_EQ(s.xid_status, "");
        ASSERT_EQ(s.gpus.size(), 2u);
        EXPECT_TRUE(s.gpus[1].xid_events_watched);
        EXPECT_EQ(s.gpus[1].name, "RTX 4090");
        // The other GPU reads as it would without the failure.
        EXPECT_EQ(s.latest[0].power_w, h.latest[0].power_w) << sample;
        EXPECT_TRUE(s.latest[0].responding);
        const GpuSample& g = s.latest[1];
        expect_gpu(g, sample < 3, sample >= 3, sample >= 3);
        EXPECT_EQ(g.xid_events.size(), sample == 3 ? 1u : 0u) << sample;
        if (sample >= 3) {
            EXPECT_EQ(g.problem, "GPU 1 not responding: GPU is lost (simulated)");
            EXPECT_FALSE(g.power_w.has_value());
            EXPECT_EQ(gpu_failure_text(1, g), "GPU 1 stopped answering: Xid 79, fell off the bus");
        }
    }
}

TEST(GpuFailure, SimulatedXidsAndLossesCombine) {
    GpuMonitor monitor = simulated_monitor("A100:80:xid=63@1:xid=48@2:lost@4 ; A100:80:lost@2");
    TelemetrySnapshot s = monitor.sample_now();
    ASSERT_EQ(s.gpus.size(), 2u);
    EXPECT_EQ(s.gpus[0].name, "A100");
    EXPECT_EQ(codes(s.latest[0].xid_events), std::vector<uint32_t>{63});
    EXPECT_FALSE(gpu_failed(s.latest[0]));  // row remapping: the work survives it
    EXPECT_FALSE(s.latest[1].lost);
    s = monitor.sample_now();
    EXPECT_EQ(codes(s.latest[0].xid_events), std::vector<uint32_t>{48});
    EXPECT_TRUE(s.latest[0].responding);
    EXPECT_EQ(gpu_failure_text(0, s.latest[0]), "GPU 0 failed: Xid 48, double-bit ECC error");
    EXPECT_TRUE(s.latest[1].lost);
    EXPECT_EQ(gpu_failure_text(1, s.latest[1]), "GPU 1 stopped answering: the driver reports it lost");
    s = monitor.sample_now();
    EXPECT_FALSE(s.latest[0].lost);
    s = monitor.sample_now();
    EXPECT_TRUE(s.latest[0].lost);
    EXPECT_EQ(s.latest[0].last_fatal_xid->xid, 48u);
}

TEST(GpuFailure, ABadSimulatedFailureSaysWhy) {
    const std::string syntax =
        "is not xid=CODE@N, lost@N (N counting the GPU's samples from 1), power=denied or power=fixed";
    for (const char* spec :
         {"RTX 4090:24:xid=abc@3", "RTX 4090:24:xid=79", "RTX 4090:24:xid=79@0", "RTX 4090:24:xid79@3",
          "RTX 4090:24:lost", "RTX 4090:24:lost@x", "A100:80;H100:80:xid=@2"}) {
        GpuMonitor monitor = simulated_monitor(spec);
        const TelemetrySnapshot s = monitor.sample_now();
        EXPECT_TRUE(s.gpus.empty()) << spec;
        EXPECT_NE(s.status.find(syntax), std::string::npos) << spec << ": " << s.status;
    }
    EXPECT_EQ(simulated_monitor("RTX 4090:24:xid=abc@3").sample_now().status,
              "simulated GPUs: device \"RTX 4090:24:xid=abc@3\": \"xid=abc@3\" is not xid=CODE@N, lost@N (N "
              "counting the GPU's samples from 1), power=denied or power=fixed (for example "
              "\"RTX 4090:24:xid=79@3\")");
    EXPECT_EQ(simulated_monitor(":xid=79@3").sample_now().status,
              "simulated GPUs: device \":xid=79@3\" has no NAME:GiB before its failure");
    // A failure on a device without its size is the old mistake, with the old message.
    const std::string no_size = simulated_monitor("RTX 4090:xid=79@3").sample_now().status;
    EXPECT_NE(no_size.find("\"RTX 4090\" is not NAME:GiB"), std::string::npos) << no_size;
}

}  // namespace
}  // namespace powerhouse
