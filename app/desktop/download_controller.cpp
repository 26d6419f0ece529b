#include "download_controller.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMetaObject>
#include <QStringList>
#include <QUrl>

#include <filesystem>
#include <optional>

#include "library/download.h"
#include "library/hf_search.h"
#include "library/hf_url.h"

namespace fs = std::filesystem;
namespace lib = powerhouse::library;

namespace {

QString bytesText(double bytes) {
    if (bytes >= 1024.0 * 1024 * 1024) return QString::number(bytes / (1024.0 * 1024 * 1024), 'f', 2) + " GiB";
    if (bytes >= 1024.0 * 1024) return QString::number(bytes / (1024.0 * 1024), 'f', 1) + " MiB";
    return QString::number(bytes / 1024.0, 'f', 0) + " KiB";
}

QString secondsText(double s) {
    if (s >= 3600) return QStringLiteral("%1 h %2 min").arg(static_cast<int>(s / 3600)).arg(static_cast<int>(s / 60) % 60);
    if (s >= 60) return QStringLiteral("%1 min %2 s").arg(static_cast<int>(s / 60)).arg(static_cast<int>(s) % 60);
    return QStringLiteral("%1 s").arg(static_cast<int>(s));
}

}  // namespace

struct DownloadController::Job {
    int id = 0;
    QString name, url, status;
    State state = State::Queued;
    double progress = -1;
    fs::path target;
    std::string sha256;
    std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
    bool cancelled_by_user = false;
    struct Option {
        QString label;
        uint64_t size = 0;
        std::vector<lib::HfFile> files;
    };
    std::vector<Option> options;
    lib::HfRepo repo;
};

// The queue the worker takes tasks from.
struct DownloadController::Shared {
    struct Task {
        int id = 0;
        bool list = false;  // list a repository (else download a file)
        std::string url;
        lib::HfRepo repo;
        fs::path target;
        std::string sha256;
        std::shared_ptr<std::atomic<bool>> cancel;
    };
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<Task> tasks;
    bool stop = false;
    lib::DownloadOptions options;  // retry timing (tests shorten it)
    std::string hub_token;         // for URLs on the Hub's host only
};

namespace {

// Whether `url` is on the Hub's own host (scheme, host and port), where the token may go.
bool onHub(const std::string& url, const QString& endpoint) {
    const QUrl a(QString::fromStdString(url));
    const QUrl b(endpoint);
    return a.scheme() == b.scheme() && a.host().compare(b.host(), Qt::CaseInsensitive) == 0 &&
           a.port(-1) == b.port(-1) && !a.host().isEmpty();
}

// "owner/name" of a Hub URL's path ("/owner/name/resolve/..."); "" when it has none.
std::string hubRepoId(const std::string& url) {
    const QStringList path = QUrl(QString::fromStdString(url)).path().split('/', Qt::SkipEmptyParts);
    return path.size() >= 2 ? (path[0] + '/' + path[1]).toStdString() : std::string();
}

}  // namespace

void DownloadController::setHubToken(const QString& token) {
    std::lock_guard lock(m_shared->mutex);
    m_shared->hub_token = token.trimmed().toStdString();
}

DownloadController::DownloadController(powerhouse::store::Store& store, QString libraryFolder, QString endpoint,
                                       QObject* parent)
    : QAbstractListModel(parent),
      m_store(store),
      m_library(std::move(libraryFolder)),
      m_endpoint(std::move(endpoint)),
      m_shared(std::make_shared<Shared>()) {
    // Unfinished downloads of the last run come back paused, their bytes kept.
    if (auto saved = m_store.setting("downloads"); saved && *saved) {
        const QJsonArray list = QJsonDocument::fromJson(QByteArray::fromStdString(**saved)).array();
        for (const QJsonValue& v : list) {
            const QJsonObject o = v.toObject();
            auto job = std::make_unique<Job>();
            job->id = m_nextId++;
            job->url = o.value("url").toString();
            job->target = o.value("target").toString().toStdString();
            job->sha256 = o.value("sha256").toString().toStdString();
            job->name = QString::fromStdString(job->target.filename().string());
            job->state = State::Paused;
            std::error_code ec;
            const auto kept = fs::file_size(lib::part_path(job->target), ec);
            job->status = ec ? tr("Paused") : tr("Paused, %1 kept").arg(bytesText(static_cast<double>(kept)));
            if (job->url.isEmpty() || job->target.empty()) continue;
            m_jobs.push_back(std::move(job));
        }
    }
    m_worker = std::thread([this] { work(); });
}

