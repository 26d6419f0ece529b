#include "key_store.h"

#include <qt6keychain/keychain.h>

const QString KeyStore::kNoKeyringMessage = QStringLiteral(
    "No system keyring: start gnome-keyring or KWallet, or use an endpoint without a key. The key was not stored.");

namespace {

const QString kService = QStringLiteral("Powerhouse");

// What went wrong, in words. Every failure to reach the Secret Service (no D-Bus session, no
// keyring daemon, a locked keyring nobody can unlock here) reads as kNoKeyringMessage, with
// QtKeychain's words after it.
QString describe(const QKeychain::Job& job) {
    switch (job.error()) {
        case QKeychain::NoError: return {};
        case QKeychain::AccessDeniedByUser: return QStringLiteral("The keyring refused access: %1").arg(job.errorString());
        case QKeychain::EntryNotFound: return {};
        default: return KeyStore::kNoKeyringMessage + QStringLiteral(" (") + job.errorString() + QLatin1Char(')');
    }
}

template <class Job>
Job* makeJob(QObject* parent, const QString& entry) {
    auto* job = new Job(kService, parent);
    job->setAutoDelete(true);
    job->setInsecureFallback(false);
    job->setKey(entry);
    return job;
}

}  // namespace

void KeyStore::write(const QString& endpoint, const QString& key, std::function<void(const QString&)> done) {
    writeEntry(entryName(endpoint), key, std::move(done));
}

void KeyStore::read(const QString& endpoint, std::function<void(const QString&, bool, const QString&)> done) {
    readEntry(entryName(endpoint), std::move(done));
}

void KeyStore::remove(const QString& endpoint, std::function<void(const QString&)> done) {
    removeEntry(entryName(endpoint), std::move(done));
}

void KeyStore::writeEntry(const QString& entry, const QString& key, std::function<void(const QString&)> done) {
    auto* job = makeJob<QKeychain::WritePasswordJob>(this, entry);
    job->setTextData(key);
    connect(job, &QKeychain::Job::finished, this, [done = std::move(done)](QKeychain::Job* j) { done(describe(*j)); });
    job->start();
}

void KeyStore::readEntry(const QString& entry, std::function<void(const QString&, bool, const QString&)> done) {
    auto* job = makeJob<QKeychain::ReadPasswordJob>(this, entry);
    connect(job, &QKeychain::Job::finished, this, [done = std::move(done)](QKeychain::Job* j) {
        auto* read = static_cast<QKeychain::ReadPasswordJob*>(j);
        if (read->error() == QKeychain::EntryNotFound) {
            done({}, false, {});
            return;
        }
        const QString error = describe(*read);
        done(error.isEmpty() ? read->textData() : QString(), error.isEmpty(), error);
    });
    job->start();
}

void KeyStore::removeEntry(const QString& entry, std::function<void(const QString&)> done) {
    auto* job = makeJob<QKeychain::DeletePasswordJob>(this, entry);
    connect(job, &QKeychain::Job::finished, this, [done = std::move(done)](QKeychain::Job* j) { done(describe(*j)); });
    job->start();
}
