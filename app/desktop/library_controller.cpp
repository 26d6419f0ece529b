#include "library_controller.h"

#include <unordered_set>

#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

#include <filesystem>

#include "catalog/catalog.h"
#include "catalog/library.h"
#include "model_templates.h"

namespace {

QString sizeText(double bytes) {
    if (bytes >= 1024.0 * 1024 * 1024) return QString::number(bytes / (1024.0 * 1024 * 1024), 'f', 1) + " GiB";
    return QString::number(bytes / (1024.0 * 1024), 'f', 0) + " MiB";
}

QString paramsText(double n) {
    if (n >= 1e9) return QString::number(n / 1e9, 'f', 1) + " B";
    return QString::number(n / 1e6, 'f', 0) + " M";
}

// A model as the page lists it (its fit comes later, from its shape).
ModelListModel::Row rowOf(const powerhouse::catalog::LibraryEntry& entry) {
    const powerhouse::store::ModelRecord& record = entry.record;
    ModelListModel::Row row;
    const QJsonObject info = QJsonDocument::fromJson(QByteArray::fromStdString(record.info_json)).object();
    row.name = QString::fromStdString(entry.name);
    row.source = QString::fromStdString(powerhouse::catalog::source_label(record));
    QStringList details;
    if (!info.value("architecture").toString().isEmpty()) details << info.value("architecture").toString();
    if (!info.value("file_type").toString().isEmpty()) details << info.value("file_type").toString();
    if (info.value("n_params").toDouble() > 0) details << paramsText(info.value("n_params").toDouble()) + " parameters";
    if (info.value("n_layer").toInt() > 0) {
        details << LibraryController::tr("%1 layers").arg(info.value("n_layer").toInt());
    }
    if (info.value("parts").toInt() > 1) details << LibraryController::tr("%1 parts").arg(info.value("parts").toInt());
    details << sizeText(static_cast<double>(record.file_size));
    row.details = details.join(QStringLiteral(" · "));
    row.record = record;
    return row;
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
        case FitsRole: return r.fit.fits;
        case FitRole: return r.fit.text;
        case SuggestionRole: return r.fit.suggestion;
        case LoadedRole: return !m_loaded.isEmpty() && QString::fromStdString(r.record.path) == m_loaded;
        case SourceRole: return r.source;
        case SourceKindRole: return QString::fromStdString(r.record.source);
        case SourceNameRole: return QString::fromStdString(r.record.source_name);
        case OtherAppRole: return powerhouse::catalog::is_other_app(r.record.source);
        case LoadErrorRole:
            return m_loadErrors.value(QString::fromStdString(r.record.path));
        case EmbeddingOnlyRole:
            return r.shape != nullptr && r.shape->embedding_only;
        default: return {};
    }
}

QHash<int, QByteArray> ModelListModel::roleNames() const {
    return {{PathRole, "path"},
            {NameRole, "name"},
            {FileNameRole, "fileName"},
            {DetailsRole, "details"},
            {UsableRole, "usable"},
            {ProblemRole, "problem"},
            {FitsRole, "fits"},
            {FitRole, "fit"},
            {SuggestionRole, "suggestion"},
            {LoadedRole, "loaded"},
            {SourceRole, "source"},
            {SourceKindRole, "sourceKind"},
            {SourceNameRole, "sourceName"},
            {OtherAppRole, "otherApp"},
            {LoadErrorRole, "loadError"},
            {EmbeddingOnlyRole, "embeddingOnly"}};
}

