// HubController (finding models on Hugging Face) against the loopback Hub
// (hub_test_server.py): searches across pages, a slow answer overtaken by a newer search and
// dropped, a repository's models by quantization with their fit estimates on a simulated
// GPU, errors as text, and a listed file handed to DownloadController and verified. The
// exact fit from a file's header equal to the Models page's fit of the same file on disk
// (and kept for the session, and the estimate kept with its reason when the header is too
// long); the token: gated repositories' words without one, sent to the Hub and with the
// downloads, refused, and the keyring's refusal when there is none.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QTest>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "desktop_test_support.h"
#include "download_controller.h"
#include "hub_controller.h"
#include "key_store.h"
#include "hub_test_server.h"
#include "settings_controller.h"
#include "store/store.h"
#include "support/test_support.h"

namespace {

using powerhouse::store::Store;
using powerhouse::test::open_store;

constexpr int kHubWait = 15000;

class HubControllerTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        hub_ = new powerhouse::test::HubTestServer(true, {"--delay-search", "slow=1.5"});
    }
    static void TearDownTestSuite() { delete hub_; }
    void SetUp() override {
        ASSERT_TRUE(hub_->running());
        store_ = std::make_unique<Store>(open_store(dir_));
        settings_ = std::make_unique<SettingsController>(*store_, QString());
        controller_ = std::make_unique<HubController>(*settings_, QString::fromStdString(hub_->endpoint()));
        controller_->setRetryTiming(2, 20);
    }
    // Simulated GPUs ("name:GiB"), no reserve kept on the first.
    void oneGpu(const char* spec) {
        powerhouse::GpuMonitorOptions options;
        options.simulate = spec;
        powerhouse::GpuMonitor monitor(options);
        const powerhouse::TelemetrySnapshot snapshot = monitor.sample_now();
        settings_->setDevices(snapshot);
        settings_->setGpuReserve(0, 0);
        controller_->setDevices(snapshot);
    }
    static QVariant result(const HubController& c, int row, int role) {
        const HubSearchModel& m = *const_cast<HubController&>(c).results();
        return m.data(m.index(row), role);
    }
    static QVariant file(const HubController& c, int row, int role) {
        const HubFilesModel& m = *const_cast<HubController&>(c).files();
        return m.data(m.index(row), role);
    }

    powerhouse::test::TempDir dir_;
    std::unique_ptr<Store> store_;
    std::unique_ptr<SettingsController> settings_;
    std::unique_ptr<HubController> controller_;
    static powerhouse::test::HubTestServer* hub_;
};

powerhouse::test::HubTestServer* HubControllerTest::hub_ = nullptr;

TEST_F(HubControllerTest, SearchesAcrossPagesOffTheGuiThread) {
    HubController& c = *controller_;
    QAbstractItemModelTester tester(c.results(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    c.search("  gguf ");
    // Asked, not answered: the GUI thread is not blocked by the network.
    EXPECT_TRUE(c.searching());
    EXPECT_EQ(c.query(), "gguf");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.searching(); }, kHubWait)) << c.error().toStdString();
    EXPECT_EQ(c.error(), "");
    EXPECT_EQ(c.message(), "");
    ASSERT_EQ(c.results()->rowCount(), 5);
    EXPECT_FALSE(c.more());
    EXPECT_EQ(result(c, 0, HubSearchModel::RepoIdRole).toString(), "split-org/Big-Model-GGUF");
    EXPECT_EQ(result(c, 0, HubSearchModel::DownloadsRole).toDouble(), 310455);
    EXPECT_EQ(result(c, 0, HubSearchModel::LikesRole).toDouble(), 842);
    EXPECT_EQ(result(c, 0, HubSearchModel::UpdatedRole).toString(), "2025-03-30");
    EXPECT_EQ(result(c, 1, HubSearchModel::GatedRole).toString(), "manual");
    EXPECT_EQ(result(c, 4, HubSearchModel::RepoIdRole).toString(), "plain-org/Model-GGUF-Pending");
    EXPECT_TRUE(result(c, 0, HubSearchModel::TagsRole).toStringList().contains("gguf"));
    EXPECT_EQ(c.results()->roleNames().value(HubSearchModel::RepoIdRole), "repoId");

    // A limit below what the Hub has: the rest is said to be there.
    c.search("gguf", 2);
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.searching(); }, kHubWait));
    EXPECT_EQ(c.results()->rowCount(), 2);
    EXPECT_TRUE(c.more());

    // Nothing found is said; an empty query clears.
    c.search("no such model");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.searching(); }, kHubWait));
    EXPECT_EQ(c.results()->rowCount(), 0);
    EXPECT_EQ(c.message(), "No GGUF model on Hugging Face matches “no such model”.");
    c.search("smollm2");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.searching(); }, kHubWait));
    EXPECT_EQ(c.results()->rowCount(), 3);
    c.search("");
    EXPECT_FALSE(c.searching());
    EXPECT_EQ(c.results()->rowCount(), 0);
}

