#include "welcome_controller.h"

#include <QFileInfo>
#include <QUrl>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <filesystem>
#include <optional>

#include "catalog/catalog.h"
#include "download_controller.h"
#include "powerhouse/model.h"
#include "library/hf_url.h"
#include "settings_controller.h"

using powerhouse::catalog::SuggestedPlacement;
using powerhouse::catalog::Suggestion;

namespace {

QString gib(uint64_t bytes) {
    const double g = static_cast<double>(bytes) / (1ull << 30);
    return QStringLiteral("%1 GiB").arg(g, 0, 'f', g < 10 ? 1 : 0);
}

SuggestionListModel::Placement placement(SuggestedPlacement p) {
    switch (p) {
        case SuggestedPlacement::gpu: return SuggestionListModel::Placement::Gpu;
        case SuggestedPlacement::split: return SuggestionListModel::Placement::Split;
        case SuggestedPlacement::gpu_and_ram: return SuggestionListModel::Placement::GpuAndRam;
        case SuggestedPlacement::cpu: return SuggestionListModel::Placement::Cpu;
        case SuggestedPlacement::does_not_fit: break;
    }
    return SuggestionListModel::Placement::DoesNotFit;
}

}  // namespace

int SuggestionListModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

QVariant SuggestionListModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount()) return {};
    const Suggestion& s = m_rows[static_cast<size_t>(index.row())];
    switch (role) {
        case NameRole: return QString::fromStdString(s.model.name);
        case SummaryRole: return QString::fromStdString(s.model.summary);
        case RepoRole: return QString::fromStdString(s.model.repo);
        case QuantizationRole: return QString::fromStdString(s.model.quantization);
        case SizeRole: return gib(s.size_bytes);
        case WhereRole: return QString::fromStdString(s.where);
        case PlacementRole: return QVariant::fromValue(placement(s.placement));
        case TokensPerSecondRole: return s.tokens_per_second;
        case RecommendedRole: return s.recommended;
        case DownloadRole: return QVariant::fromValue(m_downloads[static_cast<size_t>(index.row())]);
        default: return {};
    }
}

QHash<int, QByteArray> SuggestionListModel::roleNames() const {
    return {{NameRole, "name"},
            {SummaryRole, "summary"},
            {RepoRole, "repo"},
            {QuantizationRole, "quantization"},
            {SizeRole, "size"},
            {WhereRole, "where"},
            {PlacementRole, "placement"},
            {TokensPerSecondRole, "tokensPerSecond"},
            {RecommendedRole, "recommended"},
            {DownloadRole, "download"}};
}

void SuggestionListModel::setRows(std::vector<Suggestion> rows) {
    // A download in progress keeps its state across a re-plan (same list, same order).
    std::vector<Download> downloads(rows.size(), Download::Available);
    for (size_t i = 0; i < rows.size() && i < m_rows.size(); ++i) {
        if (rows[i].model.repo == m_rows[i].model.repo && rows[i].model.name == m_rows[i].model.name) {
            downloads[i] = m_downloads[i];
        }
    }
    const bool count = rows.size() != m_rows.size();
    beginResetModel();
    m_rows = std::move(rows);
    m_downloads = std::move(downloads);
    endResetModel();
    if (count) emit countChanged();
}

void SuggestionListModel::setDownload(int row, Download state) {
    if (row < 0 || row >= rowCount()) return;
    m_downloads[static_cast<size_t>(row)] = state;
    emit dataChanged(index(row), index(row), {DownloadRole});
}

WelcomeController::WelcomeController(SettingsController& settings, DownloadController& downloads, QString endpoint,
                                     QObject* parent)
    : QObject(parent), m_settings(settings), m_downloads(downloads), m_endpoint(std::move(endpoint)) {
    auto list = powerhouse::catalog::parse_suggested_models(powerhouse::catalog::builtin_suggested_models_json());
    if (list) m_models = std::move(*list);  // the shipped list is checked by the catalog's tests
    const std::filesystem::path starter = powerhouse::setup_model_path();
    std::error_code ec;
    if (!starter.empty() && std::filesystem::is_regular_file(starter, ec)) {
        m_starterPath = QString::fromStdString(starter.string());
    }
    connect(&m_settings, &SettingsController::changed, this, &WelcomeController::refresh);
    connect(&m_settings, &SettingsController::applied, this, &WelcomeController::refresh);
}

QString WelcomeController::starterName() const {
    if (m_starterPath.isEmpty() || !m_starterName.isEmpty()) return m_starterName;
    auto info = powerhouse::inspect_model(m_starterPath.toStdString());
    m_starterName = info ? QString::fromStdString(powerhouse::catalog::model_display_name(*info))
                         : QFileInfo(m_starterPath).completeBaseName();
    return m_starterName;
}

void WelcomeController::setActive(bool active) {
    if (active == m_active) return;
    m_active = active;
    emit activeChanged();
    if (m_active && m_stale) refresh();
}

WelcomeController::~WelcomeController() {
    if (m_worker.joinable()) m_worker.join();
}

void WelcomeController::setModels(std::vector<powerhouse::catalog::SuggestedModel> models) {
    if (m_worker.joinable()) m_worker.join();
    m_models = std::move(models);
    m_shapes.reset();
    ++m_list;
    m_planning = false;  // the joined plan's result is dropped when it arrives
    refresh();
}