DownloadController::~DownloadController() {
    {
        std::lock_guard lock(m_shared->mutex);
        m_shared->stop = true;
        m_shared->tasks.clear();
    }
    for (auto& job : m_jobs) job->cancel->store(true);  // the .part files stay for the next start
    m_shared->wake.notify_all();
    if (m_worker.joinable()) m_worker.join();
}

void DownloadController::setRetryTiming(int maxAttempts, int backoffMs, long stallSeconds) {
    std::lock_guard lock(m_shared->mutex);
    m_shared->options.max_attempts = maxAttempts;
    m_shared->options.initial_backoff = std::chrono::milliseconds(backoffMs);
    m_shared->options.max_backoff = std::chrono::milliseconds(backoffMs * 4);
    m_shared->options.stall_seconds = stallSeconds;
}

int DownloadController::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_jobs.size());
}

QVariant DownloadController::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const Job& j = *m_jobs[static_cast<size_t>(index.row())];
    switch (role) {
        case Qt::DisplayRole:
        case NameRole: return j.name;
        case IdRole: return j.id;
        case UrlRole: return j.url;
        case StateRole: return static_cast<int>(j.state);
        case ProgressRole: return j.progress;
        case StatusRole: return j.status;
        case OptionsRole: {
            QVariantList out;
            for (const Job::Option& o : j.options) {
                out.append(QVariantMap{{"label", o.label}, {"size", bytesText(static_cast<double>(o.size))}});
            }
            return out;
        }
        default: return {};
    }
}

QHash<int, QByteArray> DownloadController::roleNames() const {
    return {{IdRole, "downloadId"}, {NameRole, "name"},         {UrlRole, "url"},        {StateRole, "downloadState"},
            {ProgressRole, "progress"}, {StatusRole, "status"}, {OptionsRole, "options"}};
}

int DownloadController::rowOf(int id) const {
    for (size_t i = 0; i < m_jobs.size(); ++i) {
        if (m_jobs[i]->id == id) return static_cast<int>(i);
    }
    return -1;
}

DownloadController::Job* DownloadController::job(int id) {
    const int row = rowOf(id);
    return row < 0 ? nullptr : m_jobs[static_cast<size_t>(row)].get();
}

void DownloadController::changed(int id) {
    const int row = rowOf(id);
    if (row >= 0) emit dataChanged(index(row), index(row));
}

// Runs `change` on the job on the GUI thread (from the worker).
void DownloadController::post(int id, std::function<void(Job&)> change) {
    QMetaObject::invokeMethod(
        this,
        [this, id, change = std::move(change)] {
            if (Job* j = job(id)) {
                change(*j);
                changed(id);
            }
        },
        Qt::QueuedConnection);
}

