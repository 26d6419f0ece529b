// Writes the store refuses (another program holding the database past the busy timeout, a
// write that fails) are shown with what failed and what to do, and what the app shows then
// follows the database: power limits (a change not recorded for a crash is not made),
// downloads, the remote model chosen, the library's import mode and folders, the costs'
// settings, the model to open next time, the settings' Apply (all or nothing).
#include <gtest/gtest.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTest>

#include <SQLiteCpp/SQLiteCpp.h>

#include <memory>
#include <string>

#include "chat_controller.h"
#include "costs_controller.h"
#include "desktop_app.h"
#include "desktop_test_support.h"
#include "download_controller.h"
#include "engine_client.h"
#include "engines_controller.h"
#include "library_controller.h"
#include "power_controller.h"
#include "powerhouse/telemetry.h"
#include "settings_controller.h"
#include "store/store.h"
#include "support/test_support.h"

namespace {

using powerhouse::store::Store;

// A store of its own with a short busy timeout, and a second connection that takes the
// write lock (as another Powerhouse or a database browser would) or makes a write fail.
class LockedStore {
public:
    LockedStore() {
        path_ = (dir_ / "locked.db").string();
        powerhouse::store::StoreOptions options;
        options.busy_timeout_ms = 100;
        auto opened = Store::open(path_, options);
        if (!opened) {
            ADD_FAILURE() << opened.error().message;
            std::abort();
        }
        store_ = std::make_unique<Store>(std::move(opened).value());
    }
    ~LockedStore() { unlock(); }
    Store& store() { return *store_; }
    const std::string& path() const { return path_; }
    void lock() {
        lock_ = std::make_unique<SQLite::Database>(path_, SQLite::OPEN_READWRITE);
        lock_->exec("BEGIN IMMEDIATE");
    }
    void unlock() {
        if (lock_) lock_->exec("ROLLBACK");
        lock_.reset();
    }
    // Every later write of `table` (of the app setting `key`, if given) fails with `why`.
    void refuseWrites(const std::string& table, const std::string& why, const std::string& key = {}) {
        SQLite::Database db(path_, SQLite::OPEN_READWRITE);
        const std::string when = key.empty() ? std::string() : " WHEN NEW.key = '" + key + "'";
        for (const char* op : {"INSERT", "UPDATE"}) {
            db.exec(std::string("CREATE TRIGGER refuse_") + op + "_" + table + (key.empty() ? "" : "_" + key) +
                    " BEFORE " + op + " ON " + table + when + " BEGIN SELECT RAISE(ABORT, '" + why + "'); END");
        }
    }
    std::string setting(const std::string& key) {
        auto v = store_->setting(key);
        return v && *v ? **v : std::string();
    }

private:
    powerhouse::test::TempDir dir_;
    std::string path_;
    std::unique_ptr<Store> store_;
    std::unique_ptr<SQLite::Database> lock_;
};

powerhouse::GpuMonitorOptions simulated(const char* spec) {
    powerhouse::GpuMonitorOptions options;
    options.simulate = spec;
    return options;
}

QVariantMap row(const PowerController& power, int gpu) {
    return power.gpus().at(gpu).toMap();
}

TEST(DesktopStoreErrors, APowerLimitTheStoreCannotRecordIsNotSet) {
    LockedStore locked;
    powerhouse::GpuMonitor monitor(simulated("RTX 4090:24"));
    monitor.sample_now();
    PowerController power(locked.store(), monitor);
    ASSERT_EQ(row(power, 0).value("currentW").toDouble(), 450);

    locked.lock();
    EXPECT_FALSE(power.setLimit(0, 300));
    // Set without a record, a crash would leave the card limited for good.
    EXPECT_EQ(*monitor.power_limits(0)->current_w, 450) << "the limit was set though the store refused its record";
    EXPECT_EQ(row(power, 0).value("currentW").toDouble(), 450);
    const QString error = row(power, 0).value("error").toString();
    EXPECT_TRUE(error.contains("could not record")) << error.toStdString();
    EXPECT_TRUE(error.contains("close that program and try again")) << error.toStdString();
    EXPECT_TRUE(row(power, 0).value("command").toString().isEmpty()) << "no nvidia-smi command for a store refusal";
    locked.unlock();

    ASSERT_TRUE(power.setLimit(0, 300));
    EXPECT_EQ(row(power, 0).value("currentW").toDouble(), 300);
    EXPECT_TRUE(row(power, 0).value("error").toString().isEmpty());
    const QJsonArray changes =
        QJsonDocument::fromJson(QByteArray::fromStdString(locked.setting("power_limit_changes"))).array();
    ASSERT_EQ(changes.size(), 1);
    EXPECT_EQ(changes[0].toObject().value("now_w").toDouble(), 300);
}

TEST(DesktopStoreErrors, ALimitSetButNotKeptSaysSo) {
    LockedStore locked;
    powerhouse::GpuMonitor monitor(simulated("RTX 4090:24"));
    monitor.sample_now();
    PowerController power(locked.store(), monitor);
    locked.refuseWrites("gpu_settings", "disk full");
    EXPECT_FALSE(power.setLimit(0, 300));
    EXPECT_EQ(row(power, 0).value("currentW").toDouble(), 300) << "set, and recorded for a crash";
    EXPECT_EQ(row(power, 0).value("settingW").toDouble(), 0) << "not kept: nothing claims it is";
    const QString error = row(power, 0).value("error").toString();
    EXPECT_TRUE(error.contains("could not be kept")) << error.toStdString();
    EXPECT_TRUE(error.contains("disk full")) << error.toStdString();
}

TEST(DesktopStoreErrors, KeepMyPowerLimitsRefusedStaysAsStored) {
    LockedStore locked;
    powerhouse::GpuMonitor monitor(simulated("RTX 4090:24"));
    monitor.sample_now();
    PowerController power(locked.store(), monitor);
    QSignalSpy errors(&power, &PowerController::error);
    QSignalSpy changed(&power, &PowerController::keepLimitsChanged);
    locked.lock();
    power.setKeepLimits(true);
    locked.unlock();
    EXPECT_FALSE(power.keepLimits()) << "the box claims what the store does not hold";
    ASSERT_EQ(errors.size(), 1);
    EXPECT_TRUE(errors[0][0].toString().contains("close that program and try again"))
        << errors[0][0].toString().toStdString();
    EXPECT_EQ(changed.size(), 1) << "the box is told to show the stored value again";
    EXPECT_EQ(locked.setting("keep_power_limits"), "");
    // Quitting then puts the limit back, as the stored choice says.
    ASSERT_TRUE(power.setLimit(0, 300));
}

TEST(DesktopStoreErrors, ApplyRefusedPartwaySavesNothing) {
    LockedStore locked;
    powerhouse::test::TempDir dir;
    SettingsController settings(locked.store(), QString::fromStdString(dir.path().string()));
    settings.setDevices(powerhouse::test::simulated_gpus("RTX 4090:24"));
    settings.setGpuReserve(0, 2048);
    settings.setContextLength(8192);
    settings.setCpuThreads(3);
    // The last setting Apply writes is refused (a full disk, say), after the GPU's and the others.
    locked.refuseWrites("app_settings", "disk full", "theme");
    QSignalSpy errors(&settings, &SettingsController::error);
    EXPECT_FALSE(settings.apply());
    ASSERT_EQ(errors.size(), 1);
    EXPECT_TRUE(errors[0][0].toString().contains("disk full")) << errors[0][0].toString().toStdString();
    EXPECT_EQ(locked.setting("context_length"), "") << "saved in part: the next start mixes old and new";
    EXPECT_EQ(locked.setting("cpu_threads"), "");
    // Nothing of the GPU's either, and what was chosen is still there to apply again.
    auto stored = locked.store().gpu_settings(powerhouse::test::simulated_gpus("RTX 4090:24").gpus.at(0).uuid);
    ASSERT_TRUE(stored.ok());
    EXPECT_FALSE(stored->has_value()) << **stored;
    EXPECT_EQ(settings.contextLength(), 8192);
}

TEST(DesktopStoreErrors, ADownloadListNotSavedIsSaidOnce) {
    LockedStore locked;
    powerhouse::test::TempDir library;
    DownloadController downloads(locked.store(), QString::fromStdString(library.path().string()),
                                 QStringLiteral("http://127.0.0.1:9"));
    QSignalSpy errors(&downloads, &DownloadController::error);
    locked.lock();
    downloads.add(QUrl("http://127.0.0.1:9/a/model-Q4_K_M.gguf"));
    downloads.add(QUrl("http://127.0.0.1:9/a/other-Q4_K_M.gguf"));
    locked.unlock();
    ASSERT_EQ(errors.size(), 1) << "said once while the store refuses";
    const QString error = errors[0][0].toString();
    EXPECT_TRUE(error.contains("will not come back after a restart")) << error.toStdString();
    EXPECT_TRUE(error.contains("close that program and try again")) << error.toStdString();
    // The Models page shows it above the downloads until a save succeeds again...
    EXPECT_EQ(downloads.errorText(), error);
    QSignalSpy shown(&downloads, &DownloadController::errorTextChanged);
    downloads.add(QUrl("http://127.0.0.1:9/a/third-Q4_K_M.gguf"));
    EXPECT_TRUE(downloads.errorText().isEmpty()) << downloads.errorText().toStdString();
    EXPECT_EQ(shown.size(), 1);
    // ... or the user dismisses it.
    locked.lock();
    downloads.add(QUrl("http://127.0.0.1:9/a/fourth-Q4_K_M.gguf"));
    locked.unlock();
    EXPECT_TRUE(downloads.errorText().contains("will not come back after a restart"));
    downloads.dismissError();
    EXPECT_TRUE(downloads.errorText().isEmpty());
}

// What a loaded model's chat template reads is only remembered for the conversation settings
// (chat_controller.h): a store that refuses it costs nothing the user did, so nothing is shown
// above the chat.
TEST(DesktopStoreErrors, TemplateSwitchesNotRememberedAreNotAnError) {
    LockedStore locked;
    locked.refuseWrites("app_settings", "disk full", "template_switches");
    EngineClient engine;
    ChatController chat(locked.store(), engine);
    emit engine.loaded({{"displayName", "Thinker"}, {"device", "CPU"}, {"hasThinkingSwitch", true}});
    chat.flushWrites();
    QCoreApplication::processEvents();  // the writer's word comes back as a queued call
    EXPECT_TRUE(chat.errorText().isEmpty()) << chat.errorText().toStdString();
    EXPECT_EQ(locked.setting("template_switches"), "");
    EXPECT_TRUE(chat.thinkingSwitch()) << "known for this run all the same";
}

TEST(DesktopStoreErrors, ARemoteModelChoiceNotSavedIsNotMade) {
    LockedStore locked;
    ASSERT_TRUE(locked.store().set_setting(
        "remote_endpoints", R"([{"name":"box","url":"http://127.0.0.1:9/v1","ca_file":"","has_key":false}])"));
    EnginesController engines(locked.store());
    QSignalSpy errors(&engines, &EnginesController::error);
    QSignalSpy chosen(&engines, &EnginesController::remoteChosen);
    locked.lock();
    engines.choose("box", "tiny");
    locked.unlock();
    EXPECT_TRUE(engines.chosen().isEmpty()) << engines.chosen().toStdString();
    EXPECT_EQ(chosen.size(), 0) << "the answers went to a model the store does not remember";
    ASSERT_EQ(errors.size(), 1);
    EXPECT_TRUE(errors[0][0].toString().contains("tiny on box was not chosen"))
        << errors[0][0].toString().toStdString();
    engines.choose("box", "tiny");
    EXPECT_EQ(chosen.size(), 1);
    EXPECT_FALSE(engines.chosen().isEmpty());
}

TEST(DesktopStoreErrors, LibraryWritesRefusedAreSaidOnItsPage) {
    LockedStore locked;
    powerhouse::test::TempDir dir;
    SettingsController settings(locked.store(), QString::fromStdString(dir.path().string()));
    powerhouse::catalog::Environment nowhere;  // no other apps' downloads
    nowhere.ollama_service_models = dir / "no-ollama";
    LibraryController library(locked.store(), settings, QString::fromStdString((dir / "models").string()), nullptr,
                              nowhere);
    ASSERT_EQ(library.importMode(), "in_place");
    locked.lock();
    library.setImportMode("copy");
    EXPECT_EQ(library.importMode(), "in_place") << "the page claims a mode the store does not hold";
    EXPECT_TRUE(library.message().contains("could not be changed")) << library.message().toStdString();
    // A folder the store cannot keep is not added (its models would vanish at the next refresh).
    std::filesystem::create_directories(dir / "folder");
    ASSERT_EQ(library.importUrls({QUrl::fromLocalFile(QString::fromStdString((dir / "folder").string()))}), 1);
    ASSERT_TRUE(powerhouse::test::wait_for([&] { return library.message().contains("folder"); }, 20000));
    locked.unlock();
    EXPECT_TRUE(library.message().contains("could not be added")) << library.message().toStdString();
    // The library's own connection waited as long as the app's store does (0.1 s here), not
    // SQLite's 5 s.
    EXPECT_TRUE(library.message().contains("kept it locked for 0.1 s")) << library.message().toStdString();
    auto folders = locked.store().model_folders();
    ASSERT_TRUE(folders.ok());
    EXPECT_TRUE(folders->empty());

    // A download of a forgotten model that the store cannot show again says it stays hidden.
    const std::string model = (dir / "models" / "forgotten.gguf").string();
    ASSERT_TRUE(locked.store().hide_model(model));
    {
        SQLite::Database db(locked.path(), SQLite::OPEN_READWRITE);
        db.exec(
            "CREATE TRIGGER refuse_unhide BEFORE DELETE ON hidden_models BEGIN SELECT RAISE(ABORT, 'disk full'); END");
    }
    library.addDownloaded(QString::fromStdString(model), {});
    ASSERT_TRUE(powerhouse::test::wait_for([&] { return library.message().contains("forgotten.gguf"); }, 20000))
        << library.message().toStdString();
    EXPECT_TRUE(library.message().contains("stays hidden")) << library.message().toStdString();
    EXPECT_TRUE(library.message().contains("disk full")) << library.message().toStdString();
}

// A refresh of the library that fails (here the store refuses the models' records) is shown
// on the Models page (errorText, above the list) as well as said once in the chat's line,
// until a refresh succeeds; a model that could not be forgotten stays shown until dismissed.
TEST(DesktopStoreErrors, ALibraryThatCannotBeRefreshedSaysSoOnItsPage) {
    LockedStore locked;
    powerhouse::test::TempDir dir;
    SettingsController settings(locked.store(), QString::fromStdString(dir.path().string()));
    powerhouse::catalog::Environment nowhere;  // no other apps' downloads
    nowhere.ollama_service_models = dir / "no-ollama";
    std::filesystem::create_directories(dir / "models");
    powerhouse::test::write_file(dir / "models" / "new.gguf", "not a model, but a file to list");
    LibraryController library(locked.store(), settings, QString::fromStdString((dir / "models").string()), nullptr,
                              nowhere);
    QSignalSpy errors(&library, &LibraryController::error);
    locked.refuseWrites("models", "disk full");
    library.rescan();
    ASSERT_TRUE(powerhouse::test::wait_for([&] { return !library.scanning(); }, 20000));
    const QString shown = library.errorText();
    EXPECT_TRUE(shown.startsWith("The library could not be refreshed, so the models listed may be out of date: "))
        << shown.toStdString();
    EXPECT_TRUE(shown.contains("disk full")) << shown.toStdString();
    ASSERT_EQ(errors.size(), 1) << "said once in the chat's line too";
    EXPECT_EQ(errors[0][0].toString(), shown);

    // The store takes the records again: the next refresh lists the library, and the error goes.
    {
        SQLite::Database db(locked.path(), SQLite::OPEN_READWRITE);
        db.exec("DROP TRIGGER refuse_INSERT_models");
        db.exec("DROP TRIGGER refuse_UPDATE_models");
    }
    library.rescan();
    ASSERT_TRUE(powerhouse::test::wait_for([&] { return !library.scanning(); }, 20000));
    EXPECT_TRUE(library.errorText().isEmpty()) << library.errorText().toStdString();
    EXPECT_EQ(library.models()->rowCount(), 1);

    // Forgetting refused: shown, named, until dismissed; a good refresh does not hide it.
    const std::string model = (dir / "models" / "new.gguf").string();
    {
        SQLite::Database db(locked.path(), SQLite::OPEN_READWRITE);
        db.exec(
            "CREATE TRIGGER refuse_hide BEFORE INSERT ON hidden_models BEGIN SELECT RAISE(ABORT, 'disk full'); END");
    }
    library.forget(QString::fromStdString(model));
    ASSERT_TRUE(powerhouse::test::wait_for([&] { return !library.errorText().isEmpty(); }, 20000));
    EXPECT_TRUE(library.errorText().startsWith("new.gguf could not be forgotten: "))
        << library.errorText().toStdString();
    library.rescan();
    ASSERT_TRUE(powerhouse::test::wait_for([&] { return !library.scanning(); }, 20000));
    EXPECT_TRUE(library.errorText().startsWith("new.gguf could not be forgotten: "));
    library.dismissError();
    EXPECT_TRUE(library.errorText().isEmpty());
}

TEST(DesktopStoreErrors, ACostsSettingRefusedShowsTheStoredFigures) {
    LockedStore locked;
    CostsController costs(locked.store());
    locked.lock();
    costs.setHoursPerDay(4);
    locked.unlock();
    EXPECT_EQ(costs.hoursPerDay(), 8) << "the figures use a setting the store does not hold";
    EXPECT_TRUE(costs.error().contains("close that program and try again")) << costs.error().toStdString();
    costs.setHoursPerDay(4);
    EXPECT_EQ(costs.hoursPerDay(), 4);
    EXPECT_TRUE(costs.error().isEmpty());
}

TEST(DesktopStoreErrors, TheAppSaysWhatItCouldNotKeepAtStartAndLoad) {
    powerhouse::test::TempDir dir;
    const std::string db = (dir / "data" / "powerhouse.db").string();
    {
        auto store = Store::open(db);
        ASSERT_TRUE(store.ok()) << store.error().message;
        auto made = store->create_conversation("Deleted");
        ASSERT_TRUE(made.ok());
        ASSERT_TRUE(store->delete_conversation(made->id));
        SQLite::Database refuse(db, SQLite::OPEN_READWRITE);
        refuse.exec(
            "CREATE TRIGGER refuse_purge BEFORE DELETE ON conversations BEGIN SELECT RAISE(ABORT, 'disk full'); END");
        refuse.exec(
            "CREATE TRIGGER refuse_model BEFORE INSERT ON app_settings WHEN NEW.key = 'model_path' "
            "BEGIN SELECT RAISE(ABORT, 'disk full'); END");
    }
    DesktopApp::Options options;
    options.dataDir = QString::fromStdString((dir / "data").string());
    options.hubEndpoint = QStringLiteral("http://127.0.0.1:9");
    options.rescan = false;
    auto created = DesktopApp::create(options);
    ASSERT_TRUE(created.ok()) << created.error().message;
    std::unique_ptr<DesktopApp> app = std::move(*created);
    EXPECT_TRUE(app->chat().errorText().contains("could not be removed for good"))
        << app->chat().errorText().toStdString();
    EXPECT_EQ(app->chat().conversations()->rowCount(), 0) << "still hidden";

    app->load(QString::fromStdString((dir / "missing.gguf").string()), false);
    const QString error = app->chat().errorText();
    EXPECT_TRUE(error.contains("could not be kept as the model to open at the next start")) << error.toStdString();
    EXPECT_TRUE(error.contains("disk full")) << error.toStdString();
}

TEST(DesktopStoreErrors, AnEditTheStoreRefusesLosesNothing) {
    LockedStore locked;
    auto conversation = locked.store().create_conversation("Capitals");
    ASSERT_TRUE(conversation.ok());
    auto question = locked.store().add_message(conversation->id, "user", "What is the capital of France?");
    ASSERT_TRUE(question.ok());
    ASSERT_TRUE(locked.store().add_message(conversation->id, "assistant", "Paris.").ok());
    EngineClient engine;
    ChatController chat(locked.store(), engine);
    chat.selectConversation(conversation->id);
    ASSERT_EQ(chat.messages()->rowCount(), 2);
    chat.useRemote(RemoteTarget{"box", "http://127.0.0.1:9/v1", {}, {}, "tiny"});  // ready, never reached
    {
        // No new message can be stored (a full disk, say); deleting still works.
        SQLite::Database db(locked.path(), SQLite::OPEN_READWRITE);
        db.exec("CREATE TRIGGER refuse_new BEFORE INSERT ON messages BEGIN SELECT RAISE(ABORT, 'disk full'); END");
    }
    EXPECT_FALSE(chat.editAndResend(question->id, "What is the capital of Spain?"));
    EXPECT_TRUE(chat.errorText().contains("disk full")) << chat.errorText().toStdString();
    chat.flushWrites();
    auto messages = locked.store().messages(conversation->id);
    ASSERT_TRUE(messages.ok());
    ASSERT_EQ(messages->size(), 2u) << "the original and its answer were deleted, their replacement not stored";
    EXPECT_EQ((*messages)[0].content, "What is the capital of France?");
    EXPECT_EQ((*messages)[1].content, "Paris.");
    ASSERT_EQ(chat.messages()->rowCount(), 2) << "the window shows what the store holds";
    EXPECT_EQ(chat.messages()->at(0)->content, "What is the capital of France?");
}

}  // namespace
