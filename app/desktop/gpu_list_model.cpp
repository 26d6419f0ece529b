#include "gpu_list_model.h"

#include <QStringList>

namespace {

QVariantList toList(const std::deque<double>& values) {
    QVariantList out;
    out.reserve(static_cast<qsizetype>(values.size()));
    for (double v : values) out.append(v);
    return out;
}

void push(std::deque<double>& history, double value) {
    history.push_back(value);
    while (history.size() > GpuListModel::kHistory) history.pop_front();
}

}  // namespace

GpuListModel::GpuListModel(QObject* parent) : QAbstractListModel(parent) {}

int GpuListModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

QVariant GpuListModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const Row& row = m_rows[static_cast<size_t>(index.row())];
    const powerhouse::GpuInfo& info = row.info;
    const powerhouse::GpuSample& s = row.latest;
    switch (role) {
        case Qt::DisplayRole:
        case NameRole: return QString::fromStdString(info.name);
        case UuidRole: return QString::fromStdString(info.uuid);
        case SimulatedRole: return info.simulated;
        case RespondingRole: return s.responding;
        case ProblemRole: return QString::fromStdString(s.problem);
        case LoadRole: return s.gpu_utilization ? static_cast<int>(*s.gpu_utilization) : -1;
        case MemoryUsedRole: return static_cast<double>(s.memory_used.value_or(0));
        case MemoryTotalRole: return static_cast<double>(info.memory_total);
        case TemperatureRole: return s.temperature_c ? static_cast<int>(*s.temperature_c) : -1;
        case PowerRole: return s.power_w.value_or(-1.0);
        case PowerLimitRole: return info.power_limit_w.value_or(-1.0);
        case ClocksRole:
            if (!s.sm_clock_mhz) return QString();
            return s.memory_clock_mhz ? QStringLiteral("%1 / %2 MHz").arg(*s.sm_clock_mhz).arg(*s.memory_clock_mhz)
                                      : QStringLiteral("%1 MHz").arg(*s.sm_clock_mhz);
        case LinkRole:
            if (!info.pcie_generation || !info.pcie_width) return QString();
            return QStringLiteral("PCIe %1.0 x%2").arg(*info.pcie_generation).arg(*info.pcie_width);
        case ThrottleRole: {
            if (!s.throttle_reasons) return QString();
            QStringList names;
            for (const std::string& n : powerhouse::throttle_reason_names(*s.throttle_reasons)) {
                if (n != "idle") names << QString::fromStdString(n);
            }
            return names.join(QStringLiteral(", "));
        }
        case LoadHistoryRole: return toList(row.load);
        case TemperatureHistoryRole: return toList(row.temperature);
        case MemoryHistoryRole: return toList(row.memory);
        case PowerHistoryRole: return toList(row.power);
        case FailedRole: return !failure(row).isEmpty();
        case FailureRole: return failure(row);
        default: return {};
    }
}

QHash<int, QByteArray> GpuListModel::roleNames() const {
    return {{NameRole, "name"},
            {UuidRole, "uuid"},
            {SimulatedRole, "simulated"},
            {RespondingRole, "responding"},
            {ProblemRole, "problem"},
            {LoadRole, "load"},
            {MemoryUsedRole, "memoryUsed"},
            {MemoryTotalRole, "memoryTotal"},
            {TemperatureRole, "temperature"},
            {PowerRole, "power"},
            {PowerLimitRole, "powerLimit"},
            {ClocksRole, "clocks"},
            {LinkRole, "link"},
            {ThrottleRole, "throttle"},
            {LoadHistoryRole, "loadHistory"},
            {TemperatureHistoryRole, "temperatureHistory"},
            {MemoryHistoryRole, "memoryHistory"},
            {PowerHistoryRole, "powerHistory"},
            {FailedRole, "failed"},
            {FailureRole, "failure"}};
}

// The driver's word first (it names the Xid), else the engine's.
QString GpuListModel::failure(const Row& row) const {
    if (powerhouse::gpu_failed(row.latest)) {
        return QString::fromStdString(powerhouse::gpu_failure_text(row.info.index, row.latest));
    }
    return m_failures.value(QString::fromStdString(row.info.uuid));
}

void GpuListModel::markFailed(const QString& uuid, const QString& why) {
    if (uuid.isEmpty() || m_failures.value(uuid) == why) return;
    m_failures.insert(uuid, why);
    for (size_t i = 0; i < m_rows.size(); ++i) {
        if (QString::fromStdString(m_rows[i].info.uuid) != uuid) continue;
        const QModelIndex changed = index(static_cast<int>(i));
        emit dataChanged(changed, changed, {FailedRole, FailureRole});
    }
}

void GpuListModel::update(const powerhouse::TelemetrySnapshot& snapshot) {
    bool same = snapshot.gpus.size() == m_rows.size();
    for (size_t i = 0; same && i < m_rows.size(); ++i) same = m_rows[i].info.uuid == snapshot.gpus[i].uuid;
    if (!same) {
        beginResetModel();
        m_rows.clear();
        for (const powerhouse::GpuInfo& info : snapshot.gpus) m_rows.push_back(Row{info, {}, {}, {}, {}, {}});
        endResetModel();
        emit countChanged();
    }
    for (size_t i = 0; i < m_rows.size() && i < snapshot.latest.size(); ++i) {
        Row& row = m_rows[i];
        row.info = snapshot.gpus[i];
        row.latest = snapshot.latest[i];
        const powerhouse::GpuSample& s = row.latest;
        push(row.load, s.gpu_utilization ? *s.gpu_utilization : 0.0);
        push(row.temperature, s.temperature_c ? *s.temperature_c : 0.0);
        push(row.memory, row.info.memory_total > 0 && s.memory_used
                             ? static_cast<double>(*s.memory_used) / static_cast<double>(row.info.memory_total)
                             : 0.0);
        push(row.power, s.power_w.value_or(0.0));
    }
    if (!m_rows.empty()) emit dataChanged(index(0), index(static_cast<int>(m_rows.size()) - 1));
}