int DownloadController::add(const QUrl& url, const std::string& sha256) {
    auto j = std::make_unique<Job>();
    j->id = m_nextId++;
    j->url = url.toString();
    const std::string text = j->url.toStdString();
    const std::string endpoint = m_endpoint.toStdString();
    const int id = j->id;
    Shared::Task task;
    task.id = id;
    task.cancel = j->cancel;
    task.sha256 = sha256;
    j->sha256 = sha256;
    if (url.scheme() != QLatin1String("http") && url.scheme() != QLatin1String("https")) {
        j->name = j->url;
        j->state = State::Failed;
        j->status = tr("Not a web address (http or https)");
    } else if (auto repo = lib::parse_hf_model_page(text, endpoint)) {
        j->name = QString::fromStdString(repo->org + "/" + repo->repo);
        j->state = State::Listing;
        j->status = tr("Listing the repository's GGUF files…");
        j->repo = *repo;
        task.list = true;
        task.repo = *repo;
    } else {
        // A file's web page becomes its download link; any other link is used as it is.
        const std::string resolved =
            url.path().contains(QLatin1String("/blob/")) ? lib::hf_resolve_url(text, endpoint).value_or(text) : text;
        const QString file = QUrl(QString::fromStdString(resolved)).fileName();
        j->name = file.isEmpty() ? j->url : file;
        j->url = QString::fromStdString(resolved);
        if (!file.endsWith(QLatin1String(".gguf"), Qt::CaseInsensitive)) {
            j->state = State::Failed;
            j->status = tr("This link does not name a .gguf file: use the link of the model file itself, "
                           "or a Hugging Face model page to choose one");
        } else {
            j->target = fs::path(m_library.toStdString()) / file.toStdString();
            const powerhouse::Result<bool> exists = lib::target_file_exists(j->target);
            if (!exists) {
                j->state = State::Failed;
                j->status = QString::fromStdString(exists.error().message);
            } else if (*exists) {
                j->state = State::Done;
                j->status = tr("Already in the library");
                j->progress = 1;
            } else {
                j->state = State::Queued;
                j->status = tr("Waiting");
                task.url = resolved;
                task.target = j->target;
            }
        }
    }
    const bool queue = j->state == State::Queued || j->state == State::Listing;
    beginInsertRows({}, rowCount(), rowCount());
    m_jobs.push_back(std::move(j));
    endInsertRows();
    emit countChanged();
    if (queue) {
        {
            std::lock_guard lock(m_shared->mutex);
            m_shared->tasks.push_back(std::move(task));
        }
        m_shared->wake.notify_all();
        save();
    }
    return id;
}

void DownloadController::pause(int id) {
    Job* j = job(id);
    if (j == nullptr || (j->state != State::Queued && j->state != State::Downloading)) return;
    j->cancel->store(true);
    {
        std::lock_guard lock(m_shared->mutex);
        std::erase_if(m_shared->tasks, [id](const Shared::Task& t) { return t.id == id; });
    }
    j->state = State::Paused;
    j->status = tr("Paused");
    changed(id);
}

void DownloadController::resume(int id) {
    Job* j = job(id);
    if (j == nullptr || (j->state != State::Paused && j->state != State::Failed) || j->target.empty()) {
        return;
    }
    j->cancel = std::make_shared<std::atomic<bool>>(false);
    j->state = State::Queued;
    j->status = tr("Waiting");
    Shared::Task task;
    task.id = id;
    task.url = j->url.toStdString();
    task.target = j->target;
    task.sha256 = j->sha256;
    task.cancel = j->cancel;
    {
        std::lock_guard lock(m_shared->mutex);
        m_shared->tasks.push_back(std::move(task));
    }
    m_shared->wake.notify_all();
    changed(id);
    save();
}

void DownloadController::cancel(int id) {
    const int row = rowOf(id);
    if (row < 0) return;
    Job& j = *m_jobs[static_cast<size_t>(row)];
    j.cancel->store(true);
    j.cancelled_by_user = true;
    {
        std::lock_guard lock(m_shared->mutex);
        std::erase_if(m_shared->tasks, [id](const Shared::Task& t) { return t.id == id; });
    }
    // A running download lets go of its .part when it sees the flag; the worker deletes it
    // then. One not running has nothing open: delete now.
    if (j.state != State::Downloading && !j.target.empty()) {
        std::error_code ec;
        fs::remove(lib::part_path(j.target), ec);
        fs::remove(lib::part_info_path(j.target), ec);
    }
    beginRemoveRows({}, row, row);
    m_jobs.erase(m_jobs.begin() + row);
    endRemoveRows();
    emit countChanged();
    save();
}

