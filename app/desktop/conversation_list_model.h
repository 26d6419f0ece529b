// The conversations of the left column, newest activity first, or the hits of a search
// over titles and contents (with the matching text as the snippet), each saying whether an
// answer is being generated in it.
//
// Thread-safety: GUI thread only.
#pragma once

#include <QAbstractListModel>
#include <QSet>
#include <QString>
#include <QtQml/qqmlregistration.h>

#include <functional>
#include <vector>

#include "store/store.h"

class ConversationListModel : public QAbstractListModel {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("owned by ChatController")
    Q_PROPERTY(QString filter READ filter WRITE setFilter NOTIFY filterChanged)
    Q_PROPERTY(int count READ rowCount NOTIFY countChanged)

public:
    enum Role { IdRole = Qt::UserRole + 1, TitleRole, SnippetRole, UpdatedRole, GeneratingRole };

    explicit ConversationListModel(powerhouse::store::Store& store, QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    QString filter() const { return m_filter; }
    void setFilter(const QString& filter);
    // Reads the list again from the store (after a change elsewhere). Errors go to `error`.
    void reload();
    // Called before each read of the store: ChatController waits there for its writer to
    // drain, so that the list shows every write made before it.
    void setBeforeRead(std::function<void()> beforeRead) { m_beforeRead = std::move(beforeRead); }
    // Takes a conversation out of the list at once (deleted; the store follows).
    void remove(qint64 conversationId);
    int rowOf(qint64 conversationId) const;
    // Whether a conversation has an answer being generated (kept across reloads).
    void setGenerating(qint64 conversationId, bool generating);

signals:
    void filterChanged();
    void countChanged();
    void error(const QString& message);

private:
    struct Row {
        qint64 id = 0;
        QString title;
        QString snippet;
        qint64 updatedMs = 0;
    };

    powerhouse::store::Store& m_store;
    std::function<void()> m_beforeRead;
    QString m_filter;
    std::vector<Row> m_rows;
    QSet<qint64> m_generating;
};