void ModelListModel::setRows(std::vector<Row> rows) {
    const size_t before = m_rows.size();
    // A scan lists the same models again and again: rows that stay keep their delegates (and
    // the keyboard focus on a card) when the models that stay keep their order; only what
    // went or came is removed or inserted. Any other change resets the list.
    std::unordered_set<std::string> incoming;
    for (const Row& r : rows) incoming.insert(r.record.path);
    std::vector<std::string> kept_old, kept_new;
    for (const Row& r : m_rows) {
        if (incoming.count(r.record.path) != 0) kept_old.push_back(r.record.path);
    }
    std::unordered_set<std::string> present;
    for (const Row& r : m_rows) present.insert(r.record.path);
    for (const Row& r : rows) {
        if (present.count(r.record.path) != 0) kept_new.push_back(r.record.path);
    }
    if (kept_old != kept_new || incoming.size() != rows.size()) {
        beginResetModel();
        m_rows = std::move(rows);
        endResetModel();
    } else {
        for (size_t i = m_rows.size(); i-- > 0;) {
            if (incoming.count(m_rows[i].record.path) != 0) continue;
            beginRemoveRows({}, static_cast<int>(i), static_cast<int>(i));
            m_rows.erase(m_rows.begin() + static_cast<std::ptrdiff_t>(i));
            endRemoveRows();
        }
        // The rows left are the new list's models that were there, in its order: walk it,
        // inserting the new ones where they go and updating the others in place.
        for (size_t i = 0; i < rows.size(); ++i) {
            if (i < m_rows.size() && m_rows[i].record.path == rows[i].record.path) {
                m_rows[i] = std::move(rows[i]);
                emit dataChanged(index(static_cast<int>(i)), index(static_cast<int>(i)));
            } else {
                beginInsertRows({}, static_cast<int>(i), static_cast<int>(i));
                m_rows.insert(m_rows.begin() + static_cast<std::ptrdiff_t>(i), std::move(rows[i]));
                endInsertRows();
            }
        }
    }
    if (m_rows.size() != before) emit countChanged();
}

void ModelListModel::setFits(const std::vector<PlanFit>& fits) {
    for (size_t i = 0; i < m_rows.size() && i < fits.size(); ++i) m_rows[i].fit = fits[i];
    if (!m_rows.empty()) emit dataChanged(index(0), index(rowCount() - 1), {FitsRole, FitRole, SuggestionRole});
}

void ModelListModel::setLoadedPath(const QString& path) {
    m_loaded = path;
    if (!m_rows.empty()) emit dataChanged(index(0), index(rowCount() - 1), {LoadedRole});
    setLoadError(path, {});  // it loaded: what went wrong before is over
}

void ModelListModel::setLoadError(const QString& path, const QString& message) {
    if (path.isEmpty() || m_loadErrors.value(path) == message) return;
    if (message.isEmpty()) {
        m_loadErrors.remove(path);
    } else {
        m_loadErrors.insert(path, message);
    }
    changedPath(path, LoadErrorRole);
}

void ModelListModel::changedPath(const QString& path, int role) {
    for (size_t i = 0; i < m_rows.size(); ++i) {
        if (QString::fromStdString(m_rows[i].record.path) != path) continue;
        emit dataChanged(index(static_cast<int>(i)), index(static_cast<int>(i)), {role});
    }
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
    // Stored first: refused, the mode stays as stored (the choice shows it again) and the
    // page's message says why.
    if (auto saved = m_store.set_setting("import_mode", mode.toStdString()); !saved) {
        emit importModeChanged();
        say(tr("The way to keep imported files could not be changed: %1")
                .arg(QString::fromStdString(saved.error().message)));
        return;
    }
    m_importMode = mode;
    emit importModeChanged();
}

void LibraryController::fail(const QString& message, bool fromScan) {
    setErrorText(message, fromScan);
    emit error(message);
}

void LibraryController::setErrorText(const QString& text, bool fromScan) {
    m_errorFromScan = !text.isEmpty() && fromScan;
    if (text == m_errorText) return;
    m_errorText = text;
    emit errorTextChanged();
}

void LibraryController::say(const QString& message) {
    m_message = message;
    emit messageChanged();
}

LibraryController::~LibraryController() {
    // Before any member goes: the worker may be scanning and posting to this object. After
    // the join nothing more is posted, and Qt drops the posts not yet run with this object.
    m_worker.reset();
}

