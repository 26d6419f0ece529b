// DesktopApp, the composition root that main.cpp uses, with a store in a temporary folder and
// the loopback Hugging Face Hub (hub_test_server.py) as its endpoint: the wiring itself.
// The first run downloads a suggested model through the Hub and loads it; a model found by
// the Hub search arrives in the library; imported conversations join the list and open;
// a data folder that cannot hold the store is an error that says so; a device that fails
// mid-answer (a fault injected as POWERHOUSE_FAIL_DEVICE does, and a simulated GPU that falls
// off the bus) costs the answer nothing, and the banner, dashboard, settings and store say so.
#include <gtest/gtest.h>

#include <QSignalSpy>
#include <QTest>
#include <QUrl>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "desktop_app.h"
#include "desktop_test_support.h"
#include "hub_test_server.h"
#include "library_controller.h"
#include "model_templates.h"
#include "support/test_support.h"

namespace {

namespace fs = std::filesystem;
using powerhouse::test::kHubSmolFile;
using powerhouse::test::kHubSmolRepo;

constexpr int kAppWait = 60000;

class DesktopAppTest : public ::testing::Test {
protected:
    void SetUp() override {
        // Other apps' model folders and the default model are looked for under HOME and the
        // XDG folders: point them at empty folders so that only this test's models count.
        for (const char* name : {"HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "OLLAMA_MODELS",
                                 "LLAMA_CACHE", "POWERHOUSE_TEST_MODEL", "POWERHOUSE_SIMULATE_GPUS"}) {
            const char* value = std::getenv(name);
            saved_.emplace_back(name, value != nullptr ? std::optional<std::string>(value) : std::nullopt);
        }
        test_model_ = powerhouse::test::test_model_path();  // before HOME moves
        fs::create_directories(dir_ / "home");
        setenv("HOME", (dir_ / "home").c_str(), 1);
        for (const char* name : {"XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "OLLAMA_MODELS", "LLAMA_CACHE"}) {
            unsetenv(name);
        }
        setenv("POWERHOUSE_TEST_MODEL", (dir_ / "no-default-model.gguf").c_str(), 1);
    }
    void TearDown() override {
        for (const auto& [name, value] : saved_) {
            if (value) setenv(name.c_str(), value->c_str(), 1);
            else unsetenv(name.c_str());
        }
    }
    std::unique_ptr<DesktopApp> make(const std::string& endpoint,
                                     std::optional<DesktopApp::Options::FaultInjection> fault = std::nullopt) {
        DesktopApp::Options options;
        options.dataDir = QString::fromStdString((dir_ / "data").string());
        options.hubEndpoint = QString::fromStdString(endpoint);
        options.fault = fault;
        auto app = DesktopApp::create(options);
        EXPECT_TRUE(app.ok()) << (app.ok() ? "" : app.error().message);
        return app.ok() ? std::move(*app) : nullptr;
    }

    powerhouse::test::TempDir dir_;
    fs::path test_model_;
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(DesktopAppTest, FirstRunDownloadsASuggestedModelAndLoadsIt) {
    if (!fs::exists(test_model_)) GTEST_SKIP() << "no test model";
    setenv("POWERHOUSE_TEST_MODEL", test_model_.c_str(), 1);  // the hub serves it from here
    powerhouse::test::HubTestServer hub;
    unsetenv("POWERHOUSE_TEST_MODEL");
    ASSERT_TRUE(hub.running());
    auto app = make(hub.endpoint());
    ASSERT_NE(app, nullptr);
    // Nothing to open: no model named, none loaded before, no default model.
    EXPECT_EQ(app->loadAtStart(QString()), QString());
    EXPECT_EQ(app->chat().modelState(), ChatController::ModelState::None);

    // The hub's repository of the test model as the only suggestion.
    powerhouse::catalog::SuggestedModel smol;
    smol.name = "SmolLM2 135M Instruct";
    smol.repo = kHubSmolRepo;
    smol.quantization = "Q4_1";
    smol.like = "smollm2-135m";
    smol.type = "q4_1";
    smol.files.push_back({kHubSmolFile, std::nullopt, ""});
    WelcomeController& welcome = app->welcome();
    // Nothing is planned until the welcome view shows (Main.qml binds `active` to it).
    EXPECT_FALSE(welcome.planning());
    EXPECT_EQ(welcome.suggestions()->rowCount(), 0);
    welcome.setActive(true);
    welcome.setModels({smol});
    ASSERT_TRUE(QTest::qWaitFor([&] { return !welcome.planning(); }, kAppWait));
    SuggestionListModel& rows = *welcome.suggestions();
    ASSERT_EQ(rows.rowCount(), 1);
    EXPECT_TRUE(rows.data(rows.index(0), SuggestionListModel::RecommendedRole).toBool())
        << rows.data(rows.index(0), SuggestionListModel::WhereRole).toString().toStdString();

    welcome.download(0);
    EXPECT_EQ(rows.data(rows.index(0), SuggestionListModel::DownloadRole).value<SuggestionListModel::Download>(),
              SuggestionListModel::Download::Downloading);
    ASSERT_TRUE(QTest::qWaitFor([&] { return app->chat().modelState() == ChatController::ModelState::Ready; }, kAppWait))
        << static_cast<int>(app->chat().modelState()) << ": " << app->chat().errorText().toStdString();
    const fs::path downloaded = dir_ / "data" / "models" / kHubSmolFile;
    EXPECT_EQ(fs::file_size(downloaded), fs::file_size(test_model_));
    EXPECT_EQ(rows.data(rows.index(0), SuggestionListModel::DownloadRole).value<SuggestionListModel::Download>(),
              SuggestionListModel::Download::Loaded);
    // Loaded from the library, remembered for the next start, and named as a person writes it.
    auto remembered = app->store().setting("model_path");
    ASSERT_TRUE(remembered && *remembered);
    EXPECT_EQ(fs::path(**remembered), downloaded);
    EXPECT_EQ(app->chat().modelName(), "SmolLM2 135M Instruct · Q4_1");
    ModelListModel& library = *app->library().models();
    // The library lists it from its worker thread, maybe after the model loaded.
    ASSERT_TRUE(QTest::qWaitFor([&] { return library.rowCount() == 1; }, kAppWait));
    EXPECT_EQ(library.data(library.index(0), ModelListModel::PathRole).toString().toStdString(), downloaded.string());
    EXPECT_TRUE(library.data(library.index(0), ModelListModel::LoadedRole).toBool());
    // The Hub sent the file's sha256 and the download was checked against it.
    auto records = app->store().models();
    ASSERT_TRUE(records.ok());
    ASSERT_EQ(records->size(), 1u);
    EXPECT_EQ(records->front().sha256.size(), 64u);
}

TEST_F(DesktopAppTest, AModelFoundOnTheHubArrivesInTheLibrary) {
    if (!fs::exists(test_model_)) GTEST_SKIP() << "no test model";
    setenv("POWERHOUSE_TEST_MODEL", test_model_.c_str(), 1);
    powerhouse::test::HubTestServer hub;
    unsetenv("POWERHOUSE_TEST_MODEL");
    ASSERT_TRUE(hub.running());
    auto app = make(hub.endpoint());
    ASSERT_NE(app, nullptr);
    HubController& search = app->hub();
    search.showFiles(kHubSmolRepo);
    ASSERT_TRUE(QTest::qWaitFor([&] { return !search.listing(); }, kAppWait)) << search.error().toStdString();
    int q41 = -1;
    for (int row = 0; row < search.files()->rowCount(); ++row) {
        if (search.files()->data(search.files()->index(row), HubFilesModel::QuantizationRole).toString() == "Q4_1") {
            q41 = row;
        }
    }
    ASSERT_GE(q41, 0);
    ASSERT_TRUE(search.download(kHubSmolRepo, q41));
    EXPECT_EQ(app->downloads().rowCount(), 1);
    ModelListModel& library = *app->library().models();
    ASSERT_TRUE(QTest::qWaitFor([&] { return library.rowCount() == 1; }, kAppWait));
    EXPECT_TRUE(library.data(library.index(0), ModelListModel::UsableRole).toBool());
    // Found, not loaded: the chat still waits for a choice.
    EXPECT_EQ(app->chat().modelState(), ChatController::ModelState::None);
}

TEST_F(DesktopAppTest, ImportedConversationsJoinTheListAndTheFirstOpens) {
    auto app = make("http://127.0.0.1:9");
    ASSERT_NE(app, nullptr);
    const fs::path file = dir_ / "chat.json";
    std::ofstream(file) << R"([{"role": "user", "content": "Hello there"}, {"role": "assistant", "content": "Hi!"}])";
    EXPECT_EQ(app->chat().conversations()->rowCount(), 0);
    ASSERT_TRUE(app->transfer().importConversations(QUrl::fromLocalFile(QString::fromStdString(file.string()))))
        << app->transfer().message().toStdString();
    EXPECT_EQ(app->chat().conversations()->rowCount(), 1);
    EXPECT_NE(app->chat().currentConversationId(), 0);
    EXPECT_EQ(app->chat().messages()->rowCount(), 2);
}

// A model that fails to load says why on its card on the Models page (where the user picks
// models), not only above the chat: until the user dismisses it, or it loads. The failure
// here is a chat template chosen for it that cannot be used (model_templates.h).
TEST_F(DesktopAppTest, AModelThatFailsToLoadSaysSoOnItsCardUntilItLoadsOrIsDismissed) {
    if (!fs::exists(test_model_)) GTEST_SKIP() << "no test model";
    fs::create_directories(dir_ / "data" / "models");
    const fs::path model = dir_ / "data" / "models" / "smol.gguf";
    fs::copy_file(test_model_, model);
    auto app = make("http://127.0.0.1:9");
    ASSERT_NE(app, nullptr);
    ModelListModel& list = *app->library().models();
    ASSERT_TRUE(QTest::qWaitFor([&] { return list.rowCount() == 1 && !app->library().scanning(); }, kAppWait));
    const QString path = QString::fromStdString(model.string());
    const auto shown = [&] { return list.data(list.index(0), ModelListModel::LoadErrorRole).toString(); };
    EXPECT_TRUE(shown().isEmpty());
    const fs::path broken = dir_ / "broken.jinja";
    std::ofstream(broken) << "{% if messages %}no end";
    ASSERT_TRUE(set_model_chat_template(app->store(), path, QString::fromStdString(broken.string())));
    const auto load = [&] {
        app->load(path, false);
        return QTest::qWaitFor([&] { return app->chat().modelState() != ChatController::ModelState::Loading; },
                               kAppWait);
    };

    ASSERT_TRUE(load());
    ASSERT_EQ(app->chat().modelState(), ChatController::ModelState::Failed);
    EXPECT_TRUE(shown().contains("the chat template given cannot be used")) << shown().toStdString();
    EXPECT_TRUE(app->chat().errorText().contains(shown())) << "the chat says it too";
    app->library().dismissLoadError(path);
    EXPECT_TRUE(shown().isEmpty());
    app->chat().dismissError();
    ASSERT_TRUE(load());
    EXPECT_FALSE(shown().isEmpty()) << "failing again, it shows again";
    app->library().rescan();
    ASSERT_TRUE(QTest::qWaitFor([&] { return !app->library().scanning(); }, kAppWait));
    EXPECT_FALSE(shown().isEmpty()) << "a rescan keeps it";

    ASSERT_TRUE(clear_model_chat_template(app->store(), path));
    ASSERT_TRUE(load());
    ASSERT_EQ(app->chat().modelState(), ChatController::ModelState::Ready) << app->chat().errorText().toStdString();
    EXPECT_TRUE(shown().isEmpty()) << "loaded: resolved";
}

// A draft model of another vocabulary, chosen for a model on its card (speculative
// decoding), fails the load with the engine's word, on the card and in the chat's line;
// with none chosen the model loads again. The chat guesses tokens from the conversation as
// Settings says, from the start and when it changes.
TEST_F(DesktopAppTest, ADraftModelThatCannotGuessFailsTheLoadOnItsCardUntilNoneIsChosen) {
    if (!fs::exists(test_model_)) GTEST_SKIP() << "no test model";
    fs::create_directories(dir_ / "data" / "models");
    const fs::path model = dir_ / "data" / "models" / "smol.gguf";
    fs::copy_file(test_model_, model);
    auto app = make("http://127.0.0.1:9");
    ASSERT_NE(app, nullptr);
    ModelListModel& list = *app->library().models();
    ASSERT_TRUE(QTest::qWaitFor([&] { return list.rowCount() == 1 && !app->library().scanning(); }, kAppWait));
    const QString path = QString::fromStdString(model.string());
    const auto shown = [&] { return list.data(list.index(0), ModelListModel::LoadErrorRole).toString(); };
    EXPECT_TRUE(app->library().draftModel(path).isEmpty());
    EXPECT_TRUE(app->library().draftChoices(path).isEmpty()) << "a model is not offered as its own draft";
    const QString other = QString::fromStdString((powerhouse::test::data_dir() / "arch" / "qwen2-f32.gguf").string());
    ASSERT_TRUE(app->library().setDraftModel(path, other));
    EXPECT_EQ(app->library().draftModel(path), other);
    const auto load = [&] {
        app->load(path, false);
        return QTest::qWaitFor([&] { return app->chat().modelState() != ChatController::ModelState::Loading; },
                               kAppWait);
    };

    ASSERT_TRUE(load());
    ASSERT_EQ(app->chat().modelState(), ChatController::ModelState::Failed);
    EXPECT_TRUE(shown().contains("their vocabularies differ (token")) << shown().toStdString();
    const QString said = app->chat().errorText();
    EXPECT_TRUE(said.contains("qwen2-f32.gguf") && said.contains("their vocabularies differ (token") &&
                said.contains("Models page"))
        << said.toStdString();

    ASSERT_TRUE(app->library().setDraftModel(path, {}));
    EXPECT_TRUE(app->library().draftModel(path).isEmpty());
    ASSERT_TRUE(load());
    ASSERT_EQ(app->chat().modelState(), ChatController::ModelState::Ready) << app->chat().errorText().toStdString();
    EXPECT_TRUE(shown().isEmpty()) << "loaded: resolved";
    EXPECT_TRUE(app->chat().draftModelName().isEmpty());

    EXPECT_FALSE(app->chat().guessTokens());
    app->settings().setGuessTokens(true);
    EXPECT_TRUE(app->chat().guessTokens());
    app.reset();
    app = make("http://127.0.0.1:9");
    ASSERT_NE(app, nullptr);
    EXPECT_TRUE(app->chat().guessTokens()) << "kept across starts";
}

TEST_F(DesktopAppTest, AnAnswerADeviceFailureInterruptsIsCompletedAndStoredWithItsNote) {
    if (!fs::exists(test_model_)) GTEST_SKIP() << "no test model";
    // GPU 1 falls off the bus at its second sample (the model runs on the CPU meanwhile:
    // simulated GPUs are only planned on), and the model's CPU device fails five tokens in.
    setenv("POWERHOUSE_SIMULATE_GPUS", "RTX 4090:24;RTX 4090:24:xid=79@2", 1);
    auto app = make("http://127.0.0.1:9", DesktopApp::Options::FaultInjection{0, 5, false});
    ASSERT_NE(app, nullptr);
    ChatController& chat = app->chat();
    app->load(QString::fromStdString(test_model_.string()), false);
    ASSERT_TRUE(QTest::qWaitFor([&] { return chat.modelState() != ChatController::ModelState::Loading; }, kAppWait));
    ASSERT_EQ(chat.modelState(), ChatController::ModelState::Ready) << chat.errorText().toStdString();
    ASSERT_TRUE(chat.setConversationSettings({}, {{"temperature", 0}, {"maxTokens", 32}}));
    chat.send("Write a Python function that reverses a string.");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !chat.generatingAny(); }, kAppWait));

