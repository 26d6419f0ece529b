#include "library_controller.h"

#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

#include "catalog/catalog.h"
#include "catalog/library.h"

namespace {

QString sizeText(double bytes) {
    if (bytes >= 1024.0 * 1024 * 1024) return QString::number(bytes / (1024.0 * 1024 * 1024), 'f', 1) + " GiB";
    return QString::number(bytes / (1024.0 * 1024), 'f', 0) + " MiB";
}

QString paramsText(double n) {
    if (n >= 1e9) return QString::number(n / 1e9, 'f', 1) + " B";
    return QString::number(n / 1e6, 'f', 0) + " M";
}

}  // namespace

int ModelListModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

QVariant ModelListModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const Row& r = m_rows[static_cast<size_t>(index.row())];
    switch (role) {
        case Qt::DisplayRole:
        case NameRole: return r.name;
        case PathRole: return QString::fromStdString(r.record.path);
        case FileNameRole: return QFileInfo(QString::fromStdString(r.record.path)).fileName();
        case DetailsRole: return r.details;
        case UsableRole: return r.record.ok;
        case ProblemRole: return QString::fromStdString(r.record.problem);
        case FitsRole: return r.fit.value("fits").toBool();
        case FitRole: return r.fit.value("text").toString();
        case SuggestionRole: return r.fit.value("suggestion").toString();
        case LoadedRole: return !m_loaded.isEmpty() && QString::fromStdString(r.record.path) == m_loaded;
        case SourceRole: return r.source;
        case SourceKindRole: return QString::fromStdString(r.record.source);
        case SourceNameRole: return QString::fromStdString(r.record.source_name);
        case OtherAppRole: return powerhouse::catalog::is_other_app(r.record.source);
        default: return {};
    }
}

QHash<int, QByteArray> ModelListModel::roleNames() const {
    return {{PathRole, "path"},       {NameRole, "name"},       {FileNameRole, "fileName"},
            {DetailsRole, "details"}, {UsableRole, "usable"},   {ProblemRole, "problem"},
            {FitsRole, "fits"},       {FitRole, "fit"},         {SuggestionRole, "suggestion"},
            {LoadedRole, "loaded"},   {SourceRole, "source"},   {SourceKindRole, "sourceKind"},
            {SourceNameRole, "sourceName"}, {OtherAppRole, "otherApp"}};
}

void ModelListModel::setRows(std::vector<Row> rows) {
    const bool countChanges = rows.size() != m_rows.size();
    beginResetModel();
    m_rows = std::move(rows);
    endResetModel();
    if (countChanges) emit countChanged();
}

void ModelListModel::setFits(const std::vector<QVariantMap>& fits) {
    for (size_t i = 0; i < m_rows.size() && i < fits.size(); ++i) m_rows[i].fit = fits[i];
    if (!m_rows.empty()) emit dataChanged(index(0), index(rowCount() - 1), {FitsRole, FitRole, SuggestionRole});
}

void ModelListModel::setLoadedPath(const QString& path) {
    m_loaded = path;
    if (!m_rows.empty()) emit dataChanged(index(0), index(rowCount() - 1), {LoadedRole});
}

LibraryController::LibraryController(powerhouse::store::Store& store, SettingsController& settings,
                                     QString libraryFolder, QObject* parent,
                                     powerhouse::catalog::Environment environment)
    : QObject(parent),
      m_store(store),
      m_settings(settings),
      m_library(std::move(libraryFolder)),
      m_environment(std::move(environment)) {
    if (auto mode = m_store.setting("import_mode"); mode && *mode) {
        const QString saved = QString::fromStdString(**mode);
        if (saved == QLatin1String("copy") || saved == QLatin1String("move")) m_importMode = saved;
    }
    // The fit follows the settings and the GPUs' free memory.
    connect(&m_settings, &SettingsController::previewChanged, this, &LibraryController::refit);
    connect(&m_settings, &SettingsController::changed, this, &LibraryController::refit);
    connect(&m_settings, &SettingsController::applied, this, &LibraryController::refit);
}

void LibraryController::setImportMode(const QString& mode) {
    if (mode == m_importMode || (mode != QLatin1String("in_place") && mode != QLatin1String("copy") &&
                                 mode != QLatin1String("move"))) {
        return;
    }
    m_importMode = mode;
    (void)m_store.set_setting("import_mode", mode.toStdString());
    emit importModeChanged();
}

void LibraryController::say(const QString& message) {
    m_message = message;
    emit messageChanged();
}

void LibraryController::rescan() {
    // The same refresh as `powerhouse-cli list`, so both list the same models.
    powerhouse::catalog::LibraryPlaces places;
    places.library = m_library.toStdString();
    places.environment = m_environment;
    auto library = powerhouse::catalog::refresh_library(m_store, places);
    if (!library) {
        emit error(QString::fromStdString(library.error().message));
        return;
    }
    QStringList notes;
    for (const std::string& note : library->notes) notes << QString::fromStdString(note);
    if (notes != m_scanNotes) {
        m_scanNotes = notes;
        emit scanNotesChanged();
    }
    reload();
}

