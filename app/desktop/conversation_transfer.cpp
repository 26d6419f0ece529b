#include "conversation_transfer.h"

#include <QDate>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>

#include "store/transfer.h"

namespace {

bool isMarkdown(const QString& format) {
    return format == QLatin1String("md") || format == QLatin1String("markdown");
}

}  // namespace

ConversationTransfer::ConversationTransfer(powerhouse::store::Store& store, QObject* parent)
    : QObject(parent), m_store(store) {}

void ConversationTransfer::say(const QString& message, bool failed) {
    m_message = message;
    m_failed = failed;
    emit messageChanged();
}

bool ConversationTransfer::readIds(const QVariantList& ids, std::vector<int64_t>& out) {
    for (const QVariant& id : ids) {
        bool ok = false;
        const qint64 value = id.toLongLong(&ok);
        if (!ok) {
            say(tr("Cannot export: %1 is not a conversation").arg(id.toString()), true);
            return false;
        }
        out.push_back(value);
    }
    return true;
}

bool ConversationTransfer::exportConversations(const QVariantList& ids, const QString& format, const QUrl& file) {
    if (format != QLatin1String("json") && !isMarkdown(format)) {
        say(tr("Cannot export as \"%1\": choose JSON or Markdown").arg(format), true);
        return false;
    }
    if (!file.isLocalFile()) {
        say(tr("Cannot export to %1: choose a file on this computer").arg(file.toString()), true);
        return false;
    }
    std::vector<int64_t> chosen;
    if (!readIds(ids, chosen)) return false;
    if (m_beforeRead) m_beforeRead();
    const auto text = isMarkdown(format) ? powerhouse::store::export_markdown(m_store, chosen)
                                         : powerhouse::store::export_json(m_store, chosen);
    if (!text) {
        say(tr("Cannot export: %1").arg(QString::fromStdString(text.error().message)), true);
        return false;
    }
    const QString path = file.toLocalFile();
    // QSaveFile writes beside the file and renames on commit: never a half-written export.
    QSaveFile out(path);
    if (!out.open(QIODevice::WriteOnly) ||
        out.write(text->data(), static_cast<qint64>(text->size())) != static_cast<qint64>(text->size()) ||
        !out.commit()) {
        say(tr("Cannot write %1: %2").arg(path, out.errorString()), true);
        return false;
    }
    int count = static_cast<int>(chosen.size());
    if (chosen.empty()) {
        const auto all = m_store.conversations();
        count = all ? static_cast<int>(all->size()) : 0;
    }
    const QString fileName = QFileInfo(path).fileName();
    say(count == 1 ? tr("Exported 1 conversation to %1").arg(fileName)
                   : tr("Exported %1 conversations to %2").arg(count).arg(fileName),
        false);
    emit exported(path, count);
    return true;
}

bool ConversationTransfer::importConversations(const QUrl& file) {
    if (!file.isLocalFile()) {
        say(tr("Cannot import %1: choose a file on this computer").arg(file.toString()), true);
        return false;
    }
    const QString path = file.toLocalFile();
    const QString name = QFileInfo(path).fileName();
    // Refused before it is read when it is too large.
    if (const auto size = powerhouse::store::check_import_size(static_cast<uint64_t>(QFileInfo(path).size())); !size) {
        say(tr("Cannot import %1: %2").arg(name, QString::fromStdString(size.error().message)), true);
        return false;
    }
    QFile in(path);
    if (!in.open(QIODevice::ReadOnly)) {
        say(tr("Cannot import %1: %2").arg(name, in.errorString()), true);
        return false;
    }
    const QByteArray bytes = in.readAll();
    if (m_beforeRead) m_beforeRead();
    const auto report = powerhouse::store::import_json(m_store, std::string_view(bytes.constData(), bytes.size()));
    if (!report) {
        say(tr("Cannot import %1: %2").arg(name, QString::fromStdString(report.error().message)), true);
        return false;
    }
    const QString what =
        report->conversations == 1 ? tr("1 conversation") : tr("%1 conversations").arg(report->conversations);
    const QString messages = report->messages == 1 ? tr("1 message") : tr("%1 messages").arg(report->messages);
    say(tr("Imported %1 (%2) from %3").arg(what, messages, name), false);
    emit imported(report->ids.empty() ? 0 : report->ids.front(), report->conversations, report->messages);
    return true;
}

QString ConversationTransfer::suggestedFileName(const QVariantList& ids, const QString& format) const {
    QString base = tr("Powerhouse conversations %1").arg(QDate::currentDate().toString(Qt::ISODate));
    if (ids.size() == 1) {
        const auto conversation = m_store.conversation(ids.front().toLongLong());
        if (conversation && !conversation->title.empty()) {
            // What file systems and file managers dislike in a name becomes a space.
            QString title = QString::fromStdString(conversation->title);
            for (QChar& c : title) {
                if (c == QLatin1Char('/') || c == QLatin1Char('\\') || c == QLatin1Char(':') ||
                    c.category() == QChar::Other_Control) {
                    c = QLatin1Char(' ');
                }
            }
            title = title.simplified();
            if (title.startsWith(QLatin1Char('.'))) title.remove(0, 1);
            if (!title.isEmpty()) base = title.left(80);
        }
    }
    return base + (isMarkdown(format) ? QStringLiteral(".md") : QStringLiteral(".json"));
}