    EXPECT_EQ(chat.recovery(), ChatController::Recovery::Recovered);
    EXPECT_TRUE(chat.recoveryText().contains("Continuing on")) << chat.recoveryText().toStdString();
    EXPECT_TRUE(chat.errorText().isEmpty()) << chat.errorText().toStdString();
    EXPECT_FALSE(app->dashboard().placement().isEmpty()) << "the dashboard shows where the model runs now";
    // The whole answer, with where it went on, in the database (read on a connection of its
    // own, once the chat's writer has run what it was given).
    chat.flushWrites();
    auto reader = powerhouse::store::Store::open(dir_ / "data" / "powerhouse.db", {.recover_interrupted = false});
    ASSERT_TRUE(reader.ok()) << reader.error().message;
    auto messages = reader->messages(chat.currentConversationId());
    ASSERT_TRUE(messages.ok());
    ASSERT_EQ(messages->size(), 2u);
    const powerhouse::store::Message& answer = (*messages)[1];
    EXPECT_EQ(answer.state, powerhouse::store::MessageState::complete);
    powerhouse::test::expect_reference_answer(answer.content, "chat_code");
    EXPECT_EQ(answer.stats.generated_tokens, 32);
    ASSERT_EQ(answer.stats.recoveries.size(), 1u);
    EXPECT_GT(answer.stats.recoveries[0].at_token, 0);
    EXPECT_EQ(QString::fromStdString(answer.stats.recoveries[0].continued_on), chat.modelDevice());

