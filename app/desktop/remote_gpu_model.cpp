#include "remote_gpu_model.h"

#include <QDateTime>
#include <QLoggingCategory>
#include <QMetaObject>
#include <QStringList>

#include <algorithm>

#include "remote/remote_gpus.h"
#include "remote/remote_url.h"

namespace {

Q_LOGGING_CATEGORY(lcRemote, "powerhouse.remote.metrics")

QString urlHost(const std::string& url) {
    auto parts = powerhouse::remote::split_url(url);
    return parts ? QString::fromStdString(parts->host) : QString::fromStdString(url);
}

QVariantMap figures(const powerhouse::remote::RemoteEngineFigures& e, std::optional<double> rate) {
    const std::optional<double> tps = e.tokens_per_second ? e.tokens_per_second : rate;
    QStringList parts;
    if (e.requests_running) parts << QObject::tr("%1 running").arg(*e.requests_running, 0, 'f', 0);
    if (e.requests_waiting) parts << QObject::tr("%1 waiting").arg(*e.requests_waiting, 0, 'f', 0);
    if (e.kv_cache_usage) parts << QObject::tr("KV cache %1 %").arg(*e.kv_cache_usage * 100.0, 0, 'f', 0);
    if (tps) parts << QObject::tr("%1 tokens/s").arg(*tps, 0, 'f', 1);
    const QString engine = QString::fromStdString(e.engine);
    const QString model = QString::fromStdString(e.model);
    const QString head = model.isEmpty() ? engine : QObject::tr("%1 serving %2").arg(engine, model);
    return {{"engine", engine},
            {"model", model},
            {"running", e.requests_running.value_or(-1.0)},
            {"waiting", e.requests_waiting.value_or(-1.0)},
            {"kvCache", e.kv_cache_usage.value_or(-1.0)},
            {"tokensPerSecond", tps.value_or(-1.0)},
            {"summary", head + QStringLiteral(": ") +
                            (parts.isEmpty() ? QObject::tr("no figures yet") : parts.join(QStringLiteral(" · ")))}};
}

}  // namespace

RemoteGpuModel::RemoteGpuModel(std::chrono::milliseconds interval, QObject* parent) : QAbstractListModel(parent) {
    if (interval.count() <= 0) return;  // readings only through apply()
    m_poller = std::make_unique<RemoteMetricsPoller>(interval, [this](MetricsReading reading) {
        // On the poller's thread; the destructor stops the poller before `this` goes, and a
        // call still queued for a destroyed object is dropped.
        QMetaObject::invokeMethod(
            this, [this, reading = std::move(reading)] { apply(reading); }, Qt::QueuedConnection);
    });
}

RemoteGpuModel::~RemoteGpuModel() {
    if (m_poller) m_poller->stop();
}

int RemoteGpuModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

QVariant RemoteGpuModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const Row& row = m_rows[static_cast<size_t>(index.row())];
    switch (role) {
        case SourceRole:
            return row.source;
        case UrlRole:
            return row.url;
        case HostRole:
            return row.host;
        case Qt::DisplayRole:
        case TitleRole:
            return row.title;
        case ErrorRole:
            return row.error;
        case SimulatedRole:
            return row.simulated;
        case GpusRole:
            return QVariant::fromValue(row.gpus.get());
        case GpuCountRole:
            return row.gpus ? row.gpus->rowCount() : 0;
        case EnginesRole:
            return row.engines;
        default:
            return {};
    }
}

QHash<int, QByteArray> RemoteGpuModel::roleNames() const {
    return {{SourceRole, "source"}, {UrlRole, "url"},           {HostRole, "host"},
            {TitleRole, "title"},   {ErrorRole, "error"},       {SimulatedRole, "simulated"},
            {GpusRole, "gpus"},     {GpuCountRole, "gpuCount"}, {EnginesRole, "engines"}};
}

int RemoteGpuModel::find(const QString& source, const QString& host) const {
    for (size_t i = 0; i < m_rows.size(); ++i) {
        if (m_rows[i].source == source && m_rows[i].host == host) return static_cast<int>(i);
    }
    return -1;
}

GpuListModel* RemoteGpuModel::gpusAt(int row) const {
    return row >= 0 && row < rowCount() ? m_rows[static_cast<size_t>(row)].gpus.get() : nullptr;
}

// Rows in place when the same hosts remain (the cards keep their delegates), else a reset.
void RemoteGpuModel::setRows(std::vector<Row> rows) {
    std::vector<Key> keys;
    for (const Row& r : rows) keys.push_back({r.source, r.host, r.gpus.get()});
    std::vector<Row> retired = std::move(m_rows);
    if (keys == m_keys) {
        m_rows = std::move(rows);
        if (!m_rows.empty()) emit dataChanged(index(0), index(rowCount() - 1));
    } else {
        beginResetModel();
        m_rows = std::move(rows);
        m_keys = std::move(keys);
        endResetModel();
        emit countChanged();
    }
    // Views may still hold the GPU models of rows that went until their delegates go.
    for (Row& r : retired) {
        if (r.gpus) r.gpus.release()->deleteLater();
    }
}

void RemoteGpuModel::setSources(const std::vector<MetricsSource>& sources) {
    if (sources == m_sources) return;
    m_sources = sources;
    std::vector<Row> rows;
    for (const MetricsSource& s : m_sources) {
        for (Row& r : m_rows) {
            if (r.gpus && r.source.toStdString() == s.name && r.url.toStdString() == s.url)
                rows.push_back(std::move(r));
        }
    }
    setRows(std::move(rows));
    if (m_poller) m_poller->setSources(m_sources);
}

