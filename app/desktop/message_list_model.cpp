#include "message_list_model.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>

#include <algorithm>

#include "powerhouse/telemetry.h"

using powerhouse::store::Message;
using powerhouse::store::MessageState;

MessageListModel::MessageListModel(QObject* parent) : QAbstractListModel(parent) {}

int MessageListModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_messages.size());
}

QString MessageListModel::statsText(const powerhouse::store::MessageStats& stats, double pricePerKwh) {
    if (stats.generated_tokens == 0) return {};
    QString text = QStringLiteral("%1 tokens/s · %2 ms to first token · %3 tokens")
                       .arg(stats.tokens_per_second, 0, 'f', 1)
                       .arg(stats.ttft_ms, 0, 'f', 0)
                       .arg(stats.generated_tokens);
    if (stats.reused_tokens > 0) {
        text += QStringLiteral(" · %1 of %2 prompt tokens from cache")
                    .arg(stats.reused_tokens)
                    .arg(stats.prompt_tokens);
    }
    if (stats.drafted_tokens > 0)
        text += QStringLiteral(" · ") + QString::fromStdString(powerhouse::store::guesses_text(stats));
    if (stats.energy_joules) {
        const double perToken = *stats.energy_joules / static_cast<double>(stats.generated_tokens);
        text += QStringLiteral(" · %1 J (%2 J/token").arg(*stats.energy_joules, 0, 'f', 1).arg(perToken, 0, 'f', 2);
        if (pricePerKwh > 0) {
            text += QStringLiteral(", %1 per M tokens")
                        .arg(powerhouse::cost_per_million_tokens(perToken, pricePerKwh), 0, 'f', 2);
        }
        text += QLatin1Char(')');
    }
    if (!stats.throttle.empty()) text += QStringLiteral(" · ") + QString::fromStdString(stats.throttle);
    if (!stats.engine.empty() && stats.engine != "local") {
        text += QStringLiteral(" · %1 at %2").arg(QString::fromStdString(stats.model), QString::fromStdString(stats.engine));
    }
    return text;
}

QString MessageListModel::toolCallsText(const std::string& toolCalls) {
    if (toolCalls.empty()) return {};
    const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(toolCalls));
    QStringList lines;
    for (const QJsonValue& call : doc.array()) {
        const QJsonObject function = call.toObject().value(QLatin1String("function")).toObject();
        const QJsonValue arguments = function.value(QLatin1String("arguments"));
        // OpenAI sends the arguments as JSON text; some servers as an object.
        const QString args = arguments.isString() ? arguments.toString()
                             : arguments.isObject()
                                 ? QString::fromUtf8(QJsonDocument(arguments.toObject()).toJson(QJsonDocument::Compact))
                                 : QString();
        lines << QStringLiteral("Called %1(%2)").arg(function.value(QLatin1String("name")).toString(), args);
    }
    return lines.join(QLatin1Char('\n'));
}

void MessageListModel::setElectricityPrice(double pricePerKwh) {
    if (pricePerKwh == m_price) return;
    m_price = pricePerKwh;
    if (!m_messages.empty()) emit dataChanged(index(0), index(rowCount() - 1), {StatsRole});
}

MessageListModel::State MessageListModel::stateOf(powerhouse::store::MessageState state) {
    using powerhouse::store::MessageState;
    switch (state) {
        case MessageState::complete: return State::Complete;
        case MessageState::streaming: return State::Streaming;
        case MessageState::stopped: return State::Stopped;
        case MessageState::failed: return State::Failed;
        case MessageState::interrupted: return State::Interrupted;
    }
    return State::Complete;
}

QVariant MessageListModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const Message& m = m_messages[static_cast<size_t>(index.row())];
    switch (role) {
        case Qt::DisplayRole:
        case ContentRole: return QString::fromStdString(m.content);
        case IdRole: return static_cast<qint64>(m.id);
        case RoleRole: return QString::fromStdString(m.role);
        case StateRole: return static_cast<int>(stateOf(m.state));
        case StatsRole: return statsText(m.stats, m_price);
        case ErrorRole: return QString::fromStdString(m.error);
        case BlocksRole: return QVariant::fromValue<QObject*>(blocks(index.row()));
        case ReasoningRole:
            return QString::fromStdString(m.reasoning);
        case ToolCallsRole:
            return toolCallsText(m.tool_calls);
        case RecoveryRole: {
            QStringList lines;
            for (const powerhouse::store::MessageRecovery& r : m.stats.recoveries) {
                lines << QString::fromStdString(powerhouse::store::recovery_text(r));
            }
            return lines.join(QLatin1Char('\n'));
        }
        default: return {};
    }
}

