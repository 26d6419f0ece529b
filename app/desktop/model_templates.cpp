#include "model_templates.h"

#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

namespace {

constexpr qint64 kMaxChatTemplateBytes = 1 << 20;  // the largest real ones are some 20 KB

std::string chat_template_key(const QString& path) {
    return "chat_template:" + path.toStdString();
}

std::string draft_model_key(const QString& path) {
    return "draft_model:" + path.toStdString();
}

}  // namespace

powerhouse::Result<std::optional<ModelChatTemplate>> model_chat_template(const powerhouse::store::Store& store,
                                                                         const QString& path) {
    auto stored = store.setting(chat_template_key(path));
    if (!stored) return stored.error();
    if (!*stored || (*stored)->empty()) return std::optional<ModelChatTemplate>();
    const QJsonObject o = QJsonDocument::fromJson(QByteArray::fromStdString(**stored)).object();
    const QString text = o.value(QLatin1String("text")).toString();
    if (text.trimmed().isEmpty()) return std::optional<ModelChatTemplate>();
    return std::optional<ModelChatTemplate>(
        ModelChatTemplate{o.value(QLatin1String("file")).toString(), text.toStdString()});
}

powerhouse::Result<void> set_model_chat_template(powerhouse::store::Store& store, const QString& path,
                                                 const QString& file) {
    using powerhouse::ErrorCode;
    QFile f(file);
    if (QFileInfo(file).isDir()) {
        return powerhouse::make_error(ErrorCode::invalid_argument,
                                      "'" + file.toStdString() + "' is a folder: choose a file with a chat template");
    }
    if (!f.open(QIODevice::ReadOnly)) {
        return powerhouse::make_error(ErrorCode::io,
                                      "cannot open '" + file.toStdString() + "': " + f.errorString().toStdString());
    }
    if (f.size() > kMaxChatTemplateBytes) {
        return powerhouse::make_error(ErrorCode::invalid_argument,
                                      "'" + file.toStdString() + "' is over 1 MiB: no chat template is that long");
    }
    const QString text = QString::fromUtf8(f.readAll());
    if (text.trimmed().isEmpty()) {
        return powerhouse::make_error(
            ErrorCode::invalid_argument,
            "'" + file.toStdString() + "' is empty: choose a file with a Jinja chat template");
    }
    const QJsonObject o{{QStringLiteral("file"), file}, {QStringLiteral("text"), text}};
    return store.set_setting(chat_template_key(path), QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString());
}

powerhouse::Result<void> clear_model_chat_template(powerhouse::store::Store& store, const QString& path) {
    return store.set_setting(chat_template_key(path), "");
}

powerhouse::Result<QString> model_draft_model(const powerhouse::store::Store& store, const QString& path) {
    auto stored = store.setting(draft_model_key(path));
    if (!stored) return stored.error();
    if (!*stored) return QString();
    return QString::fromStdString(**stored).trimmed();
}

powerhouse::Result<void> set_model_draft_model(powerhouse::store::Store& store, const QString& path,
                                               const QString& draft) {
    return store.set_setting(draft_model_key(path), draft.trimmed().toStdString());
}