void RemoteGpuModel::apply(const MetricsReading& reading) {
    const auto listed = std::find(m_sources.begin(), m_sources.end(), reading.source);
    if (listed == m_sources.end()) return;  // removed or changed since the fetch began
    const QString name = QString::fromStdString(reading.source.name);
    const QString url = QString::fromStdString(reading.source.url);
    const QString shownUrl = QString::fromStdString(reading.url);
    const QString defaultHost = urlHost(reading.url);

    // This source's rows as they are, by host.
    std::map<QString, Row> old;
    for (Row& r : m_rows) {
        if (r.gpus && r.source == name && r.url == url) old[r.host] = std::move(r);
    }
    auto rowFor = [&](const QString& host) {
        Row row;
        if (auto it = old.find(host); it != old.end()) {
            row = std::move(it->second);
            old.erase(it);
        } else {
            row.gpus = std::make_unique<GpuListModel>();
        }
        row.source = name;
        row.url = url;
        row.host = host;
        return row;
    };

    std::vector<Row> fresh;
    QString error = QString::fromStdString(reading.error);
    if (reading.text) {
        const std::vector<powerhouse::remote::RemoteHost> hosts =
            powerhouse::remote::remote_gpus(reading.text->samples, defaultHost.toStdString());
        if (hosts.empty()) {
            error = tr("No GPU or engine metrics at %1 (%n sample(s) of other metrics)", nullptr,
                       static_cast<int>(reading.text->samples.size()))
                        .arg(shownUrl);
        } else {
            m_lastGood[name] = reading.time;
        }
        for (const powerhouse::remote::RemoteHost& h : hosts) {
            const QString host = h.host.empty() ? defaultHost : QString::fromStdString(h.host);
            Row row = rowFor(host);
            QStringList kinds;
            for (const std::string& k : h.sources) kinds << QString::fromStdString(k);
            row.title = host + QStringLiteral(" · ") +
                        (kinds.isEmpty() ? shownUrl : tr("%1 at %2").arg(kinds.join(QStringLiteral(", ")), shownUrl));
            row.error.clear();
            powerhouse::TelemetrySnapshot snapshot;
            snapshot.source = row.title.toStdString();
            snapshot.gpus = h.gpus;
            snapshot.latest = h.latest;
            for (powerhouse::GpuSample& s : snapshot.latest) s.time = reading.time;
            row.simulated =
                std::any_of(h.gpus.begin(), h.gpus.end(), [](const powerhouse::GpuInfo& g) { return g.simulated; });
            snapshot.simulated = row.simulated;
            row.gpus->update(snapshot);
            row.last = snapshot;
            row.engines.clear();
            for (const powerhouse::remote::RemoteEngineFigures& e : h.engines) {
                std::optional<double> rate;
                if (e.generation_tokens_total) {
                    const QString key = name + '\n' + host + '\n' + QString::fromStdString(e.engine + "\n" + e.model);
                    if (auto c = m_counters.find(key); c != m_counters.end()) {
                        rate = powerhouse::remote::counter_rate(c->second.tokens, e.generation_tokens_total,
                                                                reading.time - c->second.time);
                    }
                    m_counters[key] = {*e.generation_tokens_total, reading.time};
                }
                row.engines.append(figures(e, rate));
            }
            fresh.push_back(std::move(row));
        }
    }
    if (!error.isEmpty()) {
        // Keep what the source showed, its GPUs marked as not read; or one row with the error.
        for (auto& [host, kept] : old) fresh.push_back(std::move(kept));
        old.clear();
        if (fresh.empty()) {
            Row row = rowFor(defaultHost);
            row.title = defaultHost + QStringLiteral(" · ") + shownUrl;
            fresh.push_back(std::move(row));
        }
        const auto good = m_lastGood.find(name);
        const QString since = good == m_lastGood.end()
                                  ? tr("no reading yet")
                                  : tr("no reading for %1 s").arg(reading.time - good->second, 0, 'f', 0);
        for (Row& row : fresh) {
            row.error = error;
            powerhouse::TelemetrySnapshot stale = row.last;
            for (powerhouse::GpuSample& s : stale.latest) {
                s = powerhouse::GpuSample{};
                s.time = reading.time;
                s.responding = false;
                s.problem = (tr("%1: ").arg(since) + error).toStdString();
            }
            if (!stale.gpus.empty()) row.gpus->update(stale);
        }
        if (m_lastError[name] != error) qCWarning(lcRemote) << "metrics of" << name << "at" << shownUrl << ":" << error;
        m_lastError[name] = error;
    } else if (auto e = m_lastError.find(name); e != m_lastError.end() && !e->second.isEmpty()) {
        qCInfo(lcRemote) << "metrics of" << name << "at" << shownUrl << "answer again";
        e->second.clear();
    }

    // Every source's rows in the order of the sources; this one's replaced.
    std::vector<Row> rows;
    for (const MetricsSource& s : m_sources) {
        if (s == reading.source) {
            for (Row& r : fresh) rows.push_back(std::move(r));
            continue;
        }
        const QString other = QString::fromStdString(s.name);
        for (Row& r : m_rows) {
            if (r.gpus && r.source == other) rows.push_back(std::move(r));
        }
    }
    for (auto& [host, gone] : old) {
        if (gone.gpus) m_rows.push_back(std::move(gone));  // retired by setRows
    }
    setRows(std::move(rows));
    emit readingApplied();
}
