// Remote telemetry on the dashboard: RemoteGpuModel reading the DCGM exporter's and vLLM's
// sample files (tests/data/remote) and a Powerhouse /metrics with simulated GPUs, served on
// 127.0.0.1 by tests/app/remote/openai_fault_server.py from a folder of this test's own (so
// that a source can vanish and come back); a refused port; and the metrics URL of
// Settings → Engines' endpoints, with endpoints saved before it existed still loading.
#include <QFile>
#include <QTest>

#include <filesystem>
#include <fstream>
#include <memory>

#include <gtest/gtest.h>

#include "desktop_test_support.h"
#include "engines_controller.h"
#include "http_test_server.h"
#include "remote_gpu_model.h"
#include "store/store.h"
#include "support/test_support.h"

namespace {

namespace fs = std::filesystem;
using powerhouse::test::TempDir;
constexpr double kMiB = 1024.0 * 1024.0;

// A Powerhouse server's /metrics with one simulated GPU and its engine's figures.
const char* kPowerhouseMetrics =
    "powerhouse_generation_tokens_per_second 87.5\n"
    "powerhouse_sequences_running 2\n"
    "powerhouse_sequences_waiting 1\n"
    "powerhouse_kv_blocks{state=\"used\"} 16\n"
    "powerhouse_kv_blocks{state=\"total\"} 64\n"
    "powerhouse_gpu_up{gpu=\"0\",uuid=\"GPU-a\",name=\"RTX 4090\",simulated=\"true\"} 1\n"
    "powerhouse_gpu_utilization_ratio{gpu=\"0\",uuid=\"GPU-a\",name=\"RTX 4090\",simulated=\"true\"} 0.42\n"
    "powerhouse_gpu_memory_used_bytes{gpu=\"0\",uuid=\"GPU-a\",name=\"RTX 4090\",simulated=\"true\"} 1073741824\n"
    "powerhouse_gpu_memory_total_bytes{gpu=\"0\",uuid=\"GPU-a\",name=\"RTX 4090\",simulated=\"true\"} 25769803776\n";

class RemoteTelemetryTest : public ::testing::Test {
protected:
    void SetUp() override {
        folder_ = dir_.path() / "fixtures";
        fs::create_directories(folder_);
        const fs::path data = powerhouse::test::data_dir() / "remote";
        fs::copy_file(data / "dcgm_exporter.prom", folder_ / "dcgm_exporter.prom");
        fs::copy_file(data / "vllm_v1.prom", folder_ / "vllm_v1.prom");
        std::ofstream(folder_ / "powerhouse.prom") << kPowerhouseMetrics;
        std::ofstream(folder_ / "html.prom") << "<html><body>Sign in</body></html>\n";
        server_ = std::make_unique<powerhouse::test::HttpTestServer>(
            POWERHOUSE_REMOTE_TEST_DIR "/openai_fault_server.py",
            std::vector<std::string>{"--fixtures", folder_.string()});
        ASSERT_TRUE(server_->running());
    }
    std::string url(const std::string& name) const { return server_->url("/metrics/" + name); }
    static QVariant at(const GpuListModel* gpus, int row, int role) { return gpus->data(gpus->index(row), role); }
    static QVariant at(const RemoteGpuModel& model, int row, int role) { return model.data(model.index(row), role); }

