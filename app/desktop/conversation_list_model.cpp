#include "conversation_list_model.h"

#include <QDateTime>

ConversationListModel::ConversationListModel(powerhouse::store::Store& store, QObject* parent)
    : QAbstractListModel(parent), m_store(store) {
    reload();
}

int ConversationListModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

QVariant ConversationListModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const Row& row = m_rows[static_cast<size_t>(index.row())];
    switch (role) {
        case Qt::DisplayRole:
        case TitleRole: return row.title;
        case IdRole: return row.id;
        case SnippetRole: return row.snippet;
        case UpdatedRole: return QDateTime::fromMSecsSinceEpoch(row.updatedMs);
        case GeneratingRole: return m_generating.contains(row.id);
        default: return {};
    }
}

QHash<int, QByteArray> ConversationListModel::roleNames() const {
    return {{IdRole, "conversationId"},
            {TitleRole, "title"},
            {SnippetRole, "snippet"},
            {UpdatedRole, "updated"},
            {GeneratingRole, "generating"}};
}

void ConversationListModel::setFilter(const QString& filter) {
    if (filter == m_filter) return;
    m_filter = filter;
    emit filterChanged();
    reload();
}

void ConversationListModel::reload() {
    if (m_beforeRead) m_beforeRead();
    std::vector<Row> rows;
    if (m_filter.trimmed().isEmpty()) {
        auto list = m_store.conversations();
        if (!list) {
            emit error(QString::fromStdString(list.error().message));
            return;
        }
        for (const auto& c : *list) rows.push_back({c.id, QString::fromStdString(c.title), {}, c.updated_ms});
    } else {
        auto hits = m_store.search(m_filter.toStdString());
        if (!hits) {
            emit error(QString::fromStdString(hits.error().message));
            return;
        }
        for (const auto& h : *hits) {
            rows.push_back({h.conversation_id, QString::fromStdString(h.title), QString::fromStdString(h.snippet),
                            h.updated_ms});
        }
    }
    beginResetModel();
    m_rows = std::move(rows);
    endResetModel();
    emit countChanged();
}

void ConversationListModel::remove(qint64 conversationId) {
    const int row = rowOf(conversationId);
    if (row < 0) return;
    beginRemoveRows({}, row, row);
    m_rows.erase(m_rows.begin() + row);
    endRemoveRows();
    emit countChanged();
}

int ConversationListModel::rowOf(qint64 conversationId) const {
    for (size_t i = 0; i < m_rows.size(); ++i) {
        if (m_rows[i].id == conversationId) return static_cast<int>(i);
    }
    return -1;
}

void ConversationListModel::setGenerating(qint64 conversationId, bool generating) {
    if (generating == m_generating.contains(conversationId)) return;
    if (generating) {
        m_generating.insert(conversationId);
    } else {
        m_generating.remove(conversationId);
    }
    const int row = rowOf(conversationId);
    if (row >= 0) emit dataChanged(index(row), index(row), {GeneratingRole});
}