TEST_F(HubControllerTest, ANewerSearchDropsTheOlderAnswer) {
    HubController& c = *controller_;
    QSignalSpy resets(c.results(), &QAbstractItemModel::modelReset);
    c.search("slow");  // the hub holds this answer back for 1.5 s
    c.search("smollm2");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.searching(); }, kHubWait));
    EXPECT_EQ(c.query(), "smollm2");
    ASSERT_EQ(c.results()->rowCount(), 3);
    EXPECT_EQ(resets.count(), 1);
    // Past the time the slow answer takes: it changed nothing (cancelled, or dropped when
    // it came).
    QTest::qWait(2000);
    EXPECT_EQ(resets.count(), 1);
    EXPECT_EQ(c.results()->rowCount(), 3);
    EXPECT_EQ(result(c, 0, HubSearchModel::RepoIdRole).toString(), powerhouse::test::kHubSmolRepo);
    EXPECT_EQ(c.error(), "");
    EXPECT_FALSE(c.searching());
}

TEST_F(HubControllerTest, FilesByQuantizationWithAnEstimateOfTheFit) {
    HubController& c = *controller_;
    QAbstractItemModelTester tester(c.files(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    oneGpu("Small:5");  // one GPU of 5 GiB
    c.showFiles("split-org/Big-Model-GGUF");
    EXPECT_TRUE(c.listing());
    EXPECT_EQ(c.repository(), "split-org/Big-Model-GGUF");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.listing(); }, kHubWait)) << c.error().toStdString();
    EXPECT_EQ(c.error(), "");
    ASSERT_EQ(c.files()->rowCount(), 3) << "IQ4_XS, Q4_K_M in 2 parts (on both pages), Q8_0 in 3";
    EXPECT_EQ(file(c, 0, HubFilesModel::QuantizationRole).toString(), "IQ4_XS");
    EXPECT_EQ(file(c, 1, HubFilesModel::QuantizationRole).toString(), "Q4_K_M");
    EXPECT_EQ(file(c, 1, HubFilesModel::PartsRole).toInt(), 2);
    EXPECT_TRUE(file(c, 1, HubFilesModel::CompleteRole).toBool());
    EXPECT_EQ(file(c, 1, HubFilesModel::SizeRole).toDouble(), 4680000000.0);
    EXPECT_EQ(file(c, 1, HubFilesModel::SizeTextRole).toString(), "4.36 GiB");
    EXPECT_EQ(file(c, 1, HubFilesModel::Sha256Role).toString().size(), 64);
    const QVariantList parts = file(c, 1, HubFilesModel::FilesRole).toList();
    ASSERT_EQ(parts.size(), 2);
    EXPECT_EQ(parts[1].toMap().value("url").toString().toStdString(),
              hub_->endpoint() + "/split-org/Big-Model-GGUF/resolve/main/Q4_K_M/Big-Model-Q4_K_M-00002-of-00002.gguf");

    // The simulated GPU has 300 MiB in use: 4.71 GiB free. 3.93 GiB and a tenth on top fit
    // there; 4.36 GiB and a tenth do not, nor 7.55 GiB.
    // Each says it is an estimate.
    EXPECT_TRUE(file(c, 0, HubFilesModel::FitsRole).toBool()) << file(c, 0, HubFilesModel::FitRole).toString().toStdString();
    EXPECT_FALSE(file(c, 1, HubFilesModel::FitsRole).toBool());
    EXPECT_FALSE(file(c, 2, HubFilesModel::FitsRole).toBool());
    EXPECT_TRUE(file(c, 0, HubFilesModel::EstimateRole).toBool());
    const QString fits = file(c, 0, HubFilesModel::FitRole).toString();
    EXPECT_EQ(fits, "Estimate from the file size: 3.93 GiB of weights, 4.71 GiB free on 1 GPU; the context's cache "
                    "comes on top");
    EXPECT_EQ(file(c, 2, HubFilesModel::FitRole).toString(),
              "Estimate from the file size: 7.55 GiB of weights, more than the 4.71 GiB free on 1 GPU");

    // The estimate follows the settings: a reserve of 1 GiB leaves too little for IQ4_XS.
    settings_->setGpuReserve(0, 1024);
    EXPECT_FALSE(file(c, 0, HubFilesModel::FitsRole).toBool());
    EXPECT_TRUE(file(c, 0, HubFilesModel::FitRole).toString().contains("3.71 GiB free"))
        << file(c, 0, HubFilesModel::FitRole).toString().toStdString();
    // No GPU chosen: the system's memory.
    settings_->setGpuUse(0, false);
    EXPECT_TRUE(file(c, 0, HubFilesModel::FitRole).toString().contains("system memory")) << file(c, 0, HubFilesModel::FitRole).toString().toStdString();
}