powerhouse::catalog::LibraryPlaces LibraryController::places() const {
    powerhouse::catalog::LibraryPlaces places;
    places.library = m_library.toStdString();
    places.environment = m_environment;
    return places;
}

void LibraryController::enqueue(LibraryWorker::Task task, bool scan, bool coalesce) {
    if (!m_worker) {
        // The listing comes back to the GUI thread as a queued call, run only while this
        // object lives.
        m_worker = std::make_unique<LibraryWorker>(
            m_store.path(), m_store.busy_timeout_ms(), [this](LibraryWorker::Listing listing) {
                QMetaObject::invokeMethod(
                    this, [this, listing = std::move(listing)] { show(listing); }, Qt::QueuedConnection);
            });
    }
    if (!m_worker->enqueue(std::move(task), scan, coalesce)) return;  // the scan waiting answers for it
    if (scan && m_scans++ == 0) emit scanningChanged();
}

void LibraryController::rescan() {
    // The same refresh as `powerhouse-cli list`, so both list the same models.
    enqueue(
        [places = places()](powerhouse::store::Store& store, const std::function<bool()>& cancelled) mutable {
            places.cancelled = cancelled;
            LibraryWorker::Outcome outcome;
            auto library = powerhouse::catalog::refresh_library(store, places);
            if (!library) {
                outcome.error = library.error().message;
            } else {
                outcome.library = std::move(library).value();
            }
            return outcome;
        },
        true, true);
}

void LibraryController::show(const LibraryWorker::Listing& listing) {
    if (listing.library) {
        const powerhouse::catalog::Library& library = *listing.library;
        std::vector<ModelListModel::Row> rows;
        for (size_t i = 0; i < library.models.size(); ++i) {
            ModelListModel::Row row = rowOf(library.models[i]);
            if (i < listing.shapes.size()) row.shape = listing.shapes[i];
            rows.push_back(std::move(row));
        }
        m_models.setRows(std::move(rows));
        refit();
        // The models a card may offer as its draft: every usable one that writes text (not an
        // embedding model; draftChoices leaves out the card's own). A change of usability
        // keeps the row count, so compare the list.
        QVariantList candidates;
        for (const ModelListModel::Row& row : m_models.rows()) {
            if (!row.record.ok || (row.shape && row.shape->embedding_only)) continue;
            candidates.append(QVariantMap{{QStringLiteral("path"), QString::fromStdString(row.record.path)},
                                          {QStringLiteral("name"), row.name}});
        }
        if (candidates != m_draftCandidates) {
            m_draftCandidates = std::move(candidates);
            ++m_draftChoicesRevision;
            emit draftChoicesChanged();
        }
        if (listing.scan) {
            QStringList notes;
            for (const std::string& note : library.notes) notes << QString::fromStdString(note);
            if (notes != m_scanNotes) {
                m_scanNotes = notes;
                emit scanNotesChanged();
            }
        }
    }
    if (!listing.error.empty()) {
        const QString why = QString::fromStdString(listing.error);
        if (listing.scan) {
            fail(tr("The library could not be refreshed, so the models listed may be out of date: %1").arg(why), true);
        } else {
            fail(why);
        }
    } else if (listing.scan && listing.library && m_errorFromScan) {
        setErrorText({}, false);  // refreshed after all: the list is the library's again
    }
    if (listing.says) say(listing.said.join(QLatin1Char('\n')));
    if (listing.scan) {
        if (--m_scans == 0) emit scanningChanged();
        emit scanFinished();
    }
}

void LibraryController::refit() {
    // Plans only: the shapes were read with the listing, on the worker.
    std::vector<PlanFit> fits;
    for (const ModelListModel::Row& row : m_models.rows()) {
        if (!row.record.ok) {
            fits.push_back({});
            continue;
        }
        fits.push_back(row.shape ? m_settings.fitFor(*row.shape)
                                 : PlanFit{false, tr("The file can no longer be read."), {}, {}});
    }
    m_models.setFits(fits);
}

