#include "hub_controller.h"

#include <QMetaObject>
#include <QStringList>

#include <algorithm>

namespace lib = powerhouse::library;

namespace {

QString sizeText(double bytes) {
    if (bytes >= 1024.0 * 1024 * 1024) return QString::number(bytes / (1024.0 * 1024 * 1024), 'f', 2) + " GiB";
    return QString::number(bytes / (1024.0 * 1024), 'f', 0) + " MiB";
}

// What the CPU path keeps free, as the settings' plan for the CPU does.
constexpr uint64_t kCpuReserve = 256ull << 20;

}  // namespace

// --- HubSearchModel ---------------------------------------------------------------------

int HubSearchModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

QVariant HubSearchModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const lib::HfModelSummary& r = m_rows[static_cast<size_t>(index.row())];
    switch (role) {
        case Qt::DisplayRole:
        case RepoIdRole: return QString::fromStdString(r.id);
        // Counts beyond 2^31 do not occur, but a double never wraps.
        case DownloadsRole: return static_cast<double>(r.downloads);
        case LikesRole: return static_cast<double>(r.likes);
        case UpdatedRole: return QString::fromStdString(r.updated_date());
        case GatedRole: return QString::fromStdString(r.gated);
        case PipelineTagRole: return QString::fromStdString(r.pipeline_tag);
        case TagsRole: {
            QStringList tags;
            for (const std::string& t : r.tags) tags << QString::fromStdString(t);
            return tags;
        }
        default: return {};
    }
}

QHash<int, QByteArray> HubSearchModel::roleNames() const {
    return {{RepoIdRole, "repoId"}, {DownloadsRole, "downloads"},     {LikesRole, "likes"}, {UpdatedRole, "updated"},
            {GatedRole, "gated"},   {PipelineTagRole, "pipelineTag"}, {TagsRole, "tags"}};
}

void HubSearchModel::setRows(std::vector<lib::HfModelSummary> rows) {
    const bool countChanges = rows.size() != m_rows.size();
    beginResetModel();
    m_rows = std::move(rows);
    endResetModel();
    if (countChanges) emit countChanged();
}

// --- HubFilesModel ----------------------------------------------------------------------

int HubFilesModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

QString HubFilesModel::fileUrl(const lib::HfFile& file) const {
    return QString::fromStdString(lib::hf_file_url(m_repo, file.path, m_endpoint.toStdString()));
}

QVariant HubFilesModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const Row& r = m_rows[static_cast<size_t>(index.row())];
    const lib::GgufModel& m = r.model;
    switch (role) {
        case Qt::DisplayRole:
        case NameRole: return QString::fromStdString(m.name);
        case QuantizationRole: return QString::fromStdString(m.quantization);
        case SizeRole: return static_cast<double>(m.total_size);
        case SizeTextRole: return sizeText(static_cast<double>(m.total_size));
        case PartsRole: return m.expected_parts;
        case CompleteRole: return m.complete();
        case Sha256Role: return m.parts.empty() ? QString() : QString::fromStdString(m.parts.front().sha256);
        case FilesRole: {
            QVariantList out;
            for (const lib::HfFile& f : m.parts) {
                out.append(QVariantMap{{"path", QString::fromStdString(f.path)},
                                       {"size", static_cast<double>(f.size)},
                                       {"sha256", QString::fromStdString(f.sha256)},
                                       {"url", fileUrl(f)}});
            }
            return out;
        }
        case FitsRole: return r.fit.value("fits").toBool();
        case FitRole: return r.fit.value("text").toString();
        case EstimateRole: return r.shape == nullptr;
        case CheckingRole: return r.checking;
        default: return {};
    }
}

QHash<int, QByteArray> HubFilesModel::roleNames() const {
    return {{QuantizationRole, "quantization"},
            {NameRole, "name"},
            {SizeRole, "size"},
            {SizeTextRole, "sizeText"},
            {PartsRole, "parts"},
            {CompleteRole, "complete"},
            {Sha256Role, "sha256"},
            {FilesRole, "files"},
            {FitsRole, "fits"},
            {FitRole, "fit"},
            {EstimateRole, "estimate"},
            {CheckingRole, "checking"}};
}

