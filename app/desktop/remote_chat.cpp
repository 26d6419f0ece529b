#include "remote_chat.h"

#include <utility>

using powerhouse::remote::ChatRequest;
using powerhouse::remote::ChatResult;

ChatRequest remote_chat_request(const QString& model, std::vector<powerhouse::ChatMessage> messages,
                                const powerhouse::GenerationSettings& settings,
                                const nlohmann::ordered_json& template_variables) {
    ChatRequest request;
    request.model = model.toStdString();
    request.messages = std::move(messages);
    const powerhouse::SamplingParams& s = settings.sampling;
    request.max_tokens = settings.max_tokens;
    request.temperature = s.temperature;
    request.seed = s.seed;
    if (s.temperature > 0) {
        // With greedy decoding the filters change nothing; servers that do not know them
        // ignore them.
        request.top_p = s.top_p;
        if (s.top_k > 0) request.top_k = s.top_k;
        request.min_p = s.min_p;
    }
    if (s.repeat_penalty != 1.0f) request.repeat_penalty = s.repeat_penalty;
    if (s.presence_penalty != 0.0f) request.presence_penalty = s.presence_penalty;
    if (s.frequency_penalty != 0.0f) request.frequency_penalty = s.frequency_penalty;
    for (const std::string& stop : settings.stop) {
        if (request.stop.size() < 4) request.stop.push_back(stop);
    }
    if (template_variables.is_object()) {
        for (const auto& [name, value] : template_variables.items()) {
            if (name == "reasoning_effort" && value.is_string()) {
                request.reasoning_effort = value.get<std::string>();
            } else {
                request.chat_template_kwargs[name] = value;
            }
        }
    }
    return request;
}

RemoteChat::RemoteChat(QObject* parent) : QObject(parent) {
    m_flush.setInterval(16);
    connect(&m_flush, &QTimer::timeout, this, &RemoteChat::flush);
}

RemoteChat::~RemoteChat() {
    for (auto& [id, run] : m_runs) run->cancelled = true;
    for (auto& [id, run] : m_runs) {
        if (run->thread.joinable()) run->thread.join();
    }
}

quint64 RemoteChat::start(const RemoteTarget& target, ChatRequest request) {
    const quint64 id = m_next++;
    auto run = std::make_shared<Run>();
    m_runs[id] = run;
    if (!m_flush.isActive()) m_flush.start();
    powerhouse::remote::ConnectionOptions options;
    options.api_key = target.apiKey.toStdString();
    options.ca_file = target.caFile.toStdString();
    const QString engine = target.url;
    const QString model = target.model;
    const std::string url = target.url.toStdString();
    run->thread = std::thread([this, id, run, url, options = std::move(options), request = std::move(request), engine,
                               model]() mutable {
        auto remote = powerhouse::remote::RemoteEngine::create(url, std::move(options));
        powerhouse::Result<ChatResult> result = remote ? powerhouse::Result<ChatResult>(ChatResult{})
                                                       : powerhouse::Result<ChatResult>(remote.error());
        if (remote) {
            powerhouse::remote::ChatCallbacks callbacks;
            callbacks.on_text = [&run](std::string_view text) {
                const std::lock_guard lock(run->mutex);
                run->pending.append(text);
            };
            callbacks.on_reasoning = [&run](std::string_view reasoning) {
                const std::lock_guard lock(run->mutex);
                run->pendingReasoning.append(reasoning);
            };
            callbacks.cancelled = [&run] { return run->cancelled.load(); };
            result = remote->chat(request, callbacks);
        }
        // `this` outlives the thread (the destructor joins it); a call posted meanwhile is
        // dropped with the object.
        QMetaObject::invokeMethod(
            this, [this, id, result = std::move(result), engine, model] { end(id, result, engine, model); },
            Qt::QueuedConnection);
    });
    return id;
}

void RemoteChat::cancel(quint64 requestId) {
    if (const auto run = m_runs.find(requestId); run != m_runs.end()) run->second->cancelled = true;
}

void RemoteChat::flush() {
    for (auto& [id, run] : m_runs) {
        std::string text;
        std::string reasoning;
        {
            const std::lock_guard lock(run->mutex);
            text.swap(run->pending);
            reasoning.swap(run->pendingReasoning);
        }
        if (!text.empty() || !reasoning.empty())
            emit tokens(id, QString::fromStdString(text), QString::fromStdString(reasoning));
    }
    if (m_runs.empty()) m_flush.stop();
}

void RemoteChat::end(quint64 requestId, const powerhouse::Result<ChatResult>& result, const QString& engine,
                     const QString& model) {
    const auto found = m_runs.find(requestId);
    if (found == m_runs.end()) return;
    const std::shared_ptr<Run> run = found->second;
    if (run->thread.joinable()) run->thread.join();
    flush();  // the text streamed before the end arrives first
    m_runs.erase(found);
    if (m_runs.empty()) m_flush.stop();
    if (!result) {
        emit failed(requestId, QString::fromStdString(result.error().message));
        return;
    }
    const ChatResult& r = *result;
    QVariantMap stats;
    stats.insert(QStringLiteral("promptTokens"), r.usage ? qint64{r.usage->prompt_tokens} : qint64{0});
    stats.insert(QStringLiteral("generatedTokens"), qint64{r.completion_tokens()});
    stats.insert(QStringLiteral("ttftMs"), r.time_to_first_token * 1000.0);
    stats.insert(QStringLiteral("tokensPerSecond"), r.tokens_per_second());
    stats.insert(QStringLiteral("stopReason"), QString::fromStdString(r.finish_reason));
    if (r.interruption) stats.insert(QStringLiteral("interruption"), QString::fromStdString(r.interruption->message));
    stats.insert(QStringLiteral("engine"), engine);
    stats.insert(QStringLiteral("model"), r.model.empty() ? model : QString::fromStdString(r.model));
    emit finished(requestId, QString::fromStdString(r.text), stats, QString::fromStdString(r.reasoning));
}