void LibraryController::reload() {
    auto library = powerhouse::catalog::list_library(m_store);
    if (!library) {
        emit error(QString::fromStdString(library.error().message));
        return;
    }
    std::vector<ModelListModel::Row> rows;
    for (powerhouse::catalog::LibraryEntry& entry : library->models) {
        powerhouse::store::ModelRecord& record = entry.record;
        ModelListModel::Row row;
        const QJsonObject info = QJsonDocument::fromJson(QByteArray::fromStdString(record.info_json)).object();
        row.name = QString::fromStdString(entry.name);
        row.source = QString::fromStdString(powerhouse::catalog::source_label(record));
        QStringList details;
        if (!info.value("architecture").toString().isEmpty()) details << info.value("architecture").toString();
        if (!info.value("file_type").toString().isEmpty()) details << info.value("file_type").toString();
        if (info.value("n_params").toDouble() > 0) details << paramsText(info.value("n_params").toDouble()) + " parameters";
        if (info.value("n_layer").toInt() > 0) details << tr("%1 layers").arg(info.value("n_layer").toInt());
        if (info.value("parts").toInt() > 1) details << tr("%1 parts").arg(info.value("parts").toInt());
        details << sizeText(static_cast<double>(record.file_size));
        row.details = details.join(QStringLiteral(" · "));
        row.record = std::move(record);
        rows.push_back(std::move(row));
    }
    m_models.setRows(std::move(rows));
    refit();
}

void LibraryController::refit() {
    std::vector<QVariantMap> fits;
    for (const ModelListModel::Row& row : m_models.rows()) {
        if (!row.record.ok) {
            fits.push_back({});
            continue;
        }
        auto& shape = m_shapes[row.record.path];
        if (!shape) {
            auto read = powerhouse::read_model_shape(row.record.path);
            if (read) shape = std::move(read).value();
        }
        fits.push_back(shape ? m_settings.fitFor(*shape) : QVariantMap{{"text", tr("The file can no longer be read.")}});
    }
    m_models.setFits(fits);
}

int LibraryController::importUrls(const QList<QUrl>& urls) {
    int accepted = 0;
    QStringList said;
    const auto mode = m_importMode == QLatin1String("copy")   ? powerhouse::catalog::ImportMode::copy
                      : m_importMode == QLatin1String("move") ? powerhouse::catalog::ImportMode::move
                                                              : powerhouse::catalog::ImportMode::in_place;
    for (const QUrl& url : urls) {
        if (url.scheme() == QLatin1String("http") || url.scheme() == QLatin1String("https")) {
            emit downloadRequested(url);
            said << tr("Downloading %1").arg(url.fileName().isEmpty() ? url.toString() : url.fileName());
            ++accepted;
            continue;
        }
        if (!url.isLocalFile()) {
            said << tr("%1 is neither a model file nor a web address.").arg(url.toString());
            continue;
        }
        const QString path = url.toLocalFile();
        if (QFileInfo(path).isDir()) {
            // A folder: add it to the library's folders and scan it.
            (void)m_store.add_model_folder(path.toStdString());
            auto report = powerhouse::catalog::scan_folder(m_store, path.toStdString());
            if (!report) {
                said << QString::fromStdString(report.error().message);
                continue;
            }
            said << tr("Added the folder %1: %2 models").arg(path).arg(report->added + report->updated + report->unchanged);
            ++accepted;
            continue;
        }
        auto record = powerhouse::catalog::import_model(m_store, path.toStdString(), mode, m_library.toStdString());
        if (!record) {
            said << QString::fromStdString(record.error().message);
            continue;
        }
        m_shapes.erase(record->path);
        const QString name = QFileInfo(QString::fromStdString(record->path)).fileName();
        said << (record->ok ? tr("Added %1").arg(name)
                            : tr("Added %1, but it cannot be used: %2").arg(name, QString::fromStdString(record->problem)));
        ++accepted;
    }
    reload();
    say(said.join(QLatin1Char('\n')));
    return accepted;
}

void LibraryController::load(const QString& path) { emit loadRequested(path); }

void LibraryController::addDownloaded(const QString& path, const QString& verifiedSha256) {
    // Downloaded again after being forgotten: shown again.
    (void)m_store.unhide_model(path.toStdString());
    rescan();
    auto record = m_store.model_by_path(path.toStdString());
    if (!record || !*record) return;
    powerhouse::store::ModelRecord r = **record;
    r.source = "downloaded";
    if (!verifiedSha256.isEmpty()) r.sha256 = verifiedSha256.toStdString();
    if (auto saved = m_store.put_model(r); !saved) {
        emit error(QString::fromStdString(saved.error().message));
        return;
    }
    reload();
}

void LibraryController::forget(const QString& path) {
    if (auto removed = powerhouse::catalog::forget_model(m_store, path.toStdString()); !removed) {
        emit error(QString::fromStdString(removed.error().message));
        return;
    }
    reload();
}
