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

#include "costs_controller.h"
#include "desktop_test_support.h"
#include "power_controller.h"
#include "powerhouse/telemetry.h"
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

}  // namespace