void HubFilesModel::setRows(std::vector<Row> rows, lib::HfRepo repo, QString endpoint) {
    const bool countChanges = rows.size() != m_rows.size();
    beginResetModel();
    m_rows = std::move(rows);
    m_repo = std::move(repo);
    m_endpoint = std::move(endpoint);
    endResetModel();
    if (countChanges) emit countChanged();
}

void HubFilesModel::setFits(const std::vector<QVariantMap>& fits) {
    for (size_t i = 0; i < m_rows.size() && i < fits.size(); ++i) m_rows[i].fit = fits[i];
    if (!m_rows.empty()) emit dataChanged(index(0), index(rowCount() - 1), {FitsRole, FitRole, EstimateRole});
}

// --- HubController ----------------------------------------------------------------------

HubController::HubController(SettingsController& settings, QString endpoint, QObject* parent)
    : QObject(parent), m_settings(settings), m_endpoint(std::move(endpoint)) {
    // The estimate follows the GPUs chosen, their reserves and their free memory.
    connect(&m_settings, &SettingsController::changed, this, &HubController::refit);
    connect(&m_settings, &SettingsController::applied, this, &HubController::refit);
    connect(&m_settings, &SettingsController::previewChanged, this, &HubController::refit);
}

HubController::~HubController() {
    if (m_searchCancel) m_searchCancel->store(true);
    if (m_listCancel) m_listCancel->store(true);
    for (auto& [id, thread] : m_workers) {
        if (thread.joinable()) thread.join();
    }
}

void HubController::setRetryTiming(int maxAttempts, int backoffMs) {
    m_maxAttempts = maxAttempts;
    m_backoffMs = backoffMs;
}

void HubController::setState(std::function<void()> change) {
    change();
    emit stateChanged();
}

void HubController::runWorker(std::function<std::function<void()>()> work) {
    const uint64_t id = m_nextWorker++;
    m_workers[id] = std::thread([this, id, work = std::move(work)] {
        std::function<void()> done = work();
        // `this` outlives the thread (the destructor joins it); a queued call still pending
        // when it is destroyed is dropped by Qt.
        QMetaObject::invokeMethod(
            this,
            [this, id, done = std::move(done)] {
                if (auto w = m_workers.find(id); w != m_workers.end()) {
                    if (w->second.joinable()) w->second.join();
                    m_workers.erase(w);
                }
                done();
            },
            Qt::QueuedConnection);
    });
}

void HubController::search(const QString& text, int limit) {
    const QString query = text.trimmed();
    if (m_searchCancel) m_searchCancel->store(true);  // superseded
    const uint64_t ticket = ++m_searchTicket;
    if (query.isEmpty()) {
        m_results.setRows({});
        setState([this] {
            m_query.clear();
            m_searching = false;
            m_more = false;
            m_error.clear();
            m_message.clear();
        });
        return;
    }
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    m_searchCancel = cancel;
    setState([this, query] {
        m_query = query;
        m_searching = true;
        m_error.clear();
        m_message.clear();
    });
    lib::DownloadOptions options = requestOptions();
    runWorker([this, ticket, query, limit, options, endpoint = m_endpoint.toStdString(), cancel]() mutable {
        options.cancel = cancel.get();  // the flag lives as long as this lambda
        auto found = std::make_shared<powerhouse::Result<lib::HfSearchResult>>(
            lib::search_hf_models(query.toStdString(), limit, endpoint, options));
        return std::function<void()>([this, ticket, query, found] {
            if (ticket != m_searchTicket) return;  // a newer search asked since: not this answer
            if (!*found) {
                m_results.setRows({});
                setState([this, found] {
                    m_searching = false;
                    m_more = false;
                    m_error = QString::fromStdString(found->error().message);
                });
                return;
            }
            const bool none = (*found)->models.empty();
            const bool more = (*found)->more;
            m_results.setRows(std::move((*found)->models));
            setState([this, none, more, query] {
                m_searching = false;
                m_more = more;
                m_message = none ? tr("No GGUF model on Hugging Face matches “%1”.").arg(query) : QString();
            });
        });
    });
}

lib::DownloadOptions HubController::requestOptions() const {
    lib::DownloadOptions options;
    // Every request here goes to the endpoint's host; libcurl keeps the token from others.
    options.bearer_token = m_token.toStdString();
    options.max_attempts = m_maxAttempts;
    options.initial_backoff = std::chrono::milliseconds(m_backoffMs);
    options.max_backoff = std::chrono::milliseconds(m_backoffMs * 4);
    options.connect_timeout_seconds = 15;
    return options;
}