int LibraryController::importUrls(const QList<QUrl>& urls) {
    // What each dropped thing is, decided here; local files and folders are imported on the
    // worker, which writes their lines of the outcome in the order dropped.
    struct Item {
        QString said;      // decided here
        std::string path;  // else: a local file or folder to import
        bool folder = false;
    };
    std::vector<Item> items;
    int accepted = 0;
    for (const QUrl& url : urls) {
        if (url.scheme() == QLatin1String("http") || url.scheme() == QLatin1String("https")) {
            emit downloadRequested(url);
            items.push_back({tr("Downloading %1").arg(url.fileName().isEmpty() ? url.toString() : url.fileName()), {}});
            ++accepted;
            continue;
        }
        if (!url.isLocalFile()) {
            items.push_back({tr("%1 is neither a model file nor a web address.").arg(url.toString()), {}});
            continue;
        }
        const QFileInfo file(url.toLocalFile());
        Item item{{}, url.toLocalFile().toStdString(), file.isDir()};
        // What import_model takes: a file named .gguf (it says why anything else is not).
        if (item.folder || (file.isFile() && file.suffix().compare(QLatin1String("gguf"), Qt::CaseInsensitive) == 0)) {
            ++accepted;
        }
        items.push_back(std::move(item));
    }
    const auto mode = m_importMode == QLatin1String("copy")   ? powerhouse::catalog::ImportMode::copy
                      : m_importMode == QLatin1String("move") ? powerhouse::catalog::ImportMode::move
                                                              : powerhouse::catalog::ImportMode::in_place;
    enqueue(
        [items = std::move(items), mode, library = m_library.toStdString()](powerhouse::store::Store& store,
                                                                            const std::function<bool()>&) {
            LibraryWorker::Outcome outcome;
            outcome.says = true;
            for (const Item& item : items) {
                if (item.path.empty()) {
                    outcome.said << item.said;
                    continue;
                }
                const QString path = QString::fromStdString(item.path);
                if (item.folder) {
                    // A folder: add it to the library's folders and scan it.
                    // Not kept, its models would vanish at the next refresh: not scanned either.
                    if (auto added = store.add_model_folder(item.path); !added) {
                        outcome.said << tr("The folder %1 could not be added: %2")
                                            .arg(path, QString::fromStdString(added.error().message));
                        continue;
                    }
                    auto report = powerhouse::catalog::scan_folder(store, item.path);
                    if (!report) {
                        outcome.said << QString::fromStdString(report.error().message);
                        continue;
                    }
                    outcome.said << tr("Added the folder %1: %2 models")
                                        .arg(path)
                                        .arg(report->added + report->updated + report->unchanged);
                    continue;
                }
                auto record = powerhouse::catalog::import_model(store, item.path, mode, library);
                if (!record) {
                    outcome.said << QString::fromStdString(record.error().message);
                    continue;
                }
                const QString name = QFileInfo(QString::fromStdString(record->path)).fileName();
                outcome.said << (record->ok ? tr("Added %1").arg(name)
                                            : tr("Added %1, but it cannot be used: %2")
                                                  .arg(name, QString::fromStdString(record->problem)));
            }
            return outcome;
        },
        false);
    return accepted;
}

void LibraryController::load(const QString& path) { emit loadRequested(path); }

QString LibraryController::chatTemplateFile(const QString& path) const {
    const auto chosen = model_chat_template(m_store, path);
    // Unreadable: shown as the model's own; the load says what is wrong with the store.
    if (!chosen || !*chosen) return {};
    const QString file = (*chosen)->file;
    return file.isEmpty() ? tr("a file") : file;
}