void DownloadController::choose(int id, int option) {
    Job* j = job(id);
    if (j == nullptr || j->state != State::Choose || option < 0 ||
        option >= static_cast<int>(j->options.size())) {
        return;
    }
    const Job::Option chosen = j->options[static_cast<size_t>(option)];
    const lib::HfRepo repo = j->repo;
    cancel(id);  // the listing's row gives way to the files' rows
    // Each file with the hash the listing gives for it.
    for (const lib::HfFile& f : chosen.files) {
        add(QUrl(QString::fromStdString(lib::hf_file_url(repo, f.path, m_endpoint.toStdString()))), f.sha256);
    }
}

void DownloadController::clearFinished() {
    for (int row = rowCount() - 1; row >= 0; --row) {
        const State state = m_jobs[static_cast<size_t>(row)]->state;
        if (state == State::Done || state == State::Failed) {
            beginRemoveRows({}, row, row);
            m_jobs.erase(m_jobs.begin() + row);
            endRemoveRows();
        }
    }
    emit countChanged();
}

// What must be resumed at the next start.
void DownloadController::save() {
    QJsonArray list;
    for (const auto& j : m_jobs) {
        if (j->target.empty() || (j->state != State::Queued && j->state != State::Downloading &&
                                  j->state != State::Paused)) {
            continue;
        }
        list.append(QJsonObject{{"url", j->url},
                                {"target", QString::fromStdString(j->target.string())},
                                {"sha256", QString::fromStdString(j->sha256)}});
    }
    auto saved = m_store.set_setting("downloads", QJsonDocument(list).toJson(QJsonDocument::Compact).toStdString());
    // The downloads go on; only a restart would not bring them back. Said once per failure
    // run, and the next change tries again.
    if (!saved && !m_saveFailed) {
        setErrorText(tr("The list of downloads could not be saved, so unfinished downloads will not come back after "
                        "a restart: %1")
                         .arg(QString::fromStdString(saved.error().message)));
        emit error(m_errorText);
    } else if (saved && m_saveFailed) {
        setErrorText({});  // saved again: nothing is lost any more
    }
    m_saveFailed = !saved;
}

void DownloadController::setErrorText(const QString& text) {
    if (text == m_errorText) return;
    m_errorText = text;
    emit errorTextChanged();
}

