// API keys of remote engines in the system keyring (QtKeychain: the Secret Service on Linux,
// i.e. gnome-keyring or KWallet), under the service "Powerhouse" and the key
// "remote-engine:<endpoint name>", and the user's Hugging Face token under "huggingface-token"
// (the *Entry calls take the whole key name). Keys are never written to the store, a file or a log: when
// no keyring is reachable the call fails with kNoKeyringMessage and nothing is kept
// (QtKeychain's plain-text fallback stays off).
//
// Calls are asynchronous (the keyring may ask the user to unlock it); the callback runs on
// the GUI thread with an empty error on success.
//
// Thread-safety: GUI thread only.
#pragma once

#include <QObject>
#include <QString>

#include <functional>

class KeyStore : public QObject {
    Q_OBJECT

public:
    static const QString kNoKeyringMessage;

    explicit KeyStore(QObject* parent = nullptr) : QObject(parent) {}

    // error empty: stored.
    void write(const QString& endpoint, const QString& key, std::function<void(const QString& error)> done);
    // error empty: found (key may be empty if none is stored: `found` false).
    void read(const QString& endpoint, std::function<void(const QString& key, bool found, const QString& error)> done);
    // Forgetting a key that is not there is no error.
    void remove(const QString& endpoint, std::function<void(const QString& error)> done);

    static QString entryName(const QString& endpoint) { return QStringLiteral("remote-engine:") + endpoint; }
    static QString hubTokenEntry() { return QStringLiteral("huggingface-token"); }

    // The same under a whole key name.
    void writeEntry(const QString& entry, const QString& key, std::function<void(const QString& error)> done);
    void readEntry(const QString& entry, std::function<void(const QString& key, bool found, const QString& error)> done);
    void removeEntry(const QString& entry, std::function<void(const QString& error)> done);
};