QHash<int, QByteArray> MessageListModel::roleNames() const {
    return {{IdRole, "messageId"},       {RoleRole, "role"},         {ContentRole, "content"},
            {StateRole, "messageState"}, {StatsRole, "stats"},       {ErrorRole, "error"},
            {BlocksRole, "blocks"},      {RecoveryRole, "recovery"}, {ReasoningRole, "reasoning"},
            {ToolCallsRole, "toolCalls"}};
}

void MessageListModel::setMessages(std::vector<Message> messages) {
    beginResetModel();
    m_messages = std::move(messages);
    dropBlocks(0);
    m_blocks.assign(m_messages.size(), nullptr);
    endResetModel();
    emit countChanged();
}

void MessageListModel::append(Message message) {
    const int row = static_cast<int>(m_messages.size());
    beginInsertRows({}, row, row);
    m_messages.push_back(std::move(message));
    m_blocks.push_back(nullptr);
    endInsertRows();
    emit countChanged();
}

void MessageListModel::appendText(qint64 messageId, const QString& text) {
    const int row = rowOf(messageId);
    if (row < 0 || text.isEmpty()) return;
    m_messages[static_cast<size_t>(row)].content += text.toStdString();
    if (MessageBlocksModel* blocks = m_blocks[static_cast<size_t>(row)]) blocks->appendText(text);
    const QModelIndex i = index(row);
    // BlocksRole stays the same object: its own rows say what changed.
    emit dataChanged(i, i, {Qt::DisplayRole, ContentRole});
}

void MessageListModel::appendReasoning(qint64 messageId, const QString& reasoning) {
    const int row = rowOf(messageId);
    if (row < 0 || reasoning.isEmpty()) return;
    m_messages[static_cast<size_t>(row)].reasoning += reasoning.toStdString();
    const QModelIndex i = index(row);
    emit dataChanged(i, i, {ReasoningRole});
}

void MessageListModel::update(const Message& message) {
    const int row = rowOf(message.id);
    if (row < 0) return;
    Message& old = m_messages[static_cast<size_t>(row)];
    if (MessageBlocksModel* blocks = m_blocks[static_cast<size_t>(row)]; blocks && message.content != old.content) {
        // The final text of a streamed answer usually is what streamed in, or more of it.
        if (message.content.starts_with(old.content)) {
            blocks->appendText(QString::fromStdString(message.content.substr(old.content.size())));
        } else {
            blocks->setContent(QString::fromStdString(message.content));
        }
    }
    old = message;
    const QModelIndex i = index(row);
    emit dataChanged(i, i,
                     {Qt::DisplayRole, IdRole, RoleRole, ContentRole, StateRole, StatsRole, ErrorRole, RecoveryRole,
                      ReasoningRole, ToolCallsRole});
}

void MessageListModel::removeFrom(int row) {
    if (row < 0 || row >= rowCount()) return;
    beginRemoveRows({}, row, rowCount() - 1);
    m_messages.erase(m_messages.begin() + row, m_messages.end());
    dropBlocks(static_cast<size_t>(row));
    endRemoveRows();
    emit countChanged();
}

int MessageListModel::rowOf(qint64 messageId) const {
    for (size_t i = m_messages.size(); i-- > 0;) {
        if (m_messages[i].id == messageId) return static_cast<int>(i);
    }
    return -1;
}

const Message* MessageListModel::at(int row) const {
    return row >= 0 && row < rowCount() ? &m_messages[static_cast<size_t>(row)] : nullptr;
}

MessageBlocksModel* MessageListModel::blocks(int row) const {
    if (row < 0 || row >= rowCount()) return nullptr;
    MessageBlocksModel*& blocks = m_blocks[static_cast<size_t>(row)];
    if (blocks == nullptr) {
        // A child, so that QML never takes it for its own; made here because only the view
        // asks for it, and user messages and answers scrolled past need none until shown.
        blocks = new MessageBlocksModel(const_cast<MessageListModel*>(this));
        blocks->setContent(QString::fromStdString(m_messages[static_cast<size_t>(row)].content));
    }
    return blocks;
}

void MessageListModel::dropBlocks(size_t from) {
    for (size_t i = from; i < m_blocks.size(); ++i) {
        if (m_blocks[i] != nullptr) m_blocks[i]->deleteLater();
    }
    m_blocks.erase(m_blocks.begin() + static_cast<std::ptrdiff_t>(std::min(from, m_blocks.size())), m_blocks.end());
}