void DownloadController::work() {
    for (;;) {
        Shared::Task task;
        lib::DownloadOptions options;
        {
            std::unique_lock lock(m_shared->mutex);
            m_shared->wake.wait(lock, [this] { return m_shared->stop || !m_shared->tasks.empty(); });
            if (m_shared->stop) return;
            task = std::move(m_shared->tasks.front());
            m_shared->tasks.pop_front();
            options = m_shared->options;
            const std::string& where = task.list ? m_endpoint.toStdString() : task.url;
            if (onHub(where, m_endpoint)) options.bearer_token = m_shared->hub_token;
        }
        options.cancel = task.cancel.get();
        const std::string repoId = task.list ? task.repo.org + "/" + task.repo.repo : hubRepoId(task.url);
        // A refusal from the Hub in words that say what to do.
        const auto explain = [&](const powerhouse::Error& error) {
            if (options.bearer_token.empty() && !onHub(task.list ? m_endpoint.toStdString() : task.url, m_endpoint)) {
                return error;
            }
            return lib::explain_hf_refusal(error, repoId, !options.bearer_token.empty(), lib::HubClient::app,
                                           m_endpoint.toStdString());
        };
        if (task.list) {
            // Every page of the repository's file list, then its GGUF models by quantization.
            auto listed = lib::list_hf_gguf_files(task.repo, m_endpoint.toStdString(), options);
            const QString failure = listed ? QString() : QString::fromStdString(explain(listed.error()).message);
            const std::vector<lib::HfFile> files = listed ? std::move(listed).value() : std::vector<lib::HfFile>();
            std::vector<Job::Option> choices;
            for (const lib::QuantizationGroup& group : lib::group_gguf_models(files)) {
                for (const lib::GgufModel& m : group.models) {
                    if (!m.complete()) continue;
                    Job::Option o;
                    o.label = QString::fromStdString(
                        (group.quantization.empty() ? std::string("other") : group.quantization) + ": " + m.name +
                        (m.parts.size() > 1 ? " (" + std::to_string(m.parts.size()) + " parts)" : ""));
                    o.size = m.total_size;
                    o.files = m.parts;
                    choices.push_back(std::move(o));
                }
            }
            post(task.id, [failure, choices = std::move(choices)](Job& j) mutable {
                if (!failure.isEmpty()) {
                    j.state = State::Failed;
                    j.status = failure;
                } else if (choices.empty()) {
                    j.state = State::Failed;
                    j.status = tr("This repository has no GGUF files: Powerhouse runs GGUF models (look for a "
                                  "repository named ...-GGUF)");
                } else {
                    j.state = State::Choose;
                    j.status = tr("%n model file(s): choose one", nullptr, static_cast<int>(choices.size()));
                    j.options = std::move(choices);
                }
            });
            continue;
        }
        post(task.id, [](Job& j) {
            if (j.state != State::Queued) return;  // paused or cancelled meanwhile
            j.state = State::Downloading;
            j.status = tr("Connecting…");
        });
        options.expected_sha256 = task.sha256;
        options.on_progress = [this, id = task.id](const lib::DownloadProgress& p) {
            post(id, [p](Job& j) {
                if (j.state != State::Downloading) return;
                j.progress = p.total && *p.total > 0 ? static_cast<double>(p.bytes_done) / static_cast<double>(*p.total) : -1;
                QString text = p.total ? tr("%1 of %2").arg(bytesText(static_cast<double>(p.bytes_done)),
                                                            bytesText(static_cast<double>(*p.total)))
                                       : bytesText(static_cast<double>(p.bytes_done));
                if (p.bytes_per_second > 0) text += QStringLiteral(" · %1/s").arg(bytesText(p.bytes_per_second));
                if (p.seconds_left) text += tr(" · %1 left").arg(secondsText(*p.seconds_left));
                if (p.attempt > 1) text += tr(" · attempt %1").arg(p.attempt);
                j.status = text;
            });
            return true;
        };
        const auto result = lib::download_file(task.url, task.target, options);
        const bool cancelled = !result && result.error().code == powerhouse::ErrorCode::cancelled;
        if (cancelled) {
            // Cancelled by the user: the partial file goes. Paused: it stays.
            QMetaObject::invokeMethod(
                this,
                [this, id = task.id, target = task.target] {
                    if (job(id) == nullptr) {
                        std::error_code ec;
                        fs::remove(lib::part_path(target), ec);
                        fs::remove(lib::part_info_path(target), ec);
                    }
                },
                Qt::QueuedConnection);
            continue;
        }
        QString failure = result ? QString() : QString::fromStdString(explain(result.error()).message);
        const bool verified = result && result->verified;
        const QString sha = verified ? QString::fromStdString(result->sha256) : QString();
        const QString path = QString::fromStdString(task.target.string());
        QMetaObject::invokeMethod(
            this,
            [this, id = task.id, failure, verified, path, sha] {
                Job* j = job(id);
                if (j == nullptr) return;
                if (!failure.isEmpty()) {
                    j->state = State::Failed;
                    j->status = failure;
                } else {
                    j->state = State::Done;
                    j->progress = 1;
                    j->status = verified ? tr("Done, sha256 verified") : tr("Done (the server gave no hash to check)");
                }
                changed(id);
                save();
                if (failure.isEmpty()) emit finished(path, sha);
            },
            Qt::QueuedConnection);
    }
}