void HubController::showFiles(const QString& repoId) {
    if (m_listCancel) m_listCancel->store(true);  // superseded
    const uint64_t ticket = ++m_listTicket;
    m_files.setRows({}, {}, m_endpoint);
    const auto repo = lib::parse_hf_repo_id(repoId.trimmed().toStdString());
    if (!repo) {
        setState([this, repoId] {
            m_repository.clear();
            m_listing = false;
            m_error = tr("“%1” is not a Hugging Face repository (owner/name).").arg(repoId);
        });
        return;
    }
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    m_listCancel = cancel;
    setState([this, repoId] {
        m_repository = repoId.trimmed();
        m_listing = true;
        m_error.clear();
        m_message.clear();
    });
    lib::DownloadOptions options = requestOptions();
    runWorker([this, ticket, repo = *repo, options, endpoint = m_endpoint.toStdString(), cancel]() mutable {
        options.cancel = cancel.get();
        auto listed = std::make_shared<powerhouse::Result<std::vector<lib::HfFile>>>(
            lib::list_hf_gguf_files(repo, endpoint, options));
        return std::function<void()>([this, ticket, repo, listed] {
            if (ticket != m_listTicket) return;  // another repository asked for since
            if (!*listed) {
                setState([this, listed, repo] {
                    m_listing = false;
                    m_error = QString::fromStdString(lib::explain_hf_refusal(listed->error(),
                                                                             repo.org + "/" + repo.repo,
                                                                             !m_token.isEmpty(), lib::HubClient::app,
                                                                             m_endpoint.toStdString())
                                                         .message);
                });
                return;
            }
            std::vector<HubFilesModel::Row> rows;
            for (lib::QuantizationGroup& group : lib::group_gguf_models(**listed)) {
                for (lib::GgufModel& model : group.models) {
                    HubFilesModel::Row row{std::move(model), {}, nullptr, {}, false};
                    if (auto known = m_shapes.find(shapeKey(repo, row.model)); known != m_shapes.end()) {
                        row.shape = known->second;
                    }
                    rows.push_back(std::move(row));
                }
            }
            const bool none = rows.empty();
            m_files.setRows(std::move(rows), repo, m_endpoint);
            refit();
            setState([this, none] {
                m_listing = false;
                m_message = none ? tr("%1 has no GGUF files: Powerhouse runs GGUF models (look for a repository "
                                      "named …-GGUF).")
                                       .arg(m_repository)
                                 : gatedMessage();
            });
        });
    });
}

bool HubController::download(const QString& repoId, int model) {
    const auto& rows = m_files.rows();
    if (repoId.trimmed() != m_repository || m_listing || model < 0 || model >= static_cast<int>(rows.size())) {
        setState([this, repoId] { m_error = tr("%1 is not the repository listed.").arg(repoId); });
        return false;
    }
    const lib::GgufModel& chosen = rows[static_cast<size_t>(model)].model;
    if (!chosen.complete()) {
        setState([this, &chosen] {
            m_error = tr("%1 is missing parts: %2 of %3 are in the repository.")
                          .arg(QString::fromStdString(chosen.name))
                          .arg(chosen.parts.size())
                          .arg(chosen.expected_parts);
        });
        return false;
    }
    // Each part with the hash the listing gives for it, so the download is verified.
    for (const lib::HfFile& part : chosen.parts) {
        emit downloadRequested(QUrl(m_files.fileUrl(part)), QString::fromStdString(part.sha256));
    }
    return true;
}

void HubController::setDevices(const powerhouse::TelemetrySnapshot& snapshot) {
    std::vector<Gpu> gpus;
    for (size_t i = 0; i < snapshot.gpus.size(); ++i) {
        const powerhouse::GpuInfo& info = snapshot.gpus[i];
        const powerhouse::GpuSample* s = i < snapshot.latest.size() ? &snapshot.latest[i] : nullptr;
        uint64_t free = s != nullptr && s->memory_free ? *s->memory_free : info.memory_total;
        // What this process holds is the loaded model's, freed when another is loaded.
        if (s != nullptr && s->process_memory) free = std::min(info.memory_total, free + *s->process_memory);
        gpus.push_back({info.uuid, info.name, free});
    }
    m_gpus = std::move(gpus);
    refit();
}