TEST_F(HubControllerTest, DownloadHandsEveryPartWithItsHash) {
    HubController& c = *controller_;
    QSignalSpy requested(&c, &HubController::downloadRequested);
    c.showFiles("split-org/Big-Model-GGUF");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.listing(); }, kHubWait));
    EXPECT_FALSE(c.download("smol-org/SmolLM2-135M-Instruct-GGUF", 0)) << "not the repository listed";
    EXPECT_FALSE(c.download("split-org/Big-Model-GGUF", 3));
    EXPECT_EQ(requested.count(), 0);
    ASSERT_TRUE(c.download("split-org/Big-Model-GGUF", 2));
    ASSERT_EQ(requested.count(), 3);
    for (int i = 0; i < 3; ++i) {
        EXPECT_TRUE(requested[i][0].toUrl().path().endsWith(QStringLiteral("-0000%1-of-00003.gguf").arg(i + 1)))
            << requested[i][0].toUrl().toString().toStdString();
        EXPECT_EQ(requested[i][1].toString().size(), 64);
    }
}

TEST_F(HubControllerTest, ErrorsAreShownAsText) {
    HubController& c = *controller_;
    c.showFiles("nobody/nothing");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.listing(); }, kHubWait));
    EXPECT_TRUE(c.error().contains("HTTP 404")) << c.error().toStdString();
    EXPECT_EQ(c.files()->rowCount(), 0);

    c.showFiles("plain-org/Model-GGUF-Pending");
    EXPECT_EQ(c.error(), "") << "a new listing clears the old error";
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.listing(); }, kHubWait));
    EXPECT_TRUE(c.message().startsWith("plain-org/Model-GGUF-Pending has no GGUF files")) << c.message().toStdString();

    c.showFiles("not a repository");
    EXPECT_FALSE(c.listing());
    EXPECT_EQ(c.error(), "“not a repository” is not a Hugging Face repository (owner/name).");

    c.search("malformed-no-id");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.searching(); }, kHubWait));
    EXPECT_EQ(c.error(), "search result 1 has no id");

    HubController refused(*settings_, QStringLiteral("http://127.0.0.1:1"));
    refused.setRetryTiming(1, 10);
    refused.search("x");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !refused.searching(); }, kHubWait));
    EXPECT_FALSE(refused.error().isEmpty());
}

