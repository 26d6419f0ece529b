#include "message_blocks_model.h"

#include <algorithm>

MessageBlocksModel::MessageBlocksModel(QObject* parent) : QAbstractListModel(parent) {}

int MessageBlocksModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : m_rows;
}

QVariant MessageBlocksModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const auto& blocks = m_splitter.blocks();
    if (static_cast<size_t>(index.row()) >= blocks.size()) return {};  // a row about to be removed
    const MarkdownBlock& b = blocks[static_cast<size_t>(index.row())];
    switch (role) {
        case Qt::DisplayRole:
        case TextRole: return b.text;
        case KindRole: return b.kind == MarkdownBlock::Kind::code ? Code : Text;
        case LanguageRole: return b.language;
        case ClosedRole: return b.closed;
        default: return {};
    }
}

QHash<int, QByteArray> MessageBlocksModel::roleNames() const {
    return {{KindRole, "kind"}, {TextRole, "text"}, {LanguageRole, "language"}, {ClosedRole, "closed"}};
}

void MessageBlocksModel::setContent(const QString& markdown) {
    const int before = m_rows;
    beginResetModel();
    m_splitter = MarkdownSplitter();
    m_splitter.append(markdown);
    m_rows = static_cast<int>(m_splitter.blocks().size());
    endResetModel();
    if (m_rows != before) emit countChanged();
}

void MessageBlocksModel::appendText(const QString& text) {
    if (text.isEmpty()) return;
    // Only the blocks from the first unsettled one on can change: keep them to compare.
    const size_t from = m_splitter.settled();
    const std::vector<MarkdownBlock> old(m_splitter.blocks().begin() + static_cast<std::ptrdiff_t>(from),
                                         m_splitter.blocks().end());
    m_splitter.append(text);
    const std::vector<MarkdownBlock>& now = m_splitter.blocks();
    const int oldRows = m_rows;
    const int newRows = static_cast<int>(now.size());

    if (newRows < oldRows) {
        beginRemoveRows({}, newRows, oldRows - 1);
        m_rows = newRows;
        endRemoveRows();
    }
    int first = -1;
    int last = -1;
    QList<int> roles;
    for (int row = static_cast<int>(from); row < std::min(oldRows, newRows); ++row) {
        const MarkdownBlock& a = old[static_cast<size_t>(row) - from];
        const MarkdownBlock& b = now[static_cast<size_t>(row)];
        if (a == b) continue;
        if (first < 0) first = row;
        last = row;
        const auto changed = [&roles](bool differs, int role) {
            if (differs && !roles.contains(role)) roles.append(role);
        };
        changed(a.kind != b.kind, KindRole);
        changed(a.text != b.text, TextRole);
        changed(a.text != b.text, Qt::DisplayRole);
        changed(a.language != b.language, LanguageRole);
        changed(a.closed != b.closed, ClosedRole);
    }
    if (first >= 0) emit dataChanged(index(first), index(last), roles);
    if (newRows > oldRows) {
        beginInsertRows({}, oldRows, newRows - 1);
        m_rows = newRows;
        endInsertRows();
    }
    if (m_rows != oldRows) emit countChanged();
}
