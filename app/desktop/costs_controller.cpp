#include "costs_controller.h"

#include <cmath>

#include "powerhouse/costs.h"

namespace {

double number(const powerhouse::store::Store& store, const char* key, double fallback) {
    auto v = store.setting(key);
    if (!v || !*v) return fallback;
    bool ok = false;
    const double d = QString::fromStdString(**v).toDouble(&ok);
    return ok && std::isfinite(d) && d >= 0 ? d : fallback;
}

QString text(const powerhouse::store::Store& store, const char* key, const QString& fallback) {
    auto v = store.setting(key);
    return v && *v ? QString::fromStdString(**v) : fallback;
}

QVariant optional(const std::optional<double>& v) { return v ? QVariant(*v) : QVariant(); }

}  // namespace

CostsController::CostsController(powerhouse::store::Store& store, QObject* parent) : QObject(parent), m_store(store) {
    load();
    if (auto recent = store.measured_answers(static_cast<int>(kRecent))) {
        for (const auto& s : *recent) {
            const double tokens = static_cast<double>(s.generated_tokens);
            m_answers.push_back({tokens, tokens / s.tokens_per_second, s.energy_joules.value_or(0)});
        }
    }
    recompute();
}

void CostsController::load() {
    m_currency = text(m_store, "cost_currency", QString());
    m_hoursPerDay = std::clamp(number(m_store, "cost_hours_per_day", 8), 0.0, 24.0);
    m_hardwarePrice = number(m_store, "cost_hardware_price", 0);
    m_writeOffMonths = number(m_store, "cost_write_off_months", 36);
    m_cloudGpu = text(m_store, "cost_cloud_gpu", QStringLiteral("A100 80GB"));
    m_cloudPrice = number(m_store, "cost_cloud_price_per_hour", 1.60);
}

void CostsController::save(const char* key, const QString& value) {
    auto saved = m_store.set_setting(key, value.toStdString());
    // Refused, the figures go back to what the store holds, and the dialog says why.
    if (!saved) load();
    const QString error =
        saved ? QString()
              : tr("Not saved, so the figures are as before: %1").arg(QString::fromStdString(saved.error().message));
    if (error != m_error) {
        m_error = error;
        emit errorChanged();
    }
    emit settingsChanged();
    recompute();
}

void CostsController::setCurrency(const QString& currency) {
    if (currency == m_currency) return;
    m_currency = currency.trimmed();
    save("cost_currency", m_currency);
}

void CostsController::setHoursPerDay(double hours) {
    if (!std::isfinite(hours) || hours == m_hoursPerDay) return;
    m_hoursPerDay = std::clamp(hours, 0.0, 24.0);
    save("cost_hours_per_day", QString::number(m_hoursPerDay));
}

void CostsController::setHardwarePrice(double price) {
    if (!std::isfinite(price) || price < 0 || price == m_hardwarePrice) return;
    m_hardwarePrice = price;
    save("cost_hardware_price", QString::number(price));
}

void CostsController::setWriteOffMonths(double months) {
    if (!std::isfinite(months) || months < 0 || months == m_writeOffMonths) return;
    m_writeOffMonths = months;
    save("cost_write_off_months", QString::number(months));
}

void CostsController::setCloudGpu(const QString& name) {
    if (name.trimmed() == m_cloudGpu) return;
    m_cloudGpu = name.trimmed();
    save("cost_cloud_gpu", m_cloudGpu);
}

void CostsController::setCloudPricePerHour(double price) {
    if (!std::isfinite(price) || price < 0 || price == m_cloudPrice) return;
    m_cloudPrice = price;
    save("cost_cloud_price_per_hour", QString::number(price));
}

void CostsController::setElectricityPrice(double price) {
    if (price == m_electricityPrice) return;
    m_electricityPrice = std::isfinite(price) && price > 0 ? price : 0.0;
    recompute();
}