QVariantMap HubController::estimateFit(uint64_t bytes, const std::vector<powerhouse::DeviceDesc>& gpus,
                                       uint64_t cpuAvailable) {
    // A tenth of the weights' size on top for the KV cache and activations of a modest
    // context: an estimate, as the text says.
    const uint64_t needed = bytes + bytes / 10;
    const QString weights = sizeText(static_cast<double>(bytes));
    if (gpus.empty()) {
        const bool fits = needed <= cpuAvailable;
        const QString text =
            fits ? tr("Estimate from the file size: %1 of weights, %2 of system memory available (no GPU chosen); "
                      "the context's cache comes on top")
                 : tr("Estimate from the file size: %1 of weights, more than the %2 of system memory available "
                      "(no GPU chosen)");
        return {{"fits", fits}, {"text", text.arg(weights, sizeText(static_cast<double>(cpuAvailable)))}};
    }
    uint64_t free = 0;
    for (const powerhouse::DeviceDesc& d : gpus) free += d.free_bytes;
    const bool fits = needed <= free;
    const QString where = gpus.size() == 1 ? tr("1 GPU") : tr("%1 GPUs").arg(gpus.size());
    const QString text =
        fits ? tr("Estimate from the file size: %1 of weights, %2 free on %3; the context's cache comes on top")
             : tr("Estimate from the file size: %1 of weights, more than the %2 free on %3");
    return {{"fits", fits}, {"text", text.arg(weights, sizeText(static_cast<double>(free)), where)}};
}

void HubController::refit() {
    if (m_files.rows().empty()) return;
    // The GPUs chosen in Settings, each with its reserve taken off its free memory.
    std::vector<powerhouse::DeviceDesc> gpus;
    for (const QVariant& v : m_settings.gpus()) {
        const QVariantMap g = v.toMap();
        if (!g.value("use").toBool()) continue;
        const std::string uuid = g.value("uuid").toString().toStdString();
        powerhouse::DeviceDesc d;
        d.name = g.value("name").toString().toStdString();
        d.uuid = uuid;
        d.total_bytes = static_cast<uint64_t>(g.value("totalGiB").toDouble() * double(1ull << 30));
        d.free_bytes = d.total_bytes;  // until the monitor has said
        for (const Gpu& seen : m_gpus) {
            if (seen.uuid == uuid) d.free_bytes = seen.free;
        }
        const uint64_t reserve = static_cast<uint64_t>(std::max(0, g.value("reserveMiB").toInt())) << 20;
        d.free_bytes = d.free_bytes > reserve ? d.free_bytes - reserve : 0;
        gpus.push_back(d);
    }
    uint64_t cpu = 0;
    if (gpus.empty()) {
        if (auto devices = powerhouse::cpu_devices("cpu"); devices && !devices->empty()) {
            cpu = devices->front().free_bytes > kCpuReserve ? devices->front().free_bytes - kCpuReserve : 0;
        }
    }
    std::vector<QVariantMap> fits;
    for (const HubFilesModel::Row& row : m_files.rows()) {
        if (row.shape) {
            // The Models page's answer for the same file on disk.
            fits.push_back(m_settings.fitFor(*row.shape));
            continue;
        }
        QVariantMap fit = estimateFit(row.model.total_size, gpus, cpu);
        if (!row.note.isEmpty()) fit["text"] = fit["text"].toString() + QStringLiteral(" (") + row.note + ')';
        fits.push_back(fit);
    }
    m_files.setFits(fits);
}

void HubController::setHeaderLimits(uint64_t firstBytes, uint64_t maxBytes) {
    m_headerLimits.first_bytes = firstBytes;
    m_headerLimits.max_bytes = maxBytes;
}

std::string HubController::shapeKey(const lib::HfRepo& repo, const lib::GgufModel& model) const {
    std::string key;
    for (const lib::HfFile& part : model.parts) {
        key += lib::hf_file_url(repo, part.path, m_endpoint.toStdString()) + '\n';
    }
    return key;
}

