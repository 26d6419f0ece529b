// The desktop app's C++ side on the real SmolLM2 model, without a window: the list models
// under QAbstractItemModelTester, the GPU dashboard, Markdown blocks and the settings
// controller's plan preview. The chat controller's own tests are in desktop_chat_test.cpp.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QCoreApplication>
#include <QSignalSpy>
#include <QTest>

#include <algorithm>
#include <memory>

#include "chat_controller.h"
#include "conversation_list_model.h"
#include "dashboard_controller.h"
#include "conversation_settings.h"
#include "markdown_blocks.h"
#include "settings_controller.h"
#include "engine_client.h"
#include "message_list_model.h"
#include "store/store.h"
#include "desktop_test_support.h"
#include "support/test_support.h"

namespace {

using powerhouse::store::MessageState;
using powerhouse::store::Store;

using powerhouse::test::expect_reference_answer;
using powerhouse::test::open_store;
using powerhouse::test::wait_for;

TEST(ConversationListModel, PassesTheModelTesterAndFollowsTheStore) {
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    ConversationListModel model(store);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    EXPECT_EQ(model.rowCount(), 0);
    const auto a = store.create_conversation("Geography");
    ASSERT_TRUE(a);
    ASSERT_TRUE(store.add_message(a->id, "user", "What is the capital of France?"));
    ASSERT_TRUE(store.create_conversation("Cooking"));
    model.reload();
    ASSERT_EQ(model.rowCount(), 2);
    EXPECT_EQ(model.data(model.index(0), ConversationListModel::TitleRole).toString(), "Cooking");
    model.setFilter("capital");
    ASSERT_EQ(model.rowCount(), 1);
    EXPECT_EQ(model.data(model.index(0), ConversationListModel::IdRole).toLongLong(), a->id);
    EXPECT_TRUE(model.data(model.index(0), ConversationListModel::SnippetRole).toString().contains("[capital]"));
    model.setFilter("");
    EXPECT_EQ(model.rowCount(), 2);

    // Which conversations are answering: one row changes, and a reload keeps it.
    const int row = model.rowOf(a->id);
    EXPECT_FALSE(model.data(model.index(row), ConversationListModel::GeneratingRole).toBool());
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.setGenerating(a->id, true);
    ASSERT_EQ(changed.count(), 1);
    EXPECT_EQ(changed[0][0].toModelIndex().row(), row);
    EXPECT_TRUE(model.data(model.index(row), ConversationListModel::GeneratingRole).toBool());
    EXPECT_FALSE(model.data(model.index(1 - row), ConversationListModel::GeneratingRole).toBool());
    model.setGenerating(a->id, true);
    EXPECT_EQ(changed.count(), 1) << "no change, no signal";
    model.reload();
    EXPECT_TRUE(model.data(model.index(model.rowOf(a->id)), ConversationListModel::GeneratingRole).toBool());
    model.setGenerating(a->id, false);
    EXPECT_FALSE(model.data(model.index(model.rowOf(a->id)), ConversationListModel::GeneratingRole).toBool());
    EXPECT_EQ(model.roleNames().value(ConversationListModel::GeneratingRole), "generating");
}

TEST(MessageListModel, PassesTheModelTesterWhileTextStreamsIn) {
    MessageListModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    powerhouse::store::Message q;
    q.id = 1;
    q.role = "user";
    q.content = "hi";
    model.append(q);
    powerhouse::store::Message a;
    a.id = 2;
    a.role = "assistant";
    a.state = MessageState::streaming;
    model.append(a);
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.appendText(2, "Hel");
    model.appendText(2, "lo");
    EXPECT_EQ(changed.count(), 2);
    EXPECT_EQ(model.data(model.index(1), MessageListModel::ContentRole).toString(), "Hello");
    EXPECT_EQ(model.data(model.index(1), MessageListModel::StateRole).toInt(), static_cast<int>(MessageListModel::State::Streaming));
    model.removeFrom(1);
    EXPECT_EQ(model.rowCount(), 1);
}

TEST(GpuListModel, FollowsTheSimulatedGpusAndKeepsAHistory) {
    powerhouse::GpuMonitorOptions options;
    options.simulate = "RTX 4090:24;A100:80";
    DashboardController dashboard(options);
    QAbstractItemModelTester tester(dashboard.gpus(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    dashboard.start();
    GpuListModel& gpus = *dashboard.gpus();
    ASSERT_EQ(gpus.rowCount(), 2);
    EXPECT_TRUE(dashboard.simulated());
    EXPECT_TRUE(dashboard.status().isEmpty());
    EXPECT_TRUE(gpus.data(gpus.index(0), GpuListModel::NameRole).toString().contains("4090"));
    EXPECT_TRUE(gpus.data(gpus.index(1), GpuListModel::SimulatedRole).toBool());
    EXPECT_DOUBLE_EQ(gpus.data(gpus.index(1), GpuListModel::MemoryTotalRole).toDouble(), 80.0 * (1ull << 30));
    // The monitor samples once a second; each sample adds to the history.
    ASSERT_TRUE(QTest::qWaitFor(
        [&] { return gpus.data(gpus.index(0), GpuListModel::LoadHistoryRole).toList().size() >= 3; }, 10000));
    EXPECT_GE(gpus.data(gpus.index(0), GpuListModel::TemperatureRole).toInt(), 0);
}

TEST(DashboardController, SimulatedGpusHoldTheModelAndMeasureEachAnswersEnergy) {
    powerhouse::GpuMonitorOptions options;
    options.simulate = "RTX 4090:24;RTX 4090:24";
    DashboardController dashboard(options);
    dashboard.start();
    // No GPU holds the model yet: no energy.
    dashboard.beginAnswer(1);
    EXPECT_FALSE(dashboard.endAnswer(1).joules.has_value());

    const uint64_t bytes = 3ull << 30;
    dashboard.setModelGpus({QVariantMap{{"gpu", 1}, {"bytes", static_cast<double>(bytes)}}});
    dashboard.beginAnswer(2);
    QTest::qWait(400);
    const std::optional<double> joules = dashboard.endAnswer(2).joules;
    ASSERT_TRUE(joules.has_value());
    // GPU 1 was 90% loaded: about 0.9 * 92% of 450 W, for the 0.4 s or a little more.
    EXPECT_GT(*joules, 0.4 * 300.0);
    EXPECT_LT(*joules, 2.0 * 450.0);
    // It holds the model's memory; GPU 0 holds nothing of it.
    ASSERT_TRUE(QTest::qWaitFor([&] {
        const GpuListModel& gpus = *dashboard.gpus();
        return gpus.data(gpus.index(1), GpuListModel::MemoryUsedRole).toDouble() >= static_cast<double>(bytes);
    }, 5000));
    const GpuListModel& gpus = *dashboard.gpus();
    EXPECT_LT(gpus.data(gpus.index(0), GpuListModel::MemoryUsedRole).toDouble(), static_cast<double>(bytes));
}

TEST(MarkdownBlocks, CutsFencedCodeOutOfTheText) {
    using Kind = MarkdownBlock::Kind;
    const auto blocks = split_markdown_blocks(
        "Here it is:\n\n```python\ndef f(s):\n    return s[::-1]\n```\n\nAnd in C:\n"
        "  ~~~~ c  extra words\n  int x;\n    y();\n  ~~~~~\nDone with `inline` and ``` not a fence ``` here.");
    ASSERT_EQ(blocks.size(), 5u);
    EXPECT_EQ(blocks[0], (MarkdownBlock{Kind::text, "Here it is:", {}, true}));
    EXPECT_EQ(blocks[1], (MarkdownBlock{Kind::code, "def f(s):\n    return s[::-1]", "python", true}));
    EXPECT_EQ(blocks[2], (MarkdownBlock{Kind::text, "And in C:", {}, true}));
    // The opening fence's two spaces of indentation come off each line, no more.
    EXPECT_EQ(blocks[3], (MarkdownBlock{Kind::code, "int x;\n  y();", "c", true}));
    EXPECT_EQ(blocks[4].kind, Kind::text);
    EXPECT_TRUE(blocks[4].text.startsWith("Done with `inline`"));
}

TEST(MarkdownBlocks, AnAnswerStillStreamingHasAnOpenBlock) {
    using Kind = MarkdownBlock::Kind;
    // A shorter fence, or one of the other character, does not close the block.
    const auto blocks = split_markdown_blocks("````\nprint(1)\n```\n~~~~\nprint(2)");
    ASSERT_EQ(blocks.size(), 1u);
    EXPECT_EQ(blocks[0], (MarkdownBlock{Kind::code, "print(1)\n```\n~~~~\nprint(2)", "", false}));
    // Indented by four spaces it is an indented code block of the text, left to Markdown.
    const auto indented = split_markdown_blocks("    ```\n    x\n    ```");
    ASSERT_EQ(indented.size(), 1u);
    EXPECT_EQ(indented[0].kind, Kind::text);
    EXPECT_TRUE(split_markdown_blocks("").empty());
    EXPECT_TRUE(split_markdown_blocks("\n\n").empty());
    // An empty block still is one.
    const auto empty = split_markdown_blocks("```sh\n```");
    ASSERT_EQ(empty.size(), 1u);
    EXPECT_EQ(empty[0], (MarkdownBlock{Kind::code, "", "sh", true}));
}

// An imported answer's tool calls (store::Message::tool_calls, OpenAI's array) as the chat
// shows them: a line per call with its arguments; nothing for none or for JSON that is no
// array of calls.
TEST(MessageListModel, AnImportedAnswerShowsTheToolsItCalled) {
    EXPECT_EQ(
        MessageListModel::toolCallsText(
            R"([{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},)"
            R"({"function":{"name":"get_time","arguments":{"zone":"UTC"}}},{"function":{"name":"ping"}}])"),
        "Called get_weather({\"city\": \"Paris\"})\nCalled get_time({\"zone\":\"UTC\"})\nCalled ping()");
    EXPECT_EQ(MessageListModel::toolCallsText(""), "");
    EXPECT_EQ(MessageListModel::toolCallsText("{not json"), "");

    MessageListModel model;
    powerhouse::store::Message call;
    call.id = 7;
    call.role = "assistant";
    call.tool_calls = R"([{"function":{"name":"get_weather","arguments":"{}"}}])";
    powerhouse::store::Message plain;
    plain.id = 8;
    plain.role = "assistant";
    plain.content = "Sunny.";
    model.setMessages({call, plain});
    EXPECT_EQ(model.data(model.index(0), MessageListModel::ToolCallsRole).toString(), "Called get_weather({})");
    EXPECT_EQ(model.data(model.index(1), MessageListModel::ToolCallsRole).toString(), "");
    EXPECT_EQ(model.roleNames().value(MessageListModel::ToolCallsRole), "toolCalls");
}

TEST(MessageListModel, StatisticsShowEnergyPerTokenAndItsCost) {
    powerhouse::store::MessageStats stats;
    stats.generated_tokens = 100;
    stats.tokens_per_second = 50;
    stats.ttft_ms = 40;
    EXPECT_EQ(MessageListModel::statsText(stats), "50.0 tokens/s · 40 ms to first token · 100 tokens");
    stats.energy_joules = 36.0;
    EXPECT_EQ(MessageListModel::statsText(stats), "50.0 tokens/s · 40 ms to first token · 100 tokens · 36.0 J (0.36 J/token)");
    // 0.36 J/token = 0.1 kWh per million tokens; at 0.30 per kWh that is 0.03.
    EXPECT_EQ(MessageListModel::statsText(stats, 0.30),
              "50.0 tokens/s · 40 ms to first token · 100 tokens · 36.0 J (0.36 J/token, 0.03 per M tokens)");
    // The part of the prompt the engine found in its cache.
    stats.energy_joules.reset();
    stats.prompt_tokens = 840;
    stats.reused_tokens = 812;
    EXPECT_EQ(MessageListModel::statsText(stats),
              "50.0 tokens/s · 40 ms to first token · 100 tokens · 812 of 840 prompt tokens from cache");
    // The GPUs were slowed while it was generated.
    stats.reused_tokens = 0;
    stats.throttle = "GPU 0 throttled (power cap) for 40% of the answer, 18% slower";
    EXPECT_EQ(MessageListModel::statsText(stats), "50.0 tokens/s · 40 ms to first token · 100 tokens · GPU 0 throttled "
                                                  "(power cap) for 40% of the answer, 18% slower");
    // Speculative decoding: how many of the guessed tokens the model kept, only when any were
    // guessed.
    stats.throttle.clear();
    stats.drafted_tokens = 20;
    stats.accepted_tokens = 12;
    EXPECT_EQ(MessageListModel::statsText(stats),
              "50.0 tokens/s · 40 ms to first token · 100 tokens · 12 of 20 guesses kept");
    stats.drafted_tokens = 0;
    stats.accepted_tokens = 0;
    EXPECT_EQ(MessageListModel::statsText(stats), "50.0 tokens/s · 40 ms to first token · 100 tokens");
}

TEST(DashboardController, ShowsTheEnginesBatching) {
    powerhouse::GpuMonitorOptions options;
    options.nvml = "/nonexistent/libnvidia-ml.so.1";
    DashboardController dashboard(options);
    EXPECT_FALSE(dashboard.hasBatching());
    QSignalSpy changed(&dashboard, &DashboardController::batchingChanged);
    powerhouse::SchedulerStats stats;
    stats.running = 3;
    stats.waiting = 2;
    stats.kv.block_size = 32;
    stats.kv.total_blocks = 64;
    stats.kv.free_blocks = 40;
    stats.kv.cached_blocks = 6;
    stats.kv.cached_prefixes = 5;
    stats.kv.block_bytes = 1 << 20;
    dashboard.setSchedulerStats(stats);
    EXPECT_EQ(changed.count(), 1);
    EXPECT_TRUE(dashboard.hasBatching());
    EXPECT_EQ(dashboard.sequencesRunning(), 3);
    EXPECT_EQ(dashboard.sequencesWaiting(), 2);
    EXPECT_EQ(dashboard.kvBlocksUsed(), 24) << "blocks held by sequences or cached prefixes";
    EXPECT_EQ(dashboard.kvBlocksTotal(), 64);
    EXPECT_DOUBLE_EQ(dashboard.kvBytesUsed(), 24.0 * (1 << 20));
    EXPECT_DOUBLE_EQ(dashboard.kvBytesTotal(), 64.0 * (1 << 20));
    EXPECT_EQ(dashboard.cachedPrefixes(), 5);
    // Another model: nothing reported about it yet.
    dashboard.setPlacement({});
    EXPECT_FALSE(dashboard.hasBatching());
    EXPECT_EQ(dashboard.kvBlocksTotal(), 0);
}

// Answers overlap: the power of the GPUs is shared among the answers running, so two at
// once together count what one alone does over the same time, not twice that.
TEST(DashboardController, OverlappingAnswersShareTheEnergy) {
    powerhouse::GpuMonitorOptions options;
    options.simulate = "RTX 4090:24";
    DashboardController dashboard(options);
    dashboard.start();
    dashboard.setModelGpus({QVariantMap{{"gpu", 0}, {"bytes", static_cast<double>(1ull << 30)}}});
    dashboard.beginAnswer(1);
    QTest::qWait(800);
    const std::optional<double> alone = dashboard.endAnswer(1).joules;
    dashboard.beginAnswer(2);
    dashboard.beginAnswer(3);
    QTest::qWait(800);
    const std::optional<double> first = dashboard.endAnswer(2).joules;
    const std::optional<double> second = dashboard.endAnswer(3).joules;
    ASSERT_TRUE(alone && first && second);
    EXPECT_GT(*alone, 0.0);
    EXPECT_NEAR(*first / *second, 1.0, 0.1) << *first << " J and " << *second << " J";
    EXPECT_NEAR((*first + *second) / *alone, 1.0, 0.3)
        << *first << " J and " << *second << " J, alone " << *alone << " J";
    EXPECT_FALSE(dashboard.endAnswer(2).joules.has_value()) << "ended already";
}

TEST(DashboardController, WithoutADriverSaysSoAndListsNoGpu) {
    powerhouse::GpuMonitorOptions options;
    options.nvml = "/nonexistent/libnvidia-ml.so.1";
    DashboardController dashboard(options);
    dashboard.start();
    EXPECT_EQ(dashboard.gpus()->rowCount(), 0);
    EXPECT_TRUE(dashboard.status().contains("no NVIDIA driver found")) << dashboard.status().toStdString();
    EXPECT_FALSE(dashboard.simulated());
    dashboard.setPlacement({QVariantMap{{"name", "CPU"}, {"part", "layers 0-29"}}});
    EXPECT_EQ(dashboard.placement().size(), 1);
}

TEST(SettingsController, PreviewsThePlanAndKeepsTheSettingsPerGpu) {
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    const powerhouse::TelemetrySnapshot snapshot = powerhouse::test::simulated_gpus("RTX 4090:24;RTX 4090:24");
    ASSERT_EQ(snapshot.gpus.size(), 2u);
    {
        SettingsController settings(store, QString::fromStdString(dir.path().string()));
        EXPECT_TRUE(settings.preview().contains("Load a model")) << settings.preview().toStdString();
        settings.setDevices(snapshot);
        settings.setModel(QString::fromStdString(powerhouse::test::test_model_path().string()));
        EXPECT_TRUE(settings.fits()) << settings.preview().toStdString();
        EXPECT_TRUE(settings.preview().startsWith("single split")) << settings.preview().toStdString();

        settings.setSplitMode("layer");
        EXPECT_TRUE(settings.fits());
        EXPECT_TRUE(settings.preview().contains("layer split")) << settings.preview().toStdString();
        EXPECT_TRUE(settings.preview().contains("GPU 0 (RTX 4090): layers 0-")) << settings.preview().toStdString();
        EXPECT_TRUE(settings.preview().contains("GPU 1 (RTX 4090): layers ")) << settings.preview().toStdString();

        // Keeping almost all memory free on both: it no longer fits, and the planner says where.
        settings.setGpuReserve(0, 24 * 1024 - 8);
        settings.setGpuReserve(1, 24 * 1024 - 8);
        EXPECT_FALSE(settings.fits());
        EXPECT_TRUE(settings.preview().contains("needs")) << settings.preview().toStdString();

        settings.setGpuReserve(0, 1024);
        settings.setGpuReserve(1, 1024);
        settings.setGpuUse(1, false);
        EXPECT_TRUE(settings.fits());
        EXPECT_FALSE(settings.preview().contains("GPU 1")) << settings.preview().toStdString();
        settings.setContextLength(8192);
        settings.setKvCacheType("q8_0");
        settings.setKvCacheType("q4_0");  // not a cache type: ignored
        settings.setCpuThreads(3);
        settings.setElectricityPrice(0.31);
        // Nothing is kept before Apply: a panel opened now reads the old values.
        EXPECT_EQ(SettingsController(store, {}).contextLength(), 4096);
        QSignalSpy applied(&settings, &SettingsController::applied);
        EXPECT_TRUE(settings.apply());
        EXPECT_EQ(applied.count(), 1);
        const powerhouse::ModelOptions model = settings.modelOptions();
        EXPECT_EQ(model.n_ctx, 8192u);
        EXPECT_EQ(model.n_threads, 3);
        EXPECT_EQ(model.kv_cache_type, powerhouse::KvCacheType::q8_0);

        // Unapplied changes are forgotten by revert (Close).
        settings.setContextLength(2048);
        settings.setGpuUse(1, true);
        settings.revert();
        EXPECT_EQ(settings.contextLength(), 8192);
        EXPECT_FALSE(settings.gpus()[1].toMap().value("use").toBool());
    }
    // Read back by a new panel, per GPU UUID.
    SettingsController again(store, {});
    again.setDevices(snapshot);
    const QVariantList gpus = again.gpus();
    ASSERT_EQ(gpus.size(), 2);
    EXPECT_TRUE(gpus[0].toMap().value("use").toBool());
    EXPECT_FALSE(gpus[1].toMap().value("use").toBool());
    EXPECT_EQ(gpus[1].toMap().value("reserveMiB").toInt(), 1024);
    EXPECT_EQ(again.splitMode(), "layer");
    EXPECT_EQ(again.contextLength(), 8192);
    EXPECT_EQ(again.kvCacheType(), "q8_0");
    EXPECT_EQ(again.cpuThreads(), 3);
    EXPECT_DOUBLE_EQ(again.electricityPrice(), 0.31);
    EXPECT_EQ(again.theme(), "system");
    auto saved = store.gpu_settings(snapshot.gpus[1].uuid);
    ASSERT_TRUE(saved && *saved);
}

// A mixture-of-experts model on GPUs: the preview says where the experts go, the placement
// bar gets a RAM segment for experts kept in system RAM, and the experts-in-RAM choice is
// checked, kept and passed to the engine.
TEST(SettingsController, PreviewsTheExpertsInRamOfAMixtureOfExperts) {
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    powerhouse::GpuMonitorOptions options;
    options.simulate = "RTX 4090:24;RTX 4090:24";
    powerhouse::GpuMonitor monitor(options);
    const powerhouse::TelemetrySnapshot snapshot = monitor.sample_now();
    {
        SettingsController settings(store, QString::fromStdString(dir.path().string()));
        settings.setDevices(snapshot);
        settings.setModel(QString::fromStdString((powerhouse::test::data_dir() / "arch" / "qwen3moe-q8_0.gguf").string()));
        // Auto: the tiny model fits on a GPU, experts and all.
        EXPECT_TRUE(settings.fits()) << settings.preview().toStdString();
        EXPECT_FALSE(settings.preview().contains("System RAM")) << settings.preview().toStdString();

        settings.setExpertsInRam("all");
        EXPECT_TRUE(settings.fits()) << settings.preview().toStdString();
        EXPECT_TRUE(settings.preview().contains("System RAM: experts of layers 0-1")) << settings.preview().toStdString();
        const QVariantList planned = settings.plannedGpus();
        ASSERT_FALSE(planned.isEmpty());
        EXPECT_EQ(planned.back().toMap().value("gpu").toInt(), -1);
        EXPECT_GT(planned.back().toMap().value("bytes").toDouble(), 0.0);

        settings.setExpertsInRam("some");  // not a choice: ignored
        EXPECT_EQ(settings.expertsInRam(), "all");
        settings.setExpertsInRam("3");  // more layers than the model has
        EXPECT_FALSE(settings.fits());
        EXPECT_TRUE(settings.preview().contains("the model has 2")) << settings.preview().toStdString();
        settings.setExpertsInRam("1");
        EXPECT_TRUE(settings.fits()) << settings.preview().toStdString();
        EXPECT_TRUE(settings.preview().contains("System RAM: experts of layer 0")) << settings.preview().toStdString();
        EXPECT_TRUE(settings.apply());
        EXPECT_EQ(settings.modelOptions().experts_in_ram, 1);
    }
    EXPECT_EQ(SettingsController(store, {}).expertsInRam(), "1");
}

// What Load and Apply pass to the engine: the GPUs in use by UUID, with their shares, the
// main GPU's position among them and the split; simulated GPUs are never run on.
TEST(SettingsController, ModelOptionsNameTheRealGpusInUse) {
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    {
        powerhouse::GpuMonitorOptions options;
        options.simulate = "RTX 4090:24;RTX 4090:24";
        powerhouse::GpuMonitor monitor(options);
        SettingsController settings(store, {});
        settings.setDevices(monitor.sample_now());
        const powerhouse::ModelOptions model = settings.modelOptions();
        EXPECT_EQ(model.devices, "cpu");
        EXPECT_TRUE(model.ratios.empty());
    }
    powerhouse::TelemetrySnapshot snapshot;
    for (const char* uuid : {"GPU-00000000-0000-4000-8000-00000000000a", "GPU-00000000-0000-4000-8000-00000000000b",
                             "GPU-00000000-0000-4000-8000-00000000000c"}) {
        powerhouse::GpuInfo info;
        info.name = "NVIDIA H200";
        info.uuid = uuid;
        info.memory_total = 141ull << 30;
        snapshot.gpus.push_back(info);
    }
    SettingsController settings(store, {});
    settings.setDevices(snapshot);
    settings.setGpuUse(0, false);
    settings.setGpuRatio(1, 3.0);
    settings.setGpuReserve(2, 2048);
    settings.setMainGpu(2);
    settings.setSplitMode("tensor");
    const powerhouse::ModelOptions model = settings.modelOptions();
    if (!powerhouse::has_cuda_backend()) {
        EXPECT_EQ(model.devices, "cpu");
        return;
    }
    EXPECT_EQ(model.devices, "cuda:GPU-00000000-0000-4000-8000-00000000000b,GPU-00000000-0000-4000-8000-00000000000c");
    EXPECT_EQ(model.ratios, (std::vector<double>{3.0, 1.0}));
    EXPECT_EQ(model.main_device, 1u);  // GPU 2 is the second of those in use
    EXPECT_EQ(model.reserve_bytes, 2048ull << 20);
    EXPECT_EQ(model.split, powerhouse::SplitMode::tensor);
}

TEST(SettingsController, ThemeIsKeptAtOnceAndBadValuesAreRefused) {
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    SettingsController settings(store, {});
    QSignalSpy themeChanged(&settings, &SettingsController::themeChanged);
    settings.setTheme("dark");
    settings.setTheme("purple");
    EXPECT_EQ(settings.theme(), "dark");
    EXPECT_EQ(themeChanged.count(), 1);
    EXPECT_EQ(SettingsController(store, {}).theme(), "dark");  // no Apply needed

    // Guessing tokens from the conversation (speculative decoding): off until chosen, then
    // kept at once, and Close (revert) keeps it too.
    EXPECT_FALSE(settings.guessTokens());
    QSignalSpy guessChanged(&settings, &SettingsController::guessTokensChanged);
    settings.setGuessTokens(true);
    EXPECT_EQ(guessChanged.count(), 1);
    settings.revert();
    EXPECT_TRUE(settings.guessTokens());
    EXPECT_TRUE(SettingsController(store, {}).guessTokens());

    // Garbage in the store (an older or hand-edited file) falls back to the defaults.
    ASSERT_TRUE(store.set_setting("context_length", "lots"));
    ASSERT_TRUE(store.set_setting("split_mode", "sideways"));
    ASSERT_TRUE(store.set_setting("electricity_price", "-3"));
    SettingsController fresh(store, {});
    EXPECT_EQ(fresh.contextLength(), 4096);
    EXPECT_EQ(fresh.splitMode(), "auto");
    EXPECT_EQ(fresh.electricityPrice(), 0.0);
}

}  // namespace

int main(int argc, char** argv) {
    QCoreApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return powerhouse::test::exit_code_after_tests(RUN_ALL_TESTS());
}
