// The desktop app's model library on the C++ side, without a window: dropped files imported
// and checked against the GPUs, and downloads from a local HTTP server (a Hugging Face model
// page by quantization, pause, resume, restart, cancel and bad links).
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QMetaEnum>
#include <QSignalSpy>
#include <QTest>

#include <filesystem>
#include <memory>

#include "chat_controller.h"
#include "desktop_test_support.h"
#include "download_controller.h"
#include "engine_client.h"
#include "http_test_server.h"
#include "library/download.h"
#include "library_controller.h"
#include "powerhouse/synth.h"
#include "settings_controller.h"
#include "store/store.h"
#include "support/test_support.h"

namespace {

using powerhouse::store::Store;
using powerhouse::test::open_store;

constexpr int kLibraryWait = 30000;  // ms

// The library's scans and imports run on its worker thread: these wait for them with the
// event loop running, as the window's would.
void waitForScans(const LibraryController& controller) {
    ASSERT_TRUE(QTest::qWaitFor([&] { return !controller.scanning(); }, kLibraryWait));
}
void waitForMessage(QSignalSpy& said) {
    ASSERT_TRUE(said.count() > 0 || said.wait(kLibraryWait)) << "the import has not said how it went";
    said.clear();
}

// A scan that lists the same models keeps their rows (and so the cards' delegates and the
// keyboard focus on one): only models that went or came are removed or inserted; a change of
// order resets the list. QAbstractItemModelTester checks every signal against the rows.
TEST(ModelList, ARescanKeepsTheRowsOfTheModelsThatStay) {
    ModelListModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    const auto rows = [](std::initializer_list<const char*> paths) {
        std::vector<ModelListModel::Row> out;
        for (const char* p : paths) {
            ModelListModel::Row r;
            r.record.path = p;
            r.name = QString::fromUtf8(p).toUpper();
            out.push_back(std::move(r));
        }
        return out;
    };
    const auto paths = [&] {
        std::vector<std::string> out;
        for (const ModelListModel::Row& r : model.rows()) out.push_back(r.record.path);
        return out;
    };
    model.setRows(rows({"a", "b", "c"}));
    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
    QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
    QSignalSpy removed(&model, &QAbstractItemModel::rowsRemoved);
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    QSignalSpy counted(&model, &ModelListModel::countChanged);

    model.setRows(rows({"a", "b", "c"}));  // the same scan again
    EXPECT_EQ(reset.count(), 0);
    EXPECT_EQ(changed.count(), 3);
    EXPECT_EQ(counted.count(), 0);

    model.setRows(rows({"a", "x", "c", "y"}));  // b went, x and y came
    EXPECT_EQ(reset.count(), 0);
    EXPECT_EQ(removed.count(), 1);
    EXPECT_EQ(inserted.count(), 2);
    EXPECT_EQ(paths(), (std::vector<std::string>{"a", "x", "c", "y"}));
    EXPECT_EQ(model.data(model.index(1), ModelListModel::NameRole).toString(), "X");
    EXPECT_EQ(counted.count(), 1);

    model.setRows(rows({"c", "a"}));  // another order: reset
    EXPECT_EQ(reset.count(), 1);
    EXPECT_EQ(paths(), (std::vector<std::string>{"c", "a"}));
    model.setRows({});
    EXPECT_EQ(model.rowCount(), 0);
}

TEST(LibraryController, ImportsDroppedFilesAndSaysWhetherEachFits) {
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    powerhouse::GpuMonitorOptions options;
    options.simulate = "Small:1";  // one GPU of 1 GiB
    powerhouse::GpuMonitor monitor(options);
    SettingsController settings(store, {});
    settings.setDevices(monitor.sample_now());
    settings.setGpuReserve(0, 0);
    const QString library = QString::fromStdString((dir / "models").string());
    LibraryController controller(store, settings, library);
    QAbstractItemModelTester tester(controller.models(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    controller.rescan();
    waitForScans(controller);
    EXPECT_EQ(controller.models()->rowCount(), 0);
    EXPECT_TRUE(QFileInfo(library).isDir()) << "the library folder is made";

    powerhouse::test::write_file(dir / "notes.txt", "hello");
    powerhouse::test::write_file(dir / "fake.gguf", "not really");
    QSignalSpy downloads(&controller, &LibraryController::downloadRequested);
    QSignalSpy said(&controller, &LibraryController::messageChanged);
    const QString model = QString::fromStdString(powerhouse::test::test_model_path().string());
    const int accepted = controller.importUrls({QUrl::fromLocalFile(model),
                                                QUrl::fromLocalFile(QString::fromStdString((dir / "notes.txt").string())),
                                                QUrl::fromLocalFile(QString::fromStdString((dir / "fake.gguf").string())),
                                                QUrl("https://huggingface.co/org/repo/resolve/main/m.gguf"),
                                                QUrl("ftp://example.org/m.gguf")});
    EXPECT_EQ(accepted, 3);  // the model, the broken .gguf (listed with its problem), the link
    ASSERT_EQ(downloads.count(), 1);
    EXPECT_EQ(downloads[0][0].toUrl().host(), "huggingface.co");
    waitForMessage(said);
    const QString message = controller.message();
    EXPECT_TRUE(message.contains("Added SmolLM2-135M-Instruct.Q4_1.gguf")) << message.toStdString();
    EXPECT_TRUE(message.contains("notes.txt is not a GGUF model")) << message.toStdString();
    EXPECT_TRUE(message.contains("fake.gguf, but it cannot be used")) << message.toStdString();
    EXPECT_TRUE(message.contains("neither a model file nor a web address")) << message.toStdString();

    const ModelListModel& models = *controller.models();
    ASSERT_EQ(models.rowCount(), 2);
    int smol = models.data(models.index(0), ModelListModel::UsableRole).toBool() ? 0 : 1;
    EXPECT_EQ(models.data(models.index(smol), ModelListModel::PathRole).toString(), model) << "registered in place";
    EXPECT_TRUE(models.data(models.index(smol), ModelListModel::DetailsRole).toString().contains("Q4_1"));
    EXPECT_TRUE(models.data(models.index(smol), ModelListModel::FitsRole).toBool())
        << models.data(models.index(smol), ModelListModel::FitRole).toString().toStdString();
    EXPECT_TRUE(models.data(models.index(smol), ModelListModel::FitRole).toString().contains("GPU 0 (Small)"));
    EXPECT_FALSE(models.data(models.index(1 - smol), ModelListModel::UsableRole).toBool());

    // A long context does not fit in 1 GiB; the page says which one would.
    settings.setContextLength(65536);
    EXPECT_FALSE(models.data(models.index(smol), ModelListModel::FitsRole).toBool());
    const QString suggestion = models.data(models.index(smol), ModelListModel::SuggestionRole).toString();
    EXPECT_TRUE(suggestion.startsWith("It fits with a context of ")) << suggestion.toStdString();

    QSignalSpy load(&controller, &LibraryController::loadRequested);
    controller.load(model);
    ASSERT_EQ(load.count(), 1);
    controller.setLoadedPath(model);
    EXPECT_TRUE(models.data(models.index(smol), ModelListModel::LoadedRole).toBool());

    // Copy mode puts the file into the library folder; a rescan lists what is there.
    controller.setImportMode("copy");
    controller.importUrls({QUrl::fromLocalFile(model)});
    waitForMessage(said);
    EXPECT_TRUE(QFileInfo::exists(library + "/SmolLM2-135M-Instruct.Q4_1.gguf"));
    controller.forget(model);
    controller.rescan();  // after the forgetting: the worker keeps the order asked
    waitForScans(controller);
    EXPECT_EQ(models.rowCount(), 2);  // the copy in the library, and the broken file
    EXPECT_EQ(LibraryController(store, settings, library).importMode(), "copy") << "kept in the store";
}

// The draft models a card offers (LibraryController::draftChoices) are the library's usable
// models: they are read again (draftChoicesChanged) when a model turns unusable or usable in
// place, a file spoilt or repaired, though the list keeps its length; a rescan that changes
// nothing does not ask for them again.
TEST(LibraryController, TheDraftChoicesFollowAModelTurningUnusableOrUsable) {
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    SettingsController settings(store, {});
    powerhouse::catalog::Environment nowhere;  // no other apps' downloads
    nowhere.ollama_service_models = dir / "no-ollama";
    const auto folder = dir / "models";
    std::filesystem::create_directories(folder);
    const auto draft = folder / "draft.gguf";
    std::filesystem::copy_file(powerhouse::test::test_model_path(), draft);
    LibraryController controller(store, settings, QString::fromStdString(folder.string()), nullptr, nowhere);
    QSignalSpy choicesChanged(&controller, &LibraryController::draftChoicesChanged);
    controller.rescan();
    waitForScans(controller);
    const QString big = QStringLiteral("/elsewhere/big.gguf");  // the card asking
    const auto offered = [&] {
        QStringList paths;
        for (const QVariant& c : controller.draftChoices(big)) paths << c.toMap().value("path").toString();
        return paths;
    };
    ASSERT_EQ(controller.models()->rowCount(), 1);
    EXPECT_EQ(offered(), QStringList{QString::fromStdString(draft.string())});
    EXPECT_EQ(choicesChanged.count(), 1);
    const int first = controller.draftChoicesRevision();

    controller.rescan();  // the same library
    waitForScans(controller);
    EXPECT_EQ(choicesChanged.count(), 1) << "nothing changed";

    // Spoilt in place (a download cut short, a file overwritten): still listed, not usable.
    std::filesystem::remove(draft);
    powerhouse::test::write_file(draft, "not a model any more");
    QSignalSpy counted(controller.models(), &ModelListModel::countChanged);
    controller.rescan();
    waitForScans(controller);
    ASSERT_EQ(controller.models()->rowCount(), 1);
    EXPECT_FALSE(controller.models()->data(controller.models()->index(0), ModelListModel::UsableRole).toBool());
    EXPECT_EQ(counted.count(), 0) << "the row count stays";
    EXPECT_EQ(choicesChanged.count(), 2);
    EXPECT_GT(controller.draftChoicesRevision(), first);
    EXPECT_TRUE(offered().isEmpty());

    // Whole again (the download finished): offered again.
    std::filesystem::remove(draft);
    std::filesystem::copy_file(powerhouse::test::test_model_path(), draft);
    controller.rescan();
    waitForScans(controller);
    EXPECT_EQ(choicesChanged.count(), 3);
    EXPECT_EQ(offered(), QStringList{QString::fromStdString(draft.string())});
}

// Other apps' downloads on the Models page: a fake home with an Ollama model (two tags of
// one blob) and an LM Studio one, named as a person writes them, with their source; a
// malformed manifest is a note; forgetting one hides it without touching its file.
TEST(LibraryController, ListsOtherAppsDownloadsWithTheirSource) {
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    SettingsController settings(store, {});
    const std::filesystem::path home = dir / "home";
    const std::filesystem::path ollama = home / ".ollama" / "models";
    const std::string blob = (ollama / "blobs" / ("sha256-" + std::string(64, 'a'))).string();
    const std::filesystem::path lms =
        home / ".lmstudio" / "models" / "bartowski" / "SmolLM2-135M-Instruct-GGUF" / "SmolLM2-135M-Instruct-Q4_1.gguf";
    for (const std::filesystem::path& to : {std::filesystem::path(blob), lms}) {
        std::filesystem::create_directories(to.parent_path());
        std::filesystem::copy_file(powerhouse::test::test_model_path(), to);
    }
    const std::string manifest = R"({"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:)" +
                                 std::string(64, 'a') + R"("}]})";
    for (const char* tag : {"135m", "latest"}) {
        std::filesystem::create_directories(ollama / "manifests" / "registry.ollama.ai" / "library" / "smollm2");
        powerhouse::test::write_file(ollama / "manifests" / "registry.ollama.ai" / "library" / "smollm2" / tag, manifest);
    }
    std::filesystem::create_directories(ollama / "manifests" / "registry.ollama.ai" / "library" / "broken");
    powerhouse::test::write_file(ollama / "manifests" / "registry.ollama.ai" / "library" / "broken" / "latest", "{");
    powerhouse::catalog::Environment env;
    env.home = home;
    env.ollama_service_models.clear();
    LibraryController controller(store, settings, QString::fromStdString((dir / "models").string()), nullptr, env);
    QAbstractItemModelTester tester(controller.models(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    controller.rescan();
    waitForScans(controller);

    const ModelListModel& models = *controller.models();
    ASSERT_EQ(models.rowCount(), 2);
    // By name: "SmolLM2 135M Instruct · Q4_1" (LM Studio's file name), "Smollm2 135M · Q4_1".
    EXPECT_EQ(models.data(models.index(0), ModelListModel::NameRole).toString(), "SmolLM2 135M Instruct · Q4_1");
    EXPECT_EQ(models.data(models.index(0), ModelListModel::SourceRole).toString(),
              "LM Studio · bartowski/SmolLM2-135M-Instruct-GGUF");
    EXPECT_EQ(models.data(models.index(0), ModelListModel::SourceKindRole).toString(), "lmstudio");
    EXPECT_EQ(models.data(models.index(1), ModelListModel::NameRole).toString(), "Smollm2 135M · Q4_1");
    EXPECT_EQ(models.data(models.index(1), ModelListModel::SourceRole).toString(),
              "Ollama · smollm2:135m, smollm2:latest");
    EXPECT_EQ(models.data(models.index(1), ModelListModel::SourceNameRole).toString(), "smollm2:135m, smollm2:latest");
    EXPECT_TRUE(models.data(models.index(1), ModelListModel::OtherAppRole).toBool());
    EXPECT_TRUE(models.data(models.index(1), ModelListModel::UsableRole).toBool());
    EXPECT_EQ(models.data(models.index(1), ModelListModel::PathRole).toString().toStdString(), blob);
    EXPECT_EQ(models.roleNames().value(ModelListModel::SourceRole), "source");
    ASSERT_EQ(controller.scanNotes().size(), 1);
    EXPECT_TRUE(controller.scanNotes()[0].contains("broken:latest")) << controller.scanNotes()[0].toStdString();

    controller.forget(QString::fromStdString(blob));
    controller.rescan();
    waitForScans(controller);
    EXPECT_EQ(models.rowCount(), 1) << "forgotten: hidden, not found again";
    EXPECT_TRUE(std::filesystem::exists(blob));
}

class DownloadControllerTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(server_.running());
        store_ = std::make_unique<Store>(open_store(dir_));
        std::filesystem::create_directories(library());
    }
    std::unique_ptr<DownloadController> make() {
        auto d = std::make_unique<DownloadController>(*store_, QString::fromStdString(library().string()),
                                                      QString::fromStdString(server_.url("")));
        d->setRetryTiming(3, 50, 2);
        return d;
    }
    std::filesystem::path library() const { return dir_ / "models"; }
    // The row's DownloadController::State, named in lower case ("choose", "done").
    static QString state(const DownloadController& d, int row) {
        const int value = d.data(d.index(row), DownloadController::StateRole).toInt();
        return QString::fromLatin1(QMetaEnum::fromType<DownloadController::State>().valueToKey(value)).toLower();
    }
    static QString status(const DownloadController& d, int row) {
        return d.data(d.index(row), DownloadController::StatusRole).toString();
    }

    powerhouse::test::HttpTestServer server_;
    powerhouse::test::TempDir dir_;
    std::unique_ptr<Store> store_;
};