QString HubController::gatedMessage() const {
    if (!m_token.isEmpty()) return {};
    for (const lib::HfModelSummary& r : m_results.rows()) {
        if (QString::fromStdString(r.id) == m_repository && !r.gated.empty()) {
            return QString::fromStdString(
                lib::hf_access_message(r.id, std::nullopt, false, lib::HubClient::app, m_endpoint.toStdString()));
        }
    }
    return {};
}

void HubController::checkFit(int model) {
    HubFilesModel::Row* row = m_files.row(model);
    if (row == nullptr || row->checking || row->shape || !row->model.complete()) return;
    const std::string key = shapeKey(m_files.repo(), row->model);
    if (auto known = m_shapes.find(key); known != m_shapes.end()) {
        row->shape = known->second;
        refit();
        return;
    }
    std::vector<lib::RemoteGgufFile> files;
    for (const lib::HfFile& part : row->model.parts) files.push_back({m_files.fileUrl(part).toStdString(), part.path, part.size});
    row->checking = true;
    row->note.clear();
    m_files.rowChanged(model);
    lib::DownloadOptions options = requestOptions();
    auto cancel = m_listCancel;  // a new listing stops it
    const std::string repoId = m_repository.toStdString();
    runWorker([this, key, files, options, limits = m_headerLimits, cancel, repoId]() mutable {
        if (cancel) options.cancel = cancel.get();
        auto read = std::make_shared<powerhouse::Result<lib::RemoteShape>>(
            lib::read_remote_model_shape(files, options, limits));
        return std::function<void()>([this, key, read, repoId, tokenSent = !options.bearer_token.empty()] {
            std::shared_ptr<const powerhouse::ModelShape> shape;
            QString note;
            if (*read) {
                shape = std::make_shared<const powerhouse::ModelShape>(std::move((*read)->shape));
                m_shapes[key] = shape;
            } else if (read->error().code == powerhouse::ErrorCode::cancelled) {
                note = tr("not read: cancelled");
            } else {
                const powerhouse::Error why = lib::explain_hf_refusal(read->error(), repoId, tokenSent,
                                                                     lib::HubClient::app, m_endpoint.toStdString());
                note = tr("the header was not read: %1").arg(QString::fromStdString(why.message));
            }
            // The rows may have been listed anew meanwhile: the row of this file, if still there.
            for (int i = 0; i < m_files.rowCount(); ++i) {
                HubFilesModel::Row* r = m_files.row(i);
                if (shapeKey(m_files.repo(), r->model) != key) continue;
                r->checking = false;
                r->shape = shape;
                r->note = note;
                m_files.rowChanged(i);
            }
            refit();
        });
    });
}

void HubController::setToken(const QString& token) {
    const QString trimmed = token.trimmed();
    if (trimmed == m_token) return;
    m_token = trimmed;
    emit tokenStateChanged();
    emit tokenChanged(m_token);
    // A gated repository's words depend on it.
    if (!m_listing && !m_repository.isEmpty() && m_error.isEmpty()) setState([this] { m_message = gatedMessage(); });
}

void HubController::loadToken() {
    m_keys.readEntry(KeyStore::hubTokenEntry(), [this](const QString& key, bool found, const QString&) {
        if (found) setToken(key);
    });
}

void HubController::saveToken(const QString& token) {
    const QString trimmed = token.trimmed();
    if (trimmed.isEmpty()) {
        m_tokenError = tr("Paste a token first (huggingface.co → Settings → Access Tokens, a read token).");
        emit tokenStateChanged();
        return;
    }
    m_tokenBusy = true;
    m_tokenError.clear();
    emit tokenStateChanged();
    m_keys.writeEntry(KeyStore::hubTokenEntry(), trimmed, [this, trimmed](const QString& error) {
        m_tokenBusy = false;
        m_tokenError = error;
        if (error.isEmpty()) setToken(trimmed);  // kept only where the keyring took it
        emit tokenStateChanged();
    });
}

void HubController::clearToken() {
    m_tokenBusy = true;
    m_tokenError.clear();
    emit tokenStateChanged();
    m_keys.removeEntry(KeyStore::hubTokenEntry(), [this](const QString& error) {
        m_tokenBusy = false;
        m_tokenError = error;
        setToken({});  // not used from now on, whatever the keyring said
        emit tokenStateChanged();
    });
}