TEST_F(HubControllerTest, AListedModelDownloadsVerified) {
    if (!std::filesystem::exists(powerhouse::test::test_model_path())) GTEST_SKIP() << "no test model";
    HubController& c = *controller_;
    const std::filesystem::path library = dir_ / "models";
    std::filesystem::create_directories(library);
    DownloadController downloads(*store_, QString::fromStdString(library.string()),
                                 QString::fromStdString(hub_->endpoint()));
    // As main.cpp wires them.
    QObject::connect(&c, &HubController::downloadRequested, &downloads,
                     [&downloads](const QUrl& url, const QString& sha256) { downloads.add(url, sha256.toStdString()); });
    QSignalSpy finished(&downloads, &DownloadController::finished);
    c.showFiles(powerhouse::test::kHubSmolRepo);
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.listing(); }, kHubWait));
    int q41 = -1;
    for (int row = 0; row < c.files()->rowCount(); ++row) {
        if (file(c, row, HubFilesModel::QuantizationRole).toString() == "Q4_1") q41 = row;
    }
    ASSERT_GE(q41, 0);
    ASSERT_TRUE(c.download(powerhouse::test::kHubSmolRepo, q41));
    ASSERT_TRUE(QTest::qWaitFor([&] { return finished.count() == 1; }, 60000))
        << downloads.data(downloads.index(0), DownloadController::StatusRole).toString().toStdString();
    EXPECT_EQ(finished[0][1].toString(), "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53")
        << "verified against the listing's hash";
    EXPECT_EQ(std::filesystem::file_size(library / powerhouse::test::kHubSmolFile),
              std::filesystem::file_size(powerhouse::test::test_model_path()));
}

TEST_F(HubControllerTest, ExactFitFromTheHeaderEqualsTheLocalFilesFit) {
    if (!std::filesystem::exists(powerhouse::test::test_model_path())) GTEST_SKIP() << "no test model";
    HubController& c = *controller_;
    QAbstractItemModelTester tester(c.files(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    oneGpu("Small:5");
    c.showFiles(powerhouse::test::kHubSmolRepo);
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.listing(); }, kHubWait)) << c.error().toStdString();
    int q41 = -1;
    for (int row = 0; row < c.files()->rowCount(); ++row) {
        if (file(c, row, HubFilesModel::QuantizationRole).toString() == "Q4_1") q41 = row;
    }
    ASSERT_GE(q41, 0);
    EXPECT_TRUE(file(c, q41, HubFilesModel::EstimateRole).toBool());
    hub_->requests(/*clear=*/true);
    c.checkFit(q41);
    EXPECT_TRUE(file(c, q41, HubFilesModel::CheckingRole).toBool()) << "read off the GUI thread";
    ASSERT_TRUE(QTest::qWaitFor([&] { return !file(c, q41, HubFilesModel::CheckingRole).toBool(); }, kHubWait));
    EXPECT_FALSE(file(c, q41, HubFilesModel::EstimateRole).toBool())
        << file(c, q41, HubFilesModel::FitRole).toString().toStdString();
    // What the Models page says of the same file on disk, word for word.
    auto local = powerhouse::read_model_shape(powerhouse::test::test_model_path());
    ASSERT_TRUE(local) << local.error().message;
    const QVariantMap expected = settings_->fitFor(*local);
    EXPECT_EQ(file(c, q41, HubFilesModel::FitRole).toString(), expected.value("text").toString());
    EXPECT_EQ(file(c, q41, HubFilesModel::FitsRole).toBool(), expected.value("fits").toBool());
    EXPECT_TRUE(file(c, q41, HubFilesModel::FitRole).toString().contains("tokens/s"))
        << file(c, q41, HubFilesModel::FitRole).toString().toStdString();
    const auto ranges = hub_->requests();
    EXPECT_FALSE(ranges.empty());
    for (const std::string& r : ranges) EXPECT_NE(r.find("/resolve/main/"), std::string::npos) << r;

    // It follows the settings, as the Models page does.
    settings_->setGpuUse(0, false);
    EXPECT_EQ(file(c, q41, HubFilesModel::FitRole).toString(), settings_->fitFor(*local).text);

    // Listed again: the shape read this session is used at once, nothing fetched.
    hub_->requests(/*clear=*/true);
    c.showFiles(powerhouse::test::kHubSmolRepo);
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.listing(); }, kHubWait));
    EXPECT_FALSE(file(c, q41, HubFilesModel::EstimateRole).toBool());
    for (const std::string& r : hub_->requests()) EXPECT_EQ(r.find("/resolve/"), std::string::npos) << r;
}