    // The monitor's word on GPU 1: its card is marked, the settings leave it out (and the
    // engine was told: it would move a model that used it).
    GpuListModel& gpus = *app->dashboard().gpus();
    ASSERT_EQ(gpus.rowCount(), 2);
    ASSERT_TRUE(QTest::qWaitFor([&] { return gpus.data(gpus.index(1), GpuListModel::FailedRole).toBool(); }, 10000));
    EXPECT_EQ(gpus.data(gpus.index(1), GpuListModel::FailureRole).toString(),
              "GPU 1 stopped answering: Xid 79, fell off the bus");
    EXPECT_FALSE(gpus.data(gpus.index(0), GpuListModel::FailedRole).toBool());
    const QVariantMap gpu1 = app->settings().gpus()[1].toMap();
    EXPECT_TRUE(gpu1.value("failed").toBool());
    EXPECT_FALSE(gpu1.value("use").toBool());
    const std::string uuid1 = gpus.data(gpus.index(1), GpuListModel::UuidRole).toString().toStdString();
    EXPECT_EQ(app->settings().modelOptions().excluded_gpus, std::vector<std::string>{uuid1});
}

TEST_F(DesktopAppTest, WhenLoadingAgainDoesNotHelpNoModelIsShownAnywhere) {
    if (!fs::exists(test_model_)) GTEST_SKIP() << "no test model";
    auto app = make("http://127.0.0.1:9", DesktopApp::Options::FaultInjection{0, 5, false});
    ASSERT_NE(app, nullptr);
    ChatController& chat = app->chat();
    // Loading again on the same device, where the injected fault comes back each time.
    app->settings().setRecoveryPolicy("retry");
    ASSERT_TRUE(app->settings().apply());
    app->load(QString::fromStdString(test_model_.string()), false);
    ASSERT_TRUE(QTest::qWaitFor([&] { return chat.modelState() != ChatController::ModelState::Loading; }, kAppWait));
    ASSERT_EQ(chat.modelState(), ChatController::ModelState::Ready) << chat.errorText().toStdString();
    chat.send("Write a Python function that reverses a string.");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !chat.generatingAny(); }, kAppWait));
    EXPECT_EQ(chat.recovery(), ChatController::Recovery::Failed);
    EXPECT_EQ(chat.modelState(), ChatController::ModelState::Failed);
    EXPECT_TRUE(app->dashboard().placement().isEmpty()) << "the dashboard no longer shows a model";
    EXPECT_FALSE(app->dashboard().hasBatching());
    EXPECT_TRUE(app->server().modelId().isEmpty()) << "the API server has no model to serve either";
}