    TempDir dir_;
    fs::path folder_;
    std::unique_ptr<powerhouse::test::HttpTestServer> server_;
};

TEST_F(RemoteTelemetryTest, DcgmVllmAndPowerhouseSourcesShowHostsGpusAndEngineFigures) {
    RemoteGpuModel model(std::chrono::milliseconds(200));
    model.setSources({{"cluster", url("dcgm_exporter"), "", ""},
                      {"vllm", url("vllm_v1"), "", ""},
                      {"serve", url("powerhouse"), "", ""}});
    // Two readings of each, for the history and tokens/s.
    int readings = 0;
    QObject::connect(&model, &RemoteGpuModel::readingApplied, [&readings] { ++readings; });
    ASSERT_TRUE(QTest::qWaitFor([&] { return readings >= 6; }, 30000));

    ASSERT_EQ(model.rowCount(), 3);
    const int dcgm = model.find("cluster", "gpu-node-1");  // the Hostname label
    ASSERT_EQ(dcgm, 0);
    EXPECT_EQ(at(model, dcgm, RemoteGpuModel::TitleRole).toString(),
              QString::fromStdString("gpu-node-1 · DCGM exporter at " + url("dcgm_exporter")));
    EXPECT_EQ(at(model, dcgm, RemoteGpuModel::ErrorRole).toString(), QString());
    EXPECT_FALSE(at(model, dcgm, RemoteGpuModel::SimulatedRole).toBool());
    const GpuListModel* gpus = model.gpusAt(dcgm);
    ASSERT_NE(gpus, nullptr);
    ASSERT_EQ(gpus->rowCount(), 2);
    EXPECT_EQ(at(model, dcgm, RemoteGpuModel::GpusRole).value<GpuListModel*>(), gpus);
    EXPECT_EQ(at(gpus, 0, GpuListModel::NameRole).toString(), "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(at(gpus, 0, GpuListModel::UuidRole).toString(), "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52");
    EXPECT_EQ(at(gpus, 0, GpuListModel::MemoryUsedRole).toDouble(), 77972 * kMiB);  // FB_USED, MiB
    EXPECT_EQ(at(gpus, 0, GpuListModel::MemoryTotalRole).toDouble(), (77972 + 3107) * kMiB);
    EXPECT_EQ(at(gpus, 0, GpuListModel::LoadRole).toInt(), 97);
    EXPECT_EQ(at(gpus, 0, GpuListModel::TemperatureRole).toInt(), 61);
    EXPECT_DOUBLE_EQ(at(gpus, 0, GpuListModel::PowerRole).toDouble(), 512.337);
    EXPECT_EQ(at(gpus, 0, GpuListModel::ClocksRole).toString(), "1980 / 2619 MHz");
    EXPECT_TRUE(at(gpus, 0, GpuListModel::RespondingRole).toBool());
    EXPECT_GE(at(gpus, 0, GpuListModel::LoadHistoryRole).toList().size(), 2);  // a history, like local GPUs
    EXPECT_EQ(at(gpus, 0, GpuListModel::LoadHistoryRole).toList().last().toDouble(), 97.0);
    EXPECT_EQ(at(gpus, 1, GpuListModel::LoadRole).toInt(), 0);
    EXPECT_TRUE(at(model, dcgm, RemoteGpuModel::EnginesRole).toList().isEmpty());

    // vLLM: no GPUs, the engine's figures under the URL's host.
    const int vllm = model.find("vllm", "127.0.0.1");
    ASSERT_EQ(vllm, 1);
    EXPECT_EQ(at(model, vllm, RemoteGpuModel::GpuCountRole).toInt(), 0);
    EXPECT_TRUE(
        at(model, vllm, RemoteGpuModel::TitleRole).toString().startsWith("127.0.0.1 · vLLM at http://127.0.0.1:"));
    const QVariantList engines = at(model, vllm, RemoteGpuModel::EnginesRole).toList();
    ASSERT_EQ(engines.size(), 1);
    const QVariantMap e = engines[0].toMap();
    EXPECT_EQ(e["engine"].toString(), "vLLM");
    EXPECT_EQ(e["model"].toString(), "meta-llama/Llama-3.1-70B-Instruct");
    EXPECT_EQ(e["running"].toDouble(), 8.0);
    EXPECT_EQ(e["waiting"].toDouble(), 2.0);
    EXPECT_DOUBLE_EQ(e["kvCache"].toDouble(), 0.375);
    EXPECT_EQ(e["tokensPerSecond"].toDouble(), 0.0);  // the counter stood still between two readings
    EXPECT_EQ(e["summary"].toString(),
              "vLLM serving meta-llama/Llama-3.1-70B-Instruct: 8 running · 2 waiting · KV cache 38 % · 0.0 tokens/s");

    // A Powerhouse server with simulated GPUs: labelled, and its engine's own tokens/s.
    const int serve = model.find("serve", "127.0.0.1");
    ASSERT_EQ(serve, 2);
    EXPECT_TRUE(at(model, serve, RemoteGpuModel::SimulatedRole).toBool());
    ASSERT_EQ(model.gpusAt(serve)->rowCount(), 1);
    EXPECT_TRUE(at(model.gpusAt(serve), 0, GpuListModel::SimulatedRole).toBool());
    EXPECT_EQ(at(model.gpusAt(serve), 0, GpuListModel::LoadRole).toInt(), 42);
    EXPECT_EQ(at(model.gpusAt(serve), 0, GpuListModel::TemperatureRole).toInt(), -1);  // not given: "—"
    EXPECT_EQ(at(model.gpusAt(serve), 0, GpuListModel::PowerRole).toDouble(), -1.0);
    const QVariantMap p = at(model, serve, RemoteGpuModel::EnginesRole).toList().value(0).toMap();
    EXPECT_EQ(p["engine"].toString(), "Powerhouse");
    EXPECT_EQ(p["tokensPerSecond"].toDouble(), 87.5);
    EXPECT_DOUBLE_EQ(p["kvCache"].toDouble(), 0.25);

    // A source removed goes at once.
    model.setSources({{"cluster", url("dcgm_exporter"), "", ""}});
    EXPECT_EQ(model.rowCount(), 1);
    EXPECT_EQ(model.find("vllm", "127.0.0.1"), -1);
}

TEST_F(RemoteTelemetryTest, AFailingSourceShowsItsErrorKeepsItsCardsAndRecovers) {
    RemoteGpuModel model(std::chrono::milliseconds(200));
    model.setSources({{"dead", "http://127.0.0.1:1/metrics", "", ""},
                      {"html", url("html"), "", ""},
                      {"flaky", url("flaky"), "", ""}});
    ASSERT_TRUE(QTest::qWaitFor([&] { return model.rowCount() == 3; }, 30000));
    for (const char* name : {"dead", "html", "flaky"}) {
        const int row = model.find(name, "127.0.0.1");
        ASSERT_GE(row, 0) << name;
        EXPECT_FALSE(at(model, row, RemoteGpuModel::ErrorRole).toString().isEmpty()) << name;
        EXPECT_EQ(at(model, row, RemoteGpuModel::GpuCountRole).toInt(), 0) << name;
    }
    // Not Prometheus text: said so (RemoteEngine's message).
    const QString html = at(model, model.find("html", "127.0.0.1"), RemoteGpuModel::ErrorRole).toString();
    EXPECT_TRUE(html.contains("no Prometheus samples")) << html.toStdString();

    // The source comes up: its host and GPUs replace the error.
    fs::copy_file(folder_ / "dcgm_exporter.prom", folder_ / "flaky.prom");
    ASSERT_TRUE(QTest::qWaitFor([&] { return model.find("flaky", "gpu-node-1") >= 0; }, 30000));
    int row = model.find("flaky", "gpu-node-1");
    EXPECT_EQ(model.find("flaky", "127.0.0.1"), -1);
    EXPECT_TRUE(at(model, row, RemoteGpuModel::ErrorRole).toString().isEmpty());
    GpuListModel* gpus = model.gpusAt(row);
    ASSERT_EQ(gpus->rowCount(), 2);

    // It goes away: the cards stay, not responding, with the error; then it comes back.
    fs::remove(folder_ / "flaky.prom");
    ASSERT_TRUE(QTest::qWaitFor(
        [&] { return !at(model, model.find("flaky", "gpu-node-1"), RemoteGpuModel::ErrorRole).toString().isEmpty(); },
        30000));
    row = model.find("flaky", "gpu-node-1");
    EXPECT_EQ(model.gpusAt(row), gpus);  // the same cards, with their history
    EXPECT_FALSE(at(gpus, 0, GpuListModel::RespondingRole).toBool());
    EXPECT_TRUE(at(gpus, 0, GpuListModel::ProblemRole).toString().contains("no reading for"))
        << at(gpus, 0, GpuListModel::ProblemRole).toString().toStdString();
    fs::copy_file(folder_ / "dcgm_exporter.prom", folder_ / "flaky.prom");
    ASSERT_TRUE(QTest::qWaitFor(
        [&] { return at(model, model.find("flaky", "gpu-node-1"), RemoteGpuModel::ErrorRole).toString().isEmpty(); },
        30000));
    EXPECT_TRUE(at(gpus, 0, GpuListModel::RespondingRole).toBool());
    EXPECT_EQ(at(gpus, 0, GpuListModel::LoadRole).toInt(), 97);
    EXPECT_EQ(model.rowCount(), 3);
}

// Each source is read on its own: one that never answers holds up no other (it comes first,
// so that reading the sources one after the other would make the others wait for its
// timeout), and a URL with nothing there says where metrics are served.
TEST_F(RemoteTelemetryTest, ASilentSourceHoldsUpNoOtherAndA404SaysWhereMetricsLive) {
    RemoteGpuModel model(std::chrono::milliseconds(200));
    model.setSources({{"silent", server_->url("/silent/metrics/dcgm_exporter"), "", ""},
                      {"missing", url("nosuch"), "", ""},
                      {"cluster", url("dcgm_exporter"), "", ""}});
    ASSERT_TRUE(QTest::qWaitFor(
        [&] { return model.find("cluster", "gpu-node-1") >= 0 && model.find("missing", "127.0.0.1") >= 0; }, 30000));
    EXPECT_EQ(model.find("silent", "127.0.0.1"), -1) << "the silent source is still being waited for";
    const QString missing = at(model, model.find("missing", "127.0.0.1"), RemoteGpuModel::ErrorRole).toString();
    EXPECT_TRUE(missing.contains("404 Not Found")) << missing.toStdString();
    EXPECT_TRUE(missing.contains("DCGM exporter on port 9400")) << missing.toStdString();
    EXPECT_FALSE(missing.contains("model name")) << "not the chat API's advice";
    // Its timeout comes, and it is said so.
    ASSERT_TRUE(QTest::qWaitFor([&] { return model.find("silent", "127.0.0.1") >= 0; }, 30000));
    EXPECT_FALSE(at(model, model.find("silent", "127.0.0.1"), RemoteGpuModel::ErrorRole).toString().isEmpty());
}

TEST(EnginesMetricsUrl, OldEndpointsLoadAndAMetricsUrlIsKeptAndOffered) {
    TempDir dir;
    auto store = powerhouse::test::open_store(dir);
    // Saved before metrics URLs existed.
    ASSERT_TRUE(store.set_setting("remote_endpoints",
                                  R"([{"name":"old","url":"http://127.0.0.1:8000/v1","ca_file":"","has_key":false}])"));
    {
        EnginesController engines(store);
        ASSERT_EQ(engines.endpoints().size(), 1);
        EXPECT_EQ(engines.endpoints()[0].toMap()["metricsUrl"].toString(), QString());
        EXPECT_TRUE(engines.metricsSources().empty());
        EXPECT_FALSE(engines.addEndpoint("bad", "http://127.0.0.1:8000/v1", {}, {}, "ftp://host/metrics"));
        EXPECT_TRUE(engines.message().startsWith("Metrics URL: "));
        int changes = 0;
        QObject::connect(&engines, &EnginesController::metricsSourcesChanged, [&changes] { ++changes; });
        ASSERT_TRUE(
            engines.addEndpoint("cluster", "http://127.0.0.1:8000/v1", {}, {}, " http://127.0.0.1:9400/metrics "));
        EXPECT_EQ(changes, 1);
    }
    EnginesController again(store);
    ASSERT_EQ(again.endpoints().size(), 2);
    const std::vector<MetricsSource> sources = again.metricsSources();
    ASSERT_EQ(sources.size(), 1u);
    EXPECT_EQ(sources[0].name, "cluster");
    EXPECT_EQ(sources[0].url, "http://127.0.0.1:9400/metrics");
    // The old entry is written back without the field.
    const auto saved = store.setting("remote_endpoints");
    ASSERT_TRUE(saved && *saved);
    EXPECT_NE((*saved)->find(R"({"ca_file":"","has_key":false,"name":"old","url":"http://127.0.0.1:8000/v1"})"),
              std::string::npos)
        << **saved;
}

}  // namespace