TEST_F(HubControllerTest, AHeaderPastTheCapKeepsTheEstimateWithTheReason) {
    if (!std::filesystem::exists(powerhouse::test::test_model_path())) GTEST_SKIP() << "no test model";
    HubController& c = *controller_;
    c.setHeaderLimits(32 << 10, 64 << 10);
    c.showFiles(powerhouse::test::kHubSmolRepo);
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.listing(); }, kHubWait)) << c.error().toStdString();
    int q41 = -1;
    for (int row = 0; row < c.files()->rowCount(); ++row) {
        if (file(c, row, HubFilesModel::QuantizationRole).toString() == "Q4_1") q41 = row;
    }
    ASSERT_GE(q41, 0);
    c.checkFit(q41);
    ASSERT_TRUE(QTest::qWaitFor([&] { return !file(c, q41, HubFilesModel::CheckingRole).toBool(); }, kHubWait));
    EXPECT_TRUE(file(c, q41, HubFilesModel::EstimateRole).toBool());
    const QString fit = file(c, q41, HubFilesModel::FitRole).toString();
    EXPECT_TRUE(fit.startsWith("Estimate from the file size")) << fit.toStdString();
    EXPECT_TRUE(fit.contains("longer than 64 KiB")) << fit.toStdString();
}

TEST_F(HubControllerTest, GatedRepositoriesAndTheToken) {
    HubController& c = *controller_;
    const std::string gated = "gated-org/Gated-Model-GGUF";
    const QString page = QString::fromStdString(hub_->endpoint() + "/" + gated);
    c.search("gguf");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.searching(); }, kHubWait)) << c.error().toStdString();
    ASSERT_EQ(result(c, 1, HubSearchModel::RepoIdRole).toString().toStdString(), gated);
    EXPECT_EQ(result(c, 1, HubSearchModel::GatedRole).toString(), "manual");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.listing(); }, kHubWait));

    // Opened without a token: what to do.
    c.showFiles(QString::fromStdString(gated));
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.listing(); }, kHubWait)) << c.error().toStdString();
    EXPECT_EQ(c.message(), QString::fromStdString(gated) + " is gated: accept its terms at " + page +
                               ", then add your Hugging Face token in Settings");
    // A token (as the keyring gives it): the words go, and the token goes with the API's requests.
    QSignalSpy tokens(&c, &HubController::tokenChanged);
    c.setToken(QStringLiteral(" hf_test_accepted "));
    EXPECT_TRUE(c.tokenSaved());
    ASSERT_EQ(tokens.count(), 1);
    EXPECT_EQ(tokens[0][0].toString(), "hf_test_accepted");
    EXPECT_EQ(c.message(), "");
    hub_->requests(/*clear=*/true);
    c.search("smollm2");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.searching(); }, kHubWait));
    const nlohmann::json seen = hub_->get_json("/_requests?auth=1");
    ASSERT_FALSE(seen.empty());
    EXPECT_EQ(seen[0]["authorization"], "Bearer hf_test_accepted");

    // The downloads get it for the Hub's host, and a refusal says the token was refused.
    const std::filesystem::path library = dir_ / "models";
    std::filesystem::create_directories(library);
    DownloadController downloads(*store_, QString::fromStdString(library.string()),
                                 QString::fromStdString(hub_->endpoint()));
    downloads.setRetryTiming(1, 10, 5);
    downloads.setHubToken(QStringLiteral("hf_wrong"));
    const int failed = static_cast<int>(DownloadController::State::Failed);
    downloads.add(QUrl(QString::fromStdString(hub_->endpoint() + "/" + gated + "/resolve/main/x.gguf")), {});
    ASSERT_TRUE(QTest::qWaitFor(
        [&] { return downloads.data(downloads.index(0), DownloadController::StateRole).toInt() == failed; },
        kHubWait));
    const QString status = downloads.data(downloads.index(0), DownloadController::StatusRole).toString();
    EXPECT_TRUE(status.startsWith(QString::fromStdString("Your Hugging Face token has no access to " + gated)))
        << status.toStdString();
    // Another host gets no token (the Hub's host only).
    hub_->requests(/*clear=*/true);
    downloads.add(QUrl(QString::fromStdString("http://localhost:" + hub_->endpoint().substr(hub_->endpoint().rfind(':') + 1) +
                                              "/" + gated + "/resolve/main/y.gguf")),
                  {});
    ASSERT_TRUE(QTest::qWaitFor(
        [&] { return downloads.data(downloads.index(1), DownloadController::StateRole).toInt() == failed; },
        kHubWait));
    for (const auto& r : hub_->get_json("/_requests?auth=1")) EXPECT_TRUE(r["authorization"].is_null()) << r.dump();

    c.saveToken(QStringLiteral("   "));
    EXPECT_TRUE(c.tokenError().startsWith("Paste a token first")) << c.tokenError().toStdString();
}

