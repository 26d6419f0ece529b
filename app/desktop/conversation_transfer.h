// Conversations out of the app and in (app/core/store/transfer.h): export one, some or all
// as JSON (which import reads back) or Markdown to a file the user chose, and import a JSON
// file (ours, or an OpenAI-style message list) as new conversations, all or nothing.
//
// The outcome of the last export or import is `message` (with `failed` telling which kind);
// a successful import emits `imported`, on which the conversation list reloads and the first
// new conversation can be opened. Files are written through QSaveFile: a failed export leaves
// the chosen file as it was. Both run on the GUI thread: a conversation history is a few
// megabytes at most, read or written in milliseconds, and the store is the app's own, which
// one thread uses (a second connection on a worker would contend with streaming answers for
// the write lock during a large import). The chat writes on a writer thread of its own
// (ChatController): before each export or import, `beforeRead` waits for it to drain, so an
// export holds every answer as the chat shows it, and an import comes after its writes.
//
// Thread-safety: GUI thread only.
#pragma once

#include <QtQml/qqmlregistration.h>
#include <QObject>
#include <QString>
#include <QUrl>
#include <QVariantList>

#include <cstdint>
#include <functional>
#include <vector>

#include "store/store.h"

class ConversationTransfer : public QObject {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("made by main.cpp")
    Q_PROPERTY(QString message READ message NOTIFY messageChanged)  // the last export's or import's outcome
    Q_PROPERTY(bool failed READ failed NOTIFY messageChanged)       // whether it went wrong

public:
    explicit ConversationTransfer(powerhouse::store::Store& store, QObject* parent = nullptr);

    QString message() const { return m_message; }
    bool failed() const { return m_failed; }

    // Writes the conversations with these ids (numbers; an empty list: all of them) to a local
    // file: format "json" or "md" (also "markdown"). True when written.
    Q_INVOKABLE bool exportConversations(const QVariantList& ids, const QString& format, const QUrl& file);
    // Adds the conversations of a local JSON file. True when imported.
    Q_INVOKABLE bool importConversations(const QUrl& file);
    // A file name to offer in the save dialog: the conversation's title for one, else
    // "Powerhouse conversations YYYY-MM-DD", with the format's extension.
    Q_INVOKABLE QString suggestedFileName(const QVariantList& ids, const QString& format) const;
    // Called before each export or import touches the store (DesktopApp: the chat's flushWrites).
    void setBeforeRead(std::function<void()> beforeRead) { m_beforeRead = std::move(beforeRead); }

signals:
    void messageChanged();
    void exported(const QString& path, int conversations);
    // New conversations are in the store: the list should reload (ChatController's
    // conversations()->reload()), and `firstId` may be opened.
    void imported(qint64 firstId, int conversations, int messages);

private:
    void say(const QString& message, bool failed);
    // The ids QML passed, or an error message when one is not a number.
    bool readIds(const QVariantList& ids, std::vector<int64_t>& out);

    powerhouse::store::Store& m_store;
    std::function<void()> m_beforeRead;
    QString m_message;
    bool m_failed = false;
};