TEST_F(DownloadControllerTest, AModelPageIsListedByQuantizationAndTheChosenFileArrivesVerified) {
    auto d = make();
    QAbstractItemModelTester tester(d.get(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    QSignalSpy finished(d.get(), &DownloadController::finished);
    const int id = d->add(QUrl(QString::fromStdString(server_.url("/org/repo"))));
    ASSERT_TRUE(QTest::qWaitFor([&] { return state(*d, 0) == "choose"; }, 10000)) << status(*d, 0).toStdString();
    const QVariantList options = d->data(d->index(0), DownloadController::OptionsRole).toList();
    ASSERT_EQ(options.size(), 3) << "Q4_K_M, Q8_0 and the two-part F16";
    EXPECT_TRUE(options[0].toMap().value("label").toString().startsWith("Q4_K_M: tiny-model-Q4_K_M"));
    EXPECT_TRUE(options[2].toMap().value("label").toString().contains("(2 parts)"));

    d->choose(id, 0);
    ASSERT_EQ(d->rowCount(), 1);
    EXPECT_EQ(d->data(d->index(0), DownloadController::NameRole).toString(), "tiny-model-Q4_K_M.gguf");
    ASSERT_TRUE(QTest::qWaitFor([&] { return finished.count() == 1; }, 20000)) << status(*d, 0).toStdString();
    EXPECT_EQ(state(*d, 0), "done");
    EXPECT_EQ(status(*d, 0), "Done, sha256 verified");
    EXPECT_EQ(finished[0][0].toString().toStdString(), (library() / "tiny-model-Q4_K_M.gguf").string());
    EXPECT_EQ(powerhouse::test::read_file(library() / "tiny-model-Q4_K_M.gguf"), powerhouse::test::test_payload());
    // The library takes it with the hash it was verified against (the payload is not a model).
    const QString sha = finished[0][1].toString();
    EXPECT_EQ(sha.size(), 64);
    SettingsController settings(*store_, {});
    LibraryController libraryController(*store_, settings, QString::fromStdString(library().string()));
    libraryController.addDownloaded(finished[0][0].toString(), sha);
    waitForScans(libraryController);
    auto record = store_->model_by_path((library() / "tiny-model-Q4_K_M.gguf").string());
    ASSERT_TRUE(record && *record);
    EXPECT_EQ((*record)->sha256, sha.toStdString());
    EXPECT_FALSE((*record)->ok);

    // The Q8_0 file's listed hash is not what the server sends: refused, nothing kept.
    const int q8 = d->add(QUrl(QString::fromStdString(server_.url("/org/repo"))));
    ASSERT_TRUE(QTest::qWaitFor([&] { return state(*d, 1) == "choose"; }, 10000));
    d->choose(q8, 1);
    ASSERT_TRUE(QTest::qWaitFor([&] { return state(*d, 1) == "failed"; }, 30000)) << status(*d, 1).toStdString();
    EXPECT_TRUE(status(*d, 1).contains("sha256")) << status(*d, 1).toStdString();
    EXPECT_FALSE(std::filesystem::exists(library() / "tiny-model-Q8_0.gguf"));
    d->clearFinished();
    EXPECT_EQ(d->rowCount(), 0);
}

TEST_F(DownloadControllerTest, PauseResumeAndARestartContinueFromTheKeptBytes) {
    // The first request stalls after 1 MB (for 20 s): time to pause it.
    const std::string url = server_.url("/org/repo/resolve/main/paused.gguf?id=pause&stall=1048576");
    const auto part = powerhouse::library::part_path(library() / "paused.gguf");
    {
        auto d = make();
        const int id = d->add(QUrl(QString::fromStdString(url)));
        ASSERT_TRUE(QTest::qWaitFor([&] {
            std::error_code ec;
            return std::filesystem::file_size(part, ec) >= 1048576 && !ec;
        }, 10000));
        d->pause(id);
        EXPECT_EQ(state(*d, 0), "paused");
        // The app quits with the download paused.
    }
    // Started again: the download is there, paused, with its bytes.
    auto d = make();
    ASSERT_EQ(d->rowCount(), 1);
    EXPECT_EQ(state(*d, 0), "paused");
    EXPECT_TRUE(status(*d, 0).startsWith("Paused, 1.0 MiB kept")) << status(*d, 0).toStdString();
    QSignalSpy finished(d.get(), &DownloadController::finished);
    d->resume(d->data(d->index(0), DownloadController::IdRole).toInt());
    ASSERT_TRUE(QTest::qWaitFor([&] { return finished.count() == 1; }, 20000)) << status(*d, 0).toStdString();
    EXPECT_EQ(powerhouse::test::read_file(library() / "paused.gguf"), powerhouse::test::test_payload());
    EXPECT_FALSE(std::filesystem::exists(part));
    // The second request asked for the rest only.
    const auto stats = server_.stats("pause");
    ASSERT_EQ(stats["ranges"].size(), 2u) << stats.dump();
    EXPECT_GE(stats["ranges"][1].get<int64_t>(), 1048576) << stats.dump();
}

TEST_F(DownloadControllerTest, CancelDeletesThePartialFileAndBadLinksSayWhy) {
    auto d = make();
    const auto part = powerhouse::library::part_path(library() / "gone.gguf");
    const int id = d->add(QUrl(QString::fromStdString(server_.url("/org/repo/resolve/main/gone.gguf?id=gone&stall=1048576"))));
    ASSERT_TRUE(QTest::qWaitFor([&] { return std::filesystem::exists(part); }, 10000));
    d->cancel(id);
    EXPECT_EQ(d->rowCount(), 0);
    EXPECT_TRUE(QTest::qWaitFor([&] { return !std::filesystem::exists(part); }, 10000));
    EXPECT_FALSE(std::filesystem::exists(library() / "gone.gguf"));

    d->add(QUrl(QString::fromStdString(server_.url("/ok"))));
    EXPECT_EQ(state(*d, 0), "failed");
    EXPECT_TRUE(status(*d, 0).contains("does not name a .gguf file")) << status(*d, 0).toStdString();
    d->add(QUrl(QString::fromStdString(server_.url("/org/repo/resolve/main/missing.gguf").replace(
        server_.url("").size(), 0, "/404-prefix"))));
    ASSERT_TRUE(QTest::qWaitFor([&] { return state(*d, 1) == "failed"; }, 10000));
    EXPECT_TRUE(status(*d, 1).contains("404")) << status(*d, 1).toStdString();
}

// Both came back "done": a folder under the file's name read as "Already in the library",
// and a code host's page about the file was kept as the model.
TEST_F(DownloadControllerTest, AFolderUnderTheNameOrAWebPageForTheFileFailsSayingWhy) {
    auto d = make();
    std::filesystem::create_directory(library() / "taken.gguf");
    d->add(QUrl(QString::fromStdString(server_.url("/org/repo/resolve/main/taken.gguf"))));
    EXPECT_EQ(state(*d, 0), "failed");
    EXPECT_TRUE(status(*d, 0).contains("taken.gguf already exists and is a folder")) << status(*d, 0).toStdString();

    // Not on the Hub's endpoint (which would take it for a model page): the same server as
    // "localhost", as a code host's page on another host is.
    std::string page = server_.url("/blob/page.gguf?id=page");
    page.replace(page.find("127.0.0.1"), 9, "localhost");
    d->add(QUrl(QString::fromStdString(page)));
    ASSERT_TRUE(QTest::qWaitFor([&] { return state(*d, 1) == "failed"; }, 10000)) << status(*d, 1).toStdString();
    EXPECT_TRUE(status(*d, 1).contains("answered with a web page, not the file")) << status(*d, 1).toStdString();
    EXPECT_FALSE(std::filesystem::exists(library() / "page.gguf"));
    EXPECT_FALSE(std::filesystem::exists(powerhouse::library::part_path(library() / "page.gguf")));
}

// An embedding model (a synthetic bge-small: a BERT encoder) beside a chat model: the
// library's reading of its file says it makes embeddings (its card's note), it is offered as
// no chat model's draft; loaded (for the API server's /v1/embeddings) it loads, and the chat
// refuses to send to it, saying why, without starting a conversation.
TEST(LibraryController, AnEmbeddingModelIsListedAsOneAndTheChatRefusesToSendToIt) {
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    SettingsController settings(store, {});
    powerhouse::catalog::Environment nowhere;  // no other apps' downloads
    nowhere.ollama_service_models = dir / "no-ollama";
    const auto folder = dir / "models";
    std::filesystem::create_directories(folder);
    const auto chat = folder / "chat.gguf";
    std::filesystem::copy_file(powerhouse::test::test_model_path(), chat);
    powerhouse::SynthOptions so;
    so.preset = "bge-small";
    so.type = "q8_0";
    so.n_layer = 2;
    so.output = folder / "bge-small.gguf";
    so.threads = 2;
    auto made = powerhouse::synthesize_model(so);
    ASSERT_TRUE(made) << made.error().message;
    const QString embedder = QString::fromStdString(so.output.string());

    LibraryController library(store, settings, QString::fromStdString(folder.string()), nullptr, nowhere);
    library.rescan();
    waitForScans(library);
    const ModelListModel& models = *library.models();
    ASSERT_EQ(models.rowCount(), 2);
    EXPECT_TRUE(models.roleNames().values().contains("embeddingOnly"));
    for (int i = 0; i < models.rowCount(); ++i) {
        const QString path = models.data(models.index(i), ModelListModel::PathRole).toString();
        EXPECT_TRUE(models.data(models.index(i), ModelListModel::UsableRole).toBool()) << path.toStdString();
        EXPECT_EQ(models.data(models.index(i), ModelListModel::EmbeddingOnlyRole).toBool(), path == embedder)
            << path.toStdString();
    }
    // Not offered as the chat model's draft: it writes no text to guess.
    QStringList offered;
    for (const QVariant& c : library.draftChoices(QStringLiteral("/elsewhere/big.gguf"))) {
        offered << c.toMap().value("path").toString();
    }
    EXPECT_EQ(offered, QStringList{QString::fromStdString(chat.string())});

    // Loaded (the API server's model): it loads, and the chat says it cannot chat with it.
    EngineClient engine;
    ChatController controller(store, engine);
    powerhouse::ModelOptions options;
    options.n_ctx = 512;
    options.n_threads = 2;
    controller.loadModel(embedder, options);
    ASSERT_TRUE(
        powerhouse::test::wait_for([&] { return controller.modelState() != ChatController::ModelState::Loading; }));
    ASSERT_EQ(controller.modelState(), ChatController::ModelState::Ready) << controller.errorText().toStdString();
    const QString reason = controller.cannotChatReason();
    EXPECT_TRUE(
        reason.contains("is an embedding model: it makes embeddings for the API server's /v1/embeddings, "
                        "not chat answers. To chat, load a chat model on the Models page."))
        << reason.toStdString();
    EXPECT_FALSE(controller.send("Hello"));
    EXPECT_EQ(controller.errorText(), reason);
    EXPECT_EQ(controller.currentConversationId(), 0) << "no conversation started";
    EXPECT_FALSE(controller.generating());

    // A chat model loaded after it chats.
    controller.loadModel(QString::fromStdString(chat.string()), options);
    ASSERT_TRUE(
        powerhouse::test::wait_for([&] { return controller.modelState() != ChatController::ModelState::Loading; }));
    ASSERT_EQ(controller.modelState(), ChatController::ModelState::Ready) << controller.errorText().toStdString();
    EXPECT_TRUE(controller.cannotChatReason().isEmpty());
}

}  // namespace