TEST_F(DesktopAppTest, AFaultToInjectIsReadOrRefusedWithTheReason) {
    auto fault = DesktopApp::parseFaultInjection("0:5");
    ASSERT_TRUE(fault.ok());
    EXPECT_EQ(fault->device, 0);
    EXPECT_EQ(fault->after, 5u);
    EXPECT_FALSE(fault->hangs);
    fault = DesktopApp::parseFaultInjection("1:12:hang");
    ASSERT_TRUE(fault.ok());
    EXPECT_EQ(fault->device, 1);
    EXPECT_TRUE(fault->hangs);
    for (const char* bad : {"", "0", "x:5", "0:-1", "-1:5", "0:5:sleep", "0:5:hang:1"}) {
        const auto refused = DesktopApp::parseFaultInjection(bad);
        ASSERT_FALSE(refused.ok()) << bad;
        EXPECT_NE(refused.error().message.find("is not DEVICE:AFTER or DEVICE:AFTER:hang"), std::string::npos)
            << refused.error().message;
    }
}

TEST_F(DesktopAppTest, AFolderThatCannotHoldTheStoreIsAnErrorThatSaysSo) {
    const fs::path blocker = dir_ / "a-file";
    std::ofstream(blocker) << "not a folder";
    DesktopApp::Options options;
    options.dataDir = QString::fromStdString((blocker / "data").string());
    auto app = DesktopApp::create(options);
    ASSERT_FALSE(app.ok());
    EXPECT_NE(app.error().message.find("a-file"), std::string::npos) << app.error().message;
}

}  // namespace