// The keyring (keyring_test.sh): inside a Secret Service the token is saved, read back by
// another controller at start and forgotten; with none, saving says so and nothing changes.
TEST_F(HubControllerTest, TheTokenLivesInTheKeyring) {
    const QString keyring = qEnvironmentVariable("POWERHOUSE_KEYRING_TEST");
    if (keyring != QLatin1String("secret-service") && keyring != QLatin1String("none")) {
        GTEST_SKIP() << "needs a Secret Service or none: run through tests/app/desktop/keyring_test.sh";
    }
    HubController& c = *controller_;
    QSignalSpy tokens(&c, &HubController::tokenChanged);
    c.saveToken(QStringLiteral("hf_test_accepted"));
    EXPECT_TRUE(c.tokenBusy());
    ASSERT_TRUE(QTest::qWaitFor([&] { return !c.tokenBusy(); }, 30000));
    if (keyring == QLatin1String("none")) {
        EXPECT_TRUE(c.tokenError().startsWith(KeyStore::kNoKeyringMessage)) << c.tokenError().toStdString();
        EXPECT_FALSE(c.tokenSaved());
        EXPECT_EQ(tokens.count(), 0) << "a token the keyring did not take is not used";
        return;
    }
    EXPECT_EQ(c.tokenError(), "");
    EXPECT_TRUE(c.tokenSaved());
    HubController next(*settings_, QString::fromStdString(hub_->endpoint()));
    QSignalSpy loaded(&next, &HubController::tokenChanged);
    next.loadToken();
    ASSERT_TRUE(QTest::qWaitFor([&] { return loaded.count() == 1; }, 30000));
    EXPECT_EQ(loaded[0][0].toString(), "hf_test_accepted");
    EXPECT_TRUE(next.tokenSaved());
    next.clearToken();
    ASSERT_TRUE(QTest::qWaitFor([&] { return !next.tokenBusy(); }, 30000));
    EXPECT_FALSE(next.tokenSaved());
    EXPECT_EQ(next.tokenError(), "");
    HubController third(*settings_, QString::fromStdString(hub_->endpoint()));
    third.loadToken();
    QTest::qWait(1000);
    EXPECT_FALSE(third.tokenSaved());
}

}  // namespace
