// One message's blocks (markdown_blocks.h) as rows: Markdown text, or fenced code with its
// language and whether its closing fence has arrived. Text streaming into the message
// changes only the rows at the end (dataChanged on the last, rows inserted after it, and
// in one case rows removed: a last line "```" that an append turns into "```x`", no fence),
// never a reset, so the view keeps the delegates of the other blocks, and a code block keeps
// its selection and its "Copied" label while the answer goes on.
//
// Thread-safety: GUI thread only.
#pragma once

#include <QAbstractListModel>
#include <QString>
#include <QtQml/qqmlregistration.h>

#include "markdown_blocks.h"

class MessageBlocksModel : public QAbstractListModel {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("owned by MessageListModel")
    Q_PROPERTY(int count READ rowCount NOTIFY countChanged)

public:
    enum Kind { Text, Code };
    Q_ENUM(Kind)
    enum Role { KindRole = Qt::UserRole + 1, TextRole, LanguageRole, ClosedRole };

    explicit MessageBlocksModel(QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    // The message's content is now `markdown` (a reset: an edited or regenerated message).
    void setContent(const QString& markdown);
    // The content grows by `text` (a streaming answer).
    void appendText(const QString& text);

signals:
    void countChanged();

private:
    MarkdownSplitter m_splitter;
    // The rows the view knows: the splitter is ahead of them while rows are inserted or removed.
    int m_rows = 0;
};