void CostsController::recordAnswer(qint64 tokens, double tokensPerSecond, double joules) {
    if (tokens <= 0 || !(tokensPerSecond > 0) || !(joules >= 0)) return;
    const double t = static_cast<double>(tokens);
    m_answers.push_front({t, t / tokensPerSecond, joules});
    if (m_answers.size() > kRecent) m_answers.pop_back();
    recompute();
}

void CostsController::setModel(const QVariantMap& summary) {
    double step = 0;
    for (const QVariant& d : summary.value("devices").toList()) step += d.toMap().value("stepBytes").toDouble();
    m_bytesPerToken = step > 0 ? step : summary.value("weightBytes").toDouble();
    recompute();
}

double CostsController::joulesPerToken() const {
    double tokens = 0, joules = 0;
    for (const Answer& a : m_answers) {
        tokens += a.tokens;
        joules += a.joules;
    }
    return tokens > 0 ? joules / tokens : 0.0;
}

void CostsController::recompute() {
    double tokens = 0, seconds = 0, joules = 0;
    for (const Answer& a : m_answers) {
        tokens += a.tokens;
        seconds += a.seconds;
        joules += a.joules;
    }
    m_tokensPerSecond = seconds > 0 ? tokens / seconds : 0.0;
    m_watts = seconds > 0 ? joules / seconds : 0.0;
    m_periods.clear();
    m_problem.clear();
    m_cloudProblem.clear();
    m_cloudTokensPerSecond = 0;

    powerhouse::LocalUsage usage;
    usage.tokens_per_second = m_tokensPerSecond;
    usage.watts = m_watts;
    usage.hours_per_day = m_hoursPerDay;
    usage.price_per_kwh = m_electricityPrice;
    usage.hardware_price = m_writeOffMonths > 0 ? m_hardwarePrice : 0.0;
    usage.write_off_months = m_writeOffMonths;
    if (m_answers.empty()) {
        m_problem = tr("No answer's energy measured yet: the figures start from the answers generated on the GPUs.");
        emit figuresChanged();
        return;
    }
    auto local = powerhouse::local_costs(usage);
    if (!local) {
        m_problem = QString::fromStdString(local.error().message);
        emit figuresChanged();
        return;
    }
    powerhouse::CloudGpu gpu;
    gpu.name = m_cloudGpu.toStdString();
    gpu.price_per_hour = m_cloudPrice;
    std::optional<powerhouse::CloudCosts> cloud;
    if (m_bytesPerToken <= 0) {
        m_cloudProblem = tr("Load a model to compare with a rented GPU.");
    } else if (auto c = powerhouse::cloud_costs(gpu, *local, m_bytesPerToken)) {
        cloud = *c;
        m_cloudTokensPerSecond = c->day.tokens_per_second;
    } else {
        m_cloudProblem = QString::fromStdString(c.error().message);
    }
    const std::pair<QString, const powerhouse::PeriodCost*> periods[] = {
        {tr("Day"), &local->day}, {tr("Week"), &local->week}, {tr("Month"), &local->month}};
    const powerhouse::CloudCost* clouds[] = {cloud ? &cloud->day : nullptr, cloud ? &cloud->week : nullptr,
                                             cloud ? &cloud->month : nullptr};
    for (size_t i = 0; i < 3; ++i) {
        const powerhouse::PeriodCost& p = *periods[i].second;
        QVariantMap row{{"name", periods[i].first},
                        {"tokens", p.tokens},
                        {"energyCost", p.energy_cost},
                        {"hardwareCost", p.hardware_cost},
                        {"localCost", p.total_cost},
                        {"localTokensPerUnit", optional(p.tokens_per_unit)},
                        {"localCostPerMillion", optional(p.cost_per_million_tokens)}};
        if (const powerhouse::CloudCost* c = clouds[i]) {
            row.insert("cloudCost", c->cost);
            row.insert("cloudTokensPerUnit", optional(c->tokens_per_unit));
            row.insert("cloudHours", c->hours);
        }
        m_periods.append(row);
    }
    emit figuresChanged();
}