bool LibraryController::setChatTemplateFile(const QString& path, const QUrl& file) {
    const QString local = file.isLocalFile() ? file.toLocalFile() : file.toString();
    if (auto kept = set_model_chat_template(m_store, path, local); !kept) {
        fail(tr("The chat template was not kept: %1").arg(QString::fromStdString(kept.error().message)));
        return false;
    }
    ++m_chatTemplatesRevision;
    emit chatTemplatesChanged();
    return true;
}

bool LibraryController::useOwnChatTemplate(const QString& path) {
    if (auto cleared = clear_model_chat_template(m_store, path); !cleared) {
        fail(tr("The model's own chat template could not be chosen again: %1")
                 .arg(QString::fromStdString(cleared.error().message)));
        return false;
    }
    ++m_chatTemplatesRevision;
    emit chatTemplatesChanged();
    return true;
}

QString LibraryController::draftModel(const QString& path) const {
    const auto chosen = model_draft_model(m_store, path);
    return chosen ? *chosen : QString();  // unreadable: the load says what is wrong with the store
}

QVariantList LibraryController::draftChoices(const QString& path) const {
    QVariantList choices;
    for (const ModelListModel::Row& row : m_models.rows()) {
        const QString candidate = QString::fromStdString(row.record.path);
        if (!row.record.ok || (row.shape && row.shape->embedding_only) || candidate == path) continue;
        choices.append(QVariantMap{{QStringLiteral("path"), candidate}, {QStringLiteral("name"), row.name}});
    }
    return choices;
}

bool LibraryController::setDraftModel(const QString& path, const QString& draft) {
    if (auto kept = set_model_draft_model(m_store, path, draft); !kept) {
        fail(tr("The draft model was not kept: %1").arg(QString::fromStdString(kept.error().message)));
        return false;
    }
    ++m_draftModelsRevision;
    emit draftModelsChanged();
    return true;
}

void LibraryController::addDownloaded(const QString& path, const QString& verifiedSha256) {
    enqueue(
        [places = places(), path = path.toStdString(), sha256 = verifiedSha256.toStdString()](
            powerhouse::store::Store& store, const std::function<bool()>& cancelled) mutable {
            LibraryWorker::Outcome outcome;
            // Downloaded again after being forgotten: shown again. Refused, it stays hidden,
            // which the page says.
            if (auto shown = store.unhide_model(path); !shown) {
                outcome.says = true;
                outcome.said << tr("%1 was downloaded, but it stays hidden in the library, where it was forgotten "
                                   "before: %2")
                                    .arg(QString::fromStdString(std::filesystem::path(path).filename().string()),
                                         QString::fromStdString(shown.error().message));
            }
            places.cancelled = cancelled;
            auto scanned = powerhouse::catalog::refresh_library(store, places);
            if (!scanned) {
                outcome.error = scanned.error().message;
                return outcome;
            }
            auto record = store.model_by_path(path);
            if (record && *record) {
                powerhouse::store::ModelRecord r = **record;
                r.source = "downloaded";
                if (!sha256.empty()) r.sha256 = sha256;
                if (auto saved = store.put_model(r); !saved) {
                    outcome.error = saved.error().message;
                    return outcome;
                }
            }
            auto library = powerhouse::catalog::list_library(store);
            if (!library) {
                outcome.error = library.error().message;
                return outcome;
            }
            library->notes = std::move(scanned->notes);
            outcome.library = std::move(library).value();
            return outcome;
        },
        true);
}

void LibraryController::forget(const QString& path) {
    m_models.setLoadError(path, {});  // imported again later, it starts afresh
    enqueue(
        [path = path.toStdString()](powerhouse::store::Store& store, const std::function<bool()>&) {
            LibraryWorker::Outcome outcome;
            if (auto removed = powerhouse::catalog::forget_model(store, path); !removed) {
                outcome.error = tr("%1 could not be forgotten: %2")
                                    .arg(QString::fromStdString(std::filesystem::path(path).filename().string()),
                                         QString::fromStdString(removed.error().message))
                                    .toStdString();
            }
            return outcome;
        },
        false);
}
