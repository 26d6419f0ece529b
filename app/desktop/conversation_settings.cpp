#include "conversation_settings.h"

#include <QJsonDocument>
#include <QJsonObject>

#include <cmath>
#include <string>
#include <type_traits>

namespace {

// Each field once: its JSON key, its QML key, and where it lives.
template <class F>
void for_each_number(ConversationSettings& s, F&& f) {
    powerhouse::SamplingParams& p = s.generation.sampling;
    f("temperature", "temperature", p.temperature);
    f("top_k", "topK", p.top_k);
    f("top_p", "topP", p.top_p);
    f("min_p", "minP", p.min_p);
    f("repeat_penalty", "repeatPenalty", p.repeat_penalty);
    f("presence_penalty", "presencePenalty", p.presence_penalty);
    f("frequency_penalty", "frequencyPenalty", p.frequency_penalty);
    f("max_tokens", "maxTokens", s.generation.max_tokens);
}

// What gpt-oss's template (and OpenAI's API) take; anything else is no effort at all.
bool known_effort(const QString& effort) {
    return effort == QLatin1String("low") || effort == QLatin1String("medium") || effort == QLatin1String("high");
}

}  // namespace

nlohmann::ordered_json conversation_template_variables(const ConversationSettings& settings) {
    nlohmann::ordered_json variables;
    if (!settings.thinking) variables["enable_thinking"] = false;
    if (!settings.reasoning_effort.empty()) variables["reasoning_effort"] = settings.reasoning_effort;
    return variables;
}

ConversationSettings parse_conversation_settings(const std::string& json, const ConversationSettings& defaults) {
    ConversationSettings s = defaults;
    const QJsonObject o = QJsonDocument::fromJson(QByteArray::fromStdString(json)).object();
    for_each_number(s, [&o](const char* key, const char*, auto& field) {
        const QJsonValue v = o.value(QLatin1String(key));
        if (v.isDouble()) field = static_cast<std::remove_reference_t<decltype(field)>>(v.toDouble());
    });
    if (const QJsonValue seed = o.value(QLatin1String("seed")); seed.isDouble() && seed.toDouble() >= 0) {
        s.seed = static_cast<uint64_t>(seed.toDouble());
    }
    if (const QJsonValue thinking = o.value(QLatin1String("enable_thinking")); thinking.isBool()) {
        s.thinking = thinking.toBool();
    }
    if (const QString effort = o.value(QLatin1String("reasoning_effort")).toString(); known_effort(effort)) {
        s.reasoning_effort = effort.toStdString();
    }
    // What was read must still be valid; if not, the defaults.
    if (!s.generation.sampling.validate() || s.generation.max_tokens <= 0) return defaults;
    return s;
}

std::string conversation_settings_json(const ConversationSettings& settings) {
    QJsonObject o;
    ConversationSettings s = settings;
    for_each_number(s, [&o](const char* key, const char*, auto& field) {
        o.insert(QLatin1String(key), static_cast<double>(field));
    });
    if (s.seed) o.insert(QLatin1String("seed"), static_cast<double>(*s.seed));
    if (!s.thinking) o.insert(QLatin1String("enable_thinking"), false);
    if (!s.reasoning_effort.empty())
        o.insert(QLatin1String("reasoning_effort"), QString::fromStdString(s.reasoning_effort));
    return QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString();
}

QVariantMap conversation_settings_variant(const ConversationSettings& settings) {
    QVariantMap m;
    ConversationSettings s = settings;
    for_each_number(s, [&m](const char*, const char* key, auto& field) {
        m.insert(QLatin1String(key), static_cast<double>(field));
    });
    m.insert(QStringLiteral("seed"), s.seed ? static_cast<double>(*s.seed) : -1.0);
    m.insert(QStringLiteral("thinking"), s.thinking);
    m.insert(QStringLiteral("reasoningEffort"), QString::fromStdString(s.reasoning_effort));
    return m;
}

powerhouse::Result<ConversationSettings> conversation_settings_from_variant(const QVariantMap& map,
                                                                            const ConversationSettings& defaults) {
    ConversationSettings s = defaults;
    QString bad, empty;
    for_each_number(s, [&](const char*, const char* key, auto& field) {
        const QVariant v = map.value(QLatin1String(key));
        if (!v.isValid()) return;
        // An emptied field is no 0 (a temperature of 0 is greedy): refused, with the default.
        if (v.typeId() == QMetaType::QString && v.toString().trimmed().isEmpty()) {
            if (bad.isEmpty() && empty.isEmpty()) {
                empty = QStringLiteral("%1 is empty: give it a number (%2 by default)")
                            .arg(QString::fromLatin1(key), QString::number(static_cast<double>(field)));
            }
            return;
        }
        bool ok = false;
        const double d = v.toDouble(&ok);
        if (!ok || !std::isfinite(d)) {
            if (bad.isEmpty()) bad = QString::fromLatin1(key);
            return;
        }
        field = static_cast<std::remove_reference_t<decltype(field)>>(d);
    });
    if (!empty.isEmpty()) return powerhouse::make_error(powerhouse::ErrorCode::invalid_argument, empty.toStdString());
    if (!bad.isEmpty()) {
        return powerhouse::make_error(powerhouse::ErrorCode::invalid_argument, bad.toStdString() + " is not a number");
    }
    if (const QVariant seed = map.value(QStringLiteral("seed")); seed.isValid()) {
        const double d = seed.toDouble();
        s.seed = d >= 0 ? std::optional<uint64_t>(static_cast<uint64_t>(d)) : std::nullopt;
    }
    if (const QVariant thinking = map.value(QStringLiteral("thinking")); thinking.isValid()) {
        s.thinking = thinking.toBool();
    }
    if (const QVariant effort = map.value(QStringLiteral("reasoningEffort")); effort.isValid()) {
        const QString e = effort.toString();
        if (!e.isEmpty() && !known_effort(e)) {
            return powerhouse::make_error(
                powerhouse::ErrorCode::invalid_argument,
                "reasoning effort must be low, medium or high (it is " + e.toStdString() + ")");
        }
        s.reasoning_effort = e.toStdString();
    }
    if (auto valid = s.generation.sampling.validate(); !valid) return valid.error();
    if (s.generation.max_tokens <= 0) {
        return powerhouse::make_error(powerhouse::ErrorCode::invalid_argument,
                                      "max_tokens must be at least 1 (it is " + std::to_string(s.generation.max_tokens) + ")");
    }
    return s;
}

QVariantMap conversation_settings_problem(const QVariantMap& map, const ConversationSettings& defaults) {
    const auto all = conversation_settings_from_variant(map, defaults);
    if (all) return {};
    QVariantMap problem;
    ConversationSettings order = defaults;
    for_each_number(order, [&](const char*, const char* key, auto&) {
        const QString name = QString::fromLatin1(key);
        if (!problem.isEmpty() || !map.contains(name)) return;
        if (const auto alone = conversation_settings_from_variant({{name, map.value(name)}}, defaults); !alone) {
            problem = {{QStringLiteral("field"), name},
                       {QStringLiteral("message"), QString::fromStdString(alone.error().message)}};
        }
    });
    if (problem.isEmpty()) {
        problem = {{QStringLiteral("field"), QString()},
                   {QStringLiteral("message"), QString::fromStdString(all.error().message)}};
    }
    return problem;
}
