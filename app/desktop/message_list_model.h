// The messages of the open conversation, with the answer that is streaming in. Text that
// arrives for the streaming answer changes one row (dataChanged on its content), never the
// whole list, and reaches that message's blocks model as an append, so that only its last
// blocks are split again and change. An answer's reasoning (a reasoning model's thinking) is
// a role of its own beside the content, streamed in the same way.
//
// Thread-safety: GUI thread only.
#pragma once

#include <QAbstractListModel>
#include <QString>
#include <QtQml/qqmlregistration.h>

#include <vector>

#include "message_blocks_model.h"
#include "store/store.h"

class MessageListModel : public QAbstractListModel {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("owned by ChatController")
    Q_PROPERTY(int count READ rowCount NOTIFY countChanged)

public:
    // BlocksRole: the content cut into Markdown text and code blocks, a MessageBlocksModel*
    // that this model owns; made when first asked for, and kept while the row lives (a
    // content replaced by one that does not extend it resets it).
    // RecoveryRole: where the answer went on after a device failed under it, a line per
    // recovery ("Continued on CPU (8 threads) after GPU 1 failed at token 37: ..."), or "".
    // ReasoningRole: the answer's reasoning as plain text, "" when it has none.
    // ToolCallsRole: the tools an (imported) answer called, a line per call (toolCallsText),
    // "" for none.
    enum Role {
        IdRole = Qt::UserRole + 1,
        RoleRole,
        ContentRole,
        StateRole,
        StatsRole,
        ErrorRole,
        BlocksRole,
        RecoveryRole,
        ReasoningRole,
        ToolCallsRole
    };

    // A message's state (StateRole, as an int; store::MessageState's). QML reads them as
    // MessageListModel.Streaming, ...
    enum class State { Complete, Streaming, Stopped, Failed, Interrupted };
    Q_ENUM(State)
    static State stateOf(powerhouse::store::MessageState state);

    explicit MessageListModel(QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    void setMessages(std::vector<powerhouse::store::Message> messages);
    void append(powerhouse::store::Message message);
    // Adds text to a message's content (a streaming answer).
    void appendText(qint64 messageId, const QString& text);
    // Adds to a streaming answer's reasoning.
    void appendReasoning(qint64 messageId, const QString& reasoning);
    // Replaces a message (its final text, state and statistics).
    void update(const powerhouse::store::Message& message);
    void removeFrom(int row);  // this row and all after it
    int rowOf(qint64 messageId) const;
    const powerhouse::store::Message* at(int row) const;
    // The row's blocks (BlocksRole), null for a row that does not exist.
    MessageBlocksModel* blocks(int row) const;

    // "58.2 tokens/s · 41 ms to first token · 120 tokens", then where the prompt cache gave
    // some " · 812 of 840 prompt tokens from cache", and where measured
    // " · 84.0 J (0.70 J/token, 0.06 per M tokens)"; the cost needs a price per kWh (> 0).
    static QString statsText(const powerhouse::store::MessageStats& stats, double pricePerKwh = 0);
    // The tools an answer called (store::Message::tool_calls, OpenAI's JSON array), a line
    // per call: "Called get_weather({"city": "Paris"})"; "" for none or unreadable JSON.
    static QString toolCallsText(const std::string& toolCalls);
    // The electricity price the statistics quote costs at (0: none).
    void setElectricityPrice(double pricePerKwh);

signals:
    void countChanged();

private:
    // Deletes the blocks of the rows from `from` on, later: a view may still hold them.
    void dropBlocks(size_t from);

    std::vector<powerhouse::store::Message> m_messages;
    // Per row: its blocks, or null until asked for (children of this model). Mutable because
    // data() makes them.
    mutable std::vector<MessageBlocksModel*> m_blocks;
    double m_price = 0;
};
