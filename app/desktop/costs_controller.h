// The Costs view's figures (issue 24): tokens per unit of the user's currency over a day, a
// week and a month at home (powerhouse/costs.h: the electricity, and optionally the hardware
// written off), and what the same tokens would cost on a GPU rented by the hour at the speed
// the planner's bandwidth estimate gives it on the loaded model.
//
// The speed and power are measured, not assumed: the recent answers whose energy the
// dashboard measured (tokens, tokens/s, joules: the store's measured_answers at start, then
// each answer as it ends), so watts = their joules over their generation time. The bytes a
// token reads come from the loaded model's summary: the GPUs' step_bytes where the model runs
// on GPUs, else its weight bytes (decoding reads every weight once).
//
// Settings (app settings of the store, written as they change): cost_currency (a label, no
// symbol is assumed), cost_hours_per_day, cost_hardware_price, cost_write_off_months,
// cost_cloud_gpu, cost_cloud_price_per_hour. The electricity price is the settings' own
// (electricity_price), handed in by DesktopApp.
//
// Thread-safety: a QObject of the GUI thread.
#pragma once

#include <QObject>
#include <QString>
#include <QVariantList>
#include <QVariantMap>
#include <QtQml/qqmlregistration.h>

#include <deque>

#include "store/store.h"

class CostsController : public QObject {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("made by main.cpp")
    Q_PROPERTY(QString currency READ currency WRITE setCurrency NOTIFY settingsChanged)
    Q_PROPERTY(double hoursPerDay READ hoursPerDay WRITE setHoursPerDay NOTIFY settingsChanged)
    Q_PROPERTY(double hardwarePrice READ hardwarePrice WRITE setHardwarePrice NOTIFY settingsChanged)
    Q_PROPERTY(double writeOffMonths READ writeOffMonths WRITE setWriteOffMonths NOTIFY settingsChanged)
    Q_PROPERTY(QString cloudGpu READ cloudGpu WRITE setCloudGpu NOTIFY settingsChanged)
    Q_PROPERTY(double cloudPricePerHour READ cloudPricePerHour WRITE setCloudPricePerHour NOTIFY settingsChanged)
    Q_PROPERTY(double electricityPrice READ electricityPrice NOTIFY figuresChanged)
    // Measured over the recent answers (0 when none was measured).
    Q_PROPERTY(int answersMeasured READ answersMeasured NOTIFY figuresChanged)
    Q_PROPERTY(double tokensPerSecond READ tokensPerSecond NOTIFY figuresChanged)
    Q_PROPERTY(double watts READ watts NOTIFY figuresChanged)
    Q_PROPERTY(double joulesPerToken READ joulesPerToken NOTIFY figuresChanged)
    Q_PROPERTY(double cloudTokensPerSecond READ cloudTokensPerSecond NOTIFY figuresChanged)
    // [{name: "Day"|"Week"|"Month", tokens, energyCost, hardwareCost, localCost,
    //   localTokensPerUnit, localCostPerMillion, cloudCost, cloudTokensPerUnit, cloudHours}];
    // empty with `problem` saying why (nothing measured yet, no model, a bad figure).
    Q_PROPERTY(QVariantList periods READ periods NOTIFY figuresChanged)
    Q_PROPERTY(QString problem READ problem NOTIFY figuresChanged)
    Q_PROPERTY(QString cloudProblem READ cloudProblem NOTIFY figuresChanged)
    // The last change of a setting the store refused, with its words; empty once one is saved.
    Q_PROPERTY(QString error READ error NOTIFY errorChanged)

public:
    explicit CostsController(powerhouse::store::Store& store, QObject* parent = nullptr);

    QString currency() const { return m_currency; }
    double hoursPerDay() const { return m_hoursPerDay; }
    double hardwarePrice() const { return m_hardwarePrice; }
    double writeOffMonths() const { return m_writeOffMonths; }
    QString cloudGpu() const { return m_cloudGpu; }
    double cloudPricePerHour() const { return m_cloudPrice; }
    double electricityPrice() const { return m_electricityPrice; }
    int answersMeasured() const { return static_cast<int>(m_answers.size()); }
    double tokensPerSecond() const { return m_tokensPerSecond; }
    double watts() const { return m_watts; }
    double joulesPerToken() const;
    double cloudTokensPerSecond() const { return m_cloudTokensPerSecond; }
    QVariantList periods() const { return m_periods; }
    QString problem() const { return m_problem; }
    QString cloudProblem() const { return m_cloudProblem; }
    QString error() const { return m_error; }

    void setCurrency(const QString& currency);
    void setHoursPerDay(double hours);
    void setHardwarePrice(double price);
    void setWriteOffMonths(double months);
    void setCloudGpu(const QString& name);
    void setCloudPricePerHour(double price);
    void setElectricityPrice(double price);
    // An answer's measurement (its energy measured by the dashboard).
    void recordAnswer(qint64 tokens, double tokensPerSecond, double joules);
    // The loaded model (EngineClient's summary: weightBytes, devices' stepBytes); {}: none.
    void setModel(const QVariantMap& summary);
    double bytesPerToken() const { return m_bytesPerToken; }

signals:
    void settingsChanged();
    void figuresChanged();
    void errorChanged();

private:
    struct Answer {
        double tokens = 0, seconds = 0, joules = 0;
    };
    static constexpr size_t kRecent = 20;
    void save(const char* key, const QString& value);
    void load();  // the settings, as stored
    void recompute();

    powerhouse::store::Store& m_store;
    QString m_currency, m_cloudGpu;
    double m_hoursPerDay = 8, m_hardwarePrice = 0, m_writeOffMonths = 36, m_cloudPrice = 1.60;
    double m_electricityPrice = 0;
    std::deque<Answer> m_answers;  // newest first
    double m_tokensPerSecond = 0, m_watts = 0, m_bytesPerToken = 0, m_cloudTokensPerSecond = 0;
    QVariantList m_periods;
    QString m_problem, m_cloudProblem;
    QString m_error;
};