void WelcomeController::refresh() {
    if (!m_active) {
        m_stale = true;
        return;
    }
    m_stale = false;
    if (m_worker.joinable() && m_planning) {
        m_again = true;
        return;
    }
    if (m_worker.joinable()) m_worker.join();
    SettingsController::PlanInputs in = m_settings.planInputs(m_settings.contextLength(), true);
    std::vector<powerhouse::DeviceDesc> gpus;
    powerhouse::PlanOptions options = in.options;
    // The suggestions are planned on the GPUs in use, as the model would be loaded.
    for (size_t k = 0; k < options.use.size(); ++k) gpus.push_back(in.devices[options.use[k]]);
    for (size_t k = 0; k < options.use.size(); ++k) options.use[k] = static_cast<uint32_t>(k);
    const auto main = std::find(in.options.use.begin(), in.options.use.end(), in.options.main_device);
    options.main_device = main == in.options.use.end() ? 0 : static_cast<uint32_t>(main - in.options.use.begin());

    QStringList lines;
    for (const powerhouse::DeviceDesc& d : in.devices) {
        lines << tr("%1 · %2").arg(QString::fromStdString(d.name), gib(d.total_bytes));
    }
    std::optional<powerhouse::DeviceDesc> cpu;
    if (auto ram = powerhouse::cpu_devices("cpu"); ram && !ram->empty()) cpu = ram->front();
    const QString memory = cpu ? tr("%1 of RAM free").arg(gib(cpu->free_bytes)) : tr("The RAM could not be read.");
    if (lines != m_gpus || memory != m_memory) {
        m_gpus = lines;
        m_memory = memory;
        emit machineChanged();
    }
    m_planning = true;
    emit planningChanged();
    m_worker = std::thread([this, list = m_list, models = m_models, shapes = m_shapes, gpus = std::move(gpus), cpu,
                            options]() mutable {
        if (!shapes) {
            shapes = std::make_shared<const std::vector<powerhouse::Result<powerhouse::ModelShape>>>(
                powerhouse::catalog::suggested_model_shapes(models));
        }
        std::vector<Suggestion> rows = powerhouse::catalog::suggest_models(models, *shapes, gpus, cpu, options);
#if defined(__GLIBC__)
        // Laying out the vocabularies freed tens of MB in this thread's malloc arena, which
        // glibc keeps resident unless asked to give it back.
        malloc_trim(0);
#endif
        QMetaObject::invokeMethod(
            this, [this, list, rows = std::move(rows), shapes]() mutable { applyPlan(list, std::move(rows), shapes); },
            Qt::QueuedConnection);
    });
}

void WelcomeController::applyPlan(quint64 list, std::vector<Suggestion> rows,
                                  std::shared_ptr<const std::vector<powerhouse::Result<powerhouse::ModelShape>>> shapes) {
    if (list != m_list) return;  // planned for a list that was replaced since
    m_shapes = std::move(shapes);
    m_suggestions.setRows(std::move(rows));
    m_planning = false;
    if (m_again) {
        m_again = false;
        refresh();
        return;
    }
    emit planningChanged();
}

void WelcomeController::download(int row) {
    const auto& rows = m_suggestions.rows();
    if (row < 0 || row >= static_cast<int>(rows.size())) return;
    for (const Pending& p : m_pending) {
        if (p.row == row) return;  // already on its way
    }
    const powerhouse::catalog::SuggestedModel& model = rows[static_cast<size_t>(row)].model;
    const auto slash = model.repo.find('/');
    powerhouse::library::HfRepo repo{model.repo.substr(0, slash), model.repo.substr(slash + 1), "main"};
    Pending pending;
    pending.row = row;
    for (const powerhouse::catalog::SuggestedFile& f : model.files) {
        const QString name = QFileInfo(QString::fromStdString(f.path)).fileName();
        pending.waiting.insert(name);
        if (pending.firstName.isEmpty()) pending.firstName = name;
        const std::string url = powerhouse::library::hf_file_url(repo, f.path, m_endpoint.toStdString());
        // With the list's sha256 when it has one; else the one the Hub sends with the file.
        m_downloads.add(QUrl(QString::fromStdString(url)), f.sha256);
    }
    m_pending.push_back(std::move(pending));
    m_suggestions.setDownload(row, SuggestionListModel::Download::Downloading);
    say(tr("Downloading %1 (%2) into the library; it loads when it is there.")
            .arg(QString::fromStdString(model.name), m_suggestions.data(m_suggestions.index(row), SuggestionListModel::SizeRole).toString()));
}

void WelcomeController::loadStarter() {
    if (!m_starterPath.isEmpty()) emit loadRequested(m_starterPath);
}

void WelcomeController::downloadFinished(const QString& path) {
    const QString name = QFileInfo(path).fileName();
    for (auto it = m_pending.begin(); it != m_pending.end(); ++it) {
        if (!it->waiting.remove(name)) continue;
        if (name == it->firstName) it->first = path;
        if (!it->waiting.isEmpty()) return;
        const QString first = it->first;
        m_suggestions.setDownload(it->row, SuggestionListModel::Download::Loaded);
        m_pending.erase(it);
        say(tr("Downloaded; loading it."));
        emit loadRequested(first);
        return;
    }
}

void WelcomeController::say(const QString& message) {
    if (message == m_message) return;
    m_message = message;
    emit messageChanged();
}
