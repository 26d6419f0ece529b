#include "chat_controller.h"

#include <QDateTime>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRandomGenerator>

#include "model_templates.h"

using powerhouse::store::Conversation;
using powerhouse::store::Message;
using powerhouse::store::MessageState;
using powerhouse::store::MessageStats;
using powerhouse::store::Store;

namespace {
// The app setting that keeps the composer's unsent text.
constexpr const char* kDraftSetting = "composer_draft";

// The engine's words as a sentence, to be followed by another.
QString withStop(QString text) {
    text = text.trimmed();
    if (!text.isEmpty() && !text.endsWith(QLatin1Char('.'))) text += QLatin1Char('.');
    return text;
}

// What the chat templates of the local models loaded so far read:
// {"display name": {"thinking": bool, "effort": bool}, ...}.
constexpr const char* kTemplateSwitchesSetting = "template_switches";
}  // namespace

ChatController::ChatController(powerhouse::store::Store& store, EngineClient& engine, QObject* parent)
    : QObject(parent), m_store(store), m_engine(engine), m_conversations(store) {
    connect(&m_conversations, &ConversationListModel::error, this, &ChatController::showError);
    connect(&m_engine, &EngineClient::loadProgress, this, [this](double fraction, const QString& stage) {
        m_loadProgress = fraction;
        m_loadStage = stage;
        emit loadProgressChanged();
    });
    // loadModel forgets the remote engine; one chosen again while the model loaded answers,
    // and the model bar goes on naming it whatever the load's end.
    connect(&m_engine, &EngineClient::loaded, this, [this](const QVariantMap& summary) {
        m_localName = summary.value("displayName").toString();
        m_localThinkingSwitch = summary.value("hasThinkingSwitch").toBool();
        m_localReasoningEffort = summary.value("hasReasoningEffort").toBool();
        m_templateNote = summary.value("templateNote").toString();
        m_localEmbeddingOnly = summary.value("embeddingOnly").toBool();
        m_draftModelName = summary.value("draftName").toString();
        rememberSwitches(m_localName, {m_localThinkingSwitch, m_localReasoningEffort});
        emit templateSwitchesChanged();  // also while a remote model answers: a conversation's may be this one
        if (!m_remoteTarget) {
            m_modelState = ModelState::Ready;
            m_modelName = m_localName;
            m_modelDevice = summary.value("device").toString();
            emit modelChanged();
        }
        emit idle();
    });
    connect(&m_engine, &EngineClient::loadFailed, this, [this](const QString& message) {
        if (!m_remoteTarget) {
            m_modelState = ModelState::Failed;
            emit modelChanged();
        }
        // A draft model that cannot guess for it (another vocabulary, a file gone): where to
        // choose another, or none.
        showError(m_loadingDraft.isEmpty()
                      ? tr("The model could not be loaded: %1").arg(message)
                      : tr("The model could not be loaded with its draft model %1: %2 Choose another draft model, "
                           "or none, on its card on the Models page.")
                            .arg(QFileInfo(m_loadingDraft).fileName(), withStop(message)));
        emit idle();
    });
    connect(&m_engine, &EngineClient::tokens, this, &ChatController::onTokens);
    connect(&m_engine, &EngineClient::finished, this, &ChatController::onFinished);
    connect(&m_engine, &EngineClient::failed, this, &ChatController::onFailed);
    connect(&m_engine, &EngineClient::recovery, this, &ChatController::onRecovery);
    connect(&m_remote, &RemoteChat::tokens, this, &ChatController::onTokens);
    connect(&m_remote, &RemoteChat::finished, this, &ChatController::onFinished);
    connect(&m_remote, &RemoteChat::failed, this, &ChatController::onFailed);
    m_defaults.generation.max_tokens = 1024;
    m_conversationSettings = m_defaults;
    // The writes go to a writer thread of their own connection, so that their fsyncs never
    // hold up a frame; if it cannot be opened they are made here as before. It waits for
    // another program's lock as long as the GUI's connection does.
    powerhouse::store::StoreOptions writerOptions;
    writerOptions.busy_timeout_ms = m_store.busy_timeout_ms();
    if (auto writer = powerhouse::store::StoreWriter::open(m_store.path(), writerOptions)) {
        m_writer = std::move(*writer);
    } else {
        qWarning("store writer: %s; saving on the GUI thread", writer.error().message.c_str());
    }
    // The list reads on the GUI's connection: after the writes made before it.
    m_conversations.setBeforeRead([this] { flushWrites(); });
    m_saveTimer.setInterval(1000);
    connect(&m_saveTimer, &QTimer::timeout, this, &ChatController::saveStreaming);
    // The switches offered follow the model that answers and the conversation's own.
    connect(this, &ChatController::modelChanged, this, &ChatController::templateSwitchesChanged);
    connect(this, &ChatController::currentConversationChanged, this, &ChatController::templateSwitchesChanged);
    if (auto known = m_store.setting(kTemplateSwitchesSetting); known && *known) {
        const QJsonObject all = QJsonDocument::fromJson(QByteArray::fromStdString(**known)).object();
        for (auto it = all.begin(); it != all.end(); ++it) {
            const QJsonObject s = it.value().toObject();
            m_knownSwitches[it.key()] = {s.value(QStringLiteral("thinking")).toBool(),
                                         s.value(QStringLiteral("effort")).toBool()};
        }
    }
    // The words left unsent when the app last closed.
    if (auto draft = m_store.setting(kDraftSetting); draft && *draft) m_draft = QString::fromStdString(**draft);
    m_draftTimer.setSingleShot(true);
    m_draftTimer.setInterval(500);
    connect(&m_draftTimer, &QTimer::timeout, this, &ChatController::saveDraft);
    // Open the most recent conversation, if any.
    if (m_conversations.rowCount() > 0) {
        selectConversation(m_conversations.data(m_conversations.index(0), ConversationListModel::IdRole).toLongLong());
    }
}

ChatController::~ChatController() {
    // Quitting mid-answer: what has streamed is saved (the next open marks it interrupted),
    // and the writer runs everything queued before its connection closes.
    saveStreaming();
    if (m_draftTimer.isActive()) saveDraft();
    m_writer.reset();
}

void ChatController::setDraft(const QString& text) {
    if (text == m_draft) return;
    m_draft = text;
    emit draftChanged();
    m_draftTimer.start();  // one write once the typing pauses, not one per key
}

void ChatController::saveDraft() {
    m_draftTimer.stop();
    write([text = m_draft.toStdString()](Store& store) { return store.set_setting(kDraftSetting, text); });
}

void ChatController::write(powerhouse::store::StoreWriter::Job job, std::function<void()> then) {
    if (!m_writer) {
        if (check(job(m_store)) && then) then();
        return;
    }
    m_writer->post([this, job = std::move(job), then = std::move(then)](Store& store) -> powerhouse::Result<void> {
        powerhouse::Result<void> done = job(store);
        // Back on the GUI thread (dropped if the controller has gone meanwhile).
        QMetaObject::invokeMethod(
            this, [this, done, then] {
                if (check(done) && then) then();
            },
            Qt::QueuedConnection);
        return {};  // reported above, not through the writer's errors
    });
}

template <class Job>
auto ChatController::writeNow(Job job) -> decltype(job(std::declval<Store&>())) {
    if (!m_writer) return job(m_store);
    return m_writer->call(std::move(job));
}

void ChatController::flushWrites() {
    if (m_writer) reportWriteErrors(m_writer->flush());
}

template <class T>
bool ChatController::check(const powerhouse::Result<T>& result) {
    if (result) return true;
    showError(QString::fromStdString(result.error().message));
    return false;
}

void ChatController::reportWriteErrors(const std::vector<powerhouse::Error>& errors) {
    if (!errors.empty()) showError(QString::fromStdString(errors.front().message));
}

void ChatController::showError(const QString& message) {
    m_errorText = message;
    emit errorTextChanged();
}

void ChatController::dismissError() {
    if (m_errorText.isEmpty()) return;
    m_errorText.clear();
    emit errorTextChanged();
}

void ChatController::setRecovery(Recovery state, const QString& text) {
    if (state == m_recovery && text == m_recoveryText) return;
    m_recovery = state;
    m_recoveryText = text;
    emit recoveryChanged();
}

void ChatController::dismissRecovery() { setRecovery(Recovery::None, {}); }

// The answers under way keep their requests and messages through a recovery: their tokens
// go on arriving under the same ids, so nothing here touches them until they end.
void ChatController::onRecovery(const EngineRecovery& r) {
    switch (r.phase) {
        case EngineRecovery::Phase::Reloading: setRecovery(Recovery::Reloading, r.message); break;
        case EngineRecovery::Phase::Recovered:
            setRecovery(Recovery::Recovered, r.message);
            if (m_remoteTarget) break;  // the model bar names the remote engine that answers
            // The model bar names where the model runs now, without the draft model (the
            // engine goes on without it after a device failure).
            m_modelDevice = r.model.value("device").toString();
            m_draftModelName.clear();
            emit modelChanged();
            break;
        case EngineRecovery::Phase::GaveUp:
        case EngineRecovery::Phase::Stopped: {
            for (quint64 id : r.requests) {
                if (conversationOf(id) != 0) m_explained.insert(id);  // not the API server's
            }
            // The engine's words, then what this app does about them.
            QString text = r.message.trimmed();
            if (!text.endsWith(QLatin1Char('.'))) text += QLatin1Char('.');
            if (r.phase == EngineRecovery::Phase::Stopped) {
                text += tr(" The answer was stopped, as Settings → General → When a GPU fails asks.");
            }
            text += tr(" Choose other devices in Settings and apply to load the model again.");
            setRecovery(Recovery::Failed, text);
            if (m_remoteTarget) break;  // a remote engine answers; the local model was not in use
            m_modelState = ModelState::Failed;
            m_modelDevice.clear();
            m_draftModelName.clear();
            emit modelChanged();
            break;
        }
    }
}

void ChatController::useRemote(const RemoteTarget& target) {
    m_remoteTarget = target;
    m_modelState = ModelState::Ready;
    m_modelName = target.model;
    m_modelDevice = tr("remote · %1").arg(target.name);
    emit modelChanged();
}

void ChatController::rememberSwitches(const QString& model, TemplateSwitches switches) {
    if (model.isEmpty()) return;
    if (const auto known = m_knownSwitches.find(model); known != m_knownSwitches.end() && known->second == switches)
        return;
    m_knownSwitches[model] = switches;
    QJsonObject all;
    for (const auto& [name, s] : m_knownSwitches)
        all.insert(name, QJsonObject{{QStringLiteral("thinking"), s.thinking}, {QStringLiteral("effort"), s.effort}});
    // Only a memory for the settings dialog: not kept, the next start knows it from the next
    // load, so a refusal is logged rather than shown above the chat.
    write([json = QJsonDocument(all).toJson(QJsonDocument::Compact).toStdString()](
              Store& store) -> powerhouse::Result<void> {
        if (auto kept = store.set_setting(kTemplateSwitchesSetting, json); !kept)
            qWarning("chat: what the chat templates read was not kept: %s", kept.error().message.c_str());
        return {};
    });
}

ChatController::TemplateOffer ChatController::templateOffer() const {
    // The model that answers next, and what its template reads.
    const bool localReady = !m_remoteTarget && m_modelState == ModelState::Ready;
    const TemplateSwitches next = m_remoteTarget ? TemplateSwitches{true, true}
                                  : localReady   ? TemplateSwitches{m_localThinkingSwitch, m_localReasoningEffort}
                                                 : TemplateSwitches{};
    const QString nextName = m_remoteTarget ? m_remoteTarget->model : localReady ? m_localName : QString();
    // The conversation's: the model of its last answer (an answer stored before migration 5
    // has no engine: this app's).
    const powerhouse::store::Message* last = nullptr;
    for (int row = m_messages.rowCount() - 1; row >= 0 && last == nullptr; --row) {
        const powerhouse::store::Message* m = m_messages.at(row);
        if (m->role == "assistant" && !m->stats.model.empty()) last = m;
    }
    const bool usedRemote = last != nullptr && !last->stats.engine.empty() && last->stats.engine != "local";
    const QString used = last != nullptr ? QString::fromStdString(last->stats.model) : QString();
    const bool same =
        last == nullptr || (usedRemote == m_remoteTarget.has_value() && used == nextName &&
                            (!usedRemote || QString::fromStdString(last->stats.engine) == m_remoteTarget->url));
    if (same) {
        if (m_remoteTarget) {
            return {true, true, tr("Sent to the server's chat template; a model that reads neither ignores them.")};
        }
        if (!localReady) return {};
        if (next.thinking || next.effort) return {next.thinking, next.effort, {}};
        return {false, false, tr("This model's chat template has no switch for thinking or reasoning effort.")};
    }
    // Another model answered this conversation: its switches where they are known, and a word
    // on the model that answers next, whose template decides what the choices do.
    QString nextSays;
    if (m_remoteTarget) {
        nextSays = tr("%1 on %2 answers next: the server's chat template decides what it reads.")
                       .arg(nextName, m_remoteTarget->name);
    } else if (!localReady) {
        nextSays = tr("No model is loaded now.");
    } else {
        const QString reads = next.thinking && next.effort ? tr("reads both switches")
                              : next.thinking              ? tr("reads only \"Think before answering\"")
                              : next.effort                ? tr("reads only \"Reasoning effort\"")
                                                           : tr("reads neither switch");
        nextSays = tr("%1, loaded now, answers next: its chat template %2.").arg(nextName, reads);
    }
    std::optional<TemplateSwitches> known;
    if (usedRemote) {
        known = TemplateSwitches{true, true};
    } else if (const auto found = m_knownSwitches.find(used); found != m_knownSwitches.end()) {
        known = found->second;
    }
    if (known) {
        return {known->thinking, known->effort,
                tr("Shown for %1, which answered this conversation. %2").arg(used, nextSays)};
    }
    if (nextName.isEmpty()) {
        return {false, false,
                tr("%1 answered this conversation; what its chat template reads is known once it is loaded. %2")
                    .arg(used, nextSays)};
    }
    return {next.thinking, next.effort,
            tr("Shown for %1, the model that answers next: %2 answered this conversation, and what its chat "
               "template reads is known once it is loaded.")
                .arg(nextName, used)};
}

void ChatController::loadModel(const QString& path, powerhouse::ModelOptions options,
                               powerhouse::RecoveryPolicy recovery) {
    // The chat template chosen for this model on the Models page, unless the caller gives one.
    if (!options.chat_template) {
        if (auto chosen = model_chat_template(m_store, path); !chosen) {
            showError(tr("The chat template chosen for this model could not be read, so it chats with its own: %1")
                          .arg(QString::fromStdString(chosen.error().message)));
        } else if (*chosen) {
            options.chat_template = std::move((*chosen)->text);
        }
    }
    // The draft model chosen for it on the Models page (speculative decoding), if any.
    QString draftModel;
    if (auto chosen = model_draft_model(m_store, path); !chosen) {
        showError(tr("The draft model chosen for this model could not be read, so it loads without one: %1")
                      .arg(QString::fromStdString(chosen.error().message)));
    } else {
        draftModel = *chosen;
    }
    m_remoteTarget.reset();
    m_localThinkingSwitch = m_localReasoningEffort = false;  // until the new model says
    m_templateNote.clear();
    m_localEmbeddingOnly = false;
    m_draftModelName.clear();
    // Another model, or the same on other devices: what the banner said is over.
    dismissRecovery();
    m_modelState = ModelState::Loading;
    m_modelName = QFileInfo(path).completeBaseName();
    m_loadProgress = 0;
    emit modelChanged();
    emit loadProgressChanged();
    m_loadingDraft = draftModel;
    m_engine.load(path, options, recovery, draftModel);
}

// Switching conversations leaves their answers generating. The new chat has the settings
// saved for it before (pressing New chat again, or going to another conversation and back,
// loses none of them) until its first message creates it with them.
void ChatController::newConversation() {
    m_current = 0;
    m_currentTitle.clear();
    m_messages.setMessages({});
    m_systemPrompt = m_newSystemPrompt;
    readConversationSettings(m_newSettingsJson);
    emit currentConversationChanged();
    emit generatingChanged();
}

void ChatController::readConversationSettings(const std::string& json) {
    m_settingsJson = json;
    m_conversationSettings = parse_conversation_settings(json, m_defaults);
    emit conversationSettingsChanged();
}

void ChatController::setGenerationSettings(const powerhouse::GenerationSettings& settings) {
    m_defaults.generation = settings;
    m_defaults.seed.reset();
    readConversationSettings(m_settingsJson);
}

QVariantMap ChatController::withConversationSettings(const QVariantMap& sampling) const {
    QVariantMap all = conversation_settings_variant(m_conversationSettings);
    for (auto it = sampling.begin(); it != sampling.end(); ++it) all.insert(it.key(), it.value());
    return all;
}

bool ChatController::setConversationSettings(const QString& systemPrompt, const QVariantMap& sampling) {
    // The fields not given keep the conversation's values; they are checked against the app's
    // defaults (an emptied field is refused naming its default).
    auto parsed = conversation_settings_from_variant(withConversationSettings(sampling), m_defaults);
    if (!check(parsed)) return false;
    const std::string json = conversation_settings_json(*parsed);
    const QString prompt = systemPrompt.trimmed();
    // A conversation not created yet keeps them until its first message creates it.
    if (m_current != 0) {
        write([id = m_current, p = prompt.toStdString(), json](Store& store) {
            return store.set_conversation_settings(id, p, json);
        });
    } else {
        m_newSystemPrompt = prompt;
        m_newSettingsJson = json;
    }
    m_systemPrompt = prompt;
    readConversationSettings(json);
    return true;
}

void ChatController::resetConversationSettings() {
    setConversationSettings({}, conversation_settings_variant(m_defaults));
}

void ChatController::selectConversation(qint64 id) {
    if (id == m_current) return;
    flushWrites();
    auto conversation = m_store.conversation(id);
    auto messages = m_store.messages(id);
    if (!check(conversation) || !check(messages)) return;
    // An answer still streaming is stored once a second: show all that has come.
    if (const auto answer = m_answers.find(id); answer != m_answers.end()) {
        for (Message& m : *messages) {
            if (m.id != answer->second.messageId) continue;
            m.content = answer->second.text.toStdString();
            m.reasoning = answer->second.reasoning.toStdString();
        }
    }
    m_current = id;
    m_currentTitle = QString::fromStdString(conversation->title);
    m_messages.setMessages(std::move(messages).value());
    m_systemPrompt = QString::fromStdString(conversation->system_prompt);
    readConversationSettings(conversation->settings_json);
    emit currentConversationChanged();
    emit generatingChanged();
}

QString ChatController::cannotChatReason() const {
    if (m_remoteTarget || m_modelState != ModelState::Ready || !m_localEmbeddingOnly) return {};
    return tr("%1 is an embedding model: it makes embeddings for the API server's /v1/embeddings, not chat "
              "answers. To chat, load a chat model on the Models page.")
        .arg(m_localName);
}

bool ChatController::readyToAnswer() {
    if (const QString reason = cannotChatReason(); !reason.isEmpty()) {
        showError(reason);
        return false;
    }
    if (m_modelState == ModelState::Ready) return true;
    if (m_recovery == Recovery::Failed) return false;  // the banner says why, and what to do
    showError(m_modelState == ModelState::Loading ? tr("The model is still loading; send again when it is ready.")
                                                  : tr("No model is loaded: add one on the Models page."));
    return false;
}

bool ChatController::send(const QString& text) {
    const QString trimmed = text.trimmed();
    if (trimmed.isEmpty() || generating() || !readyToAnswer()) return false;
    if (m_current == 0) {
        // The first words of the first message name the conversation.
        QString title = trimmed.section(QLatin1Char('\n'), 0, 0).left(60);
        // Not between the two halves of a character outside the BMP (an emoji): alone, the
        // first half would be stored as "?".
        if (!title.isEmpty() && title.back().isHighSurrogate()) title.chop(1);
        // Its id is needed at once: made on the writer, waited for.
        auto created = writeNow([title = title.toStdString(), prompt = m_systemPrompt.toStdString(),
                                 json = m_settingsJson](Store& store) -> powerhouse::Result<Conversation> {
            auto made = store.create_conversation(title, prompt);
            if (!made || json.empty()) return made;
            if (auto set = store.set_conversation_settings(made->id, prompt, json); !set) return set.error();
            return made;
        });
        if (!check(created)) return false;
        // Made with them: the next new chat starts from the defaults again.
        m_newSystemPrompt.clear();
        m_newSettingsJson.clear();
        m_current = created->id;
        m_currentTitle = title;
        m_messages.setMessages({});
        emit currentConversationChanged();
    }
    return startAnswer(trimmed);
}

bool ChatController::startAnswer(const QString& userText, qint64 replaceFrom) {
    // One job on the writer: the user's message (stored before anything is generated: a
    // crash never loses what the user wrote), the conversation as stored after every write
    // before it, and the answer's message to stream into.
    struct Started {
        std::optional<Message> user;
        Conversation conversation;
        std::vector<Message> messages;
        Message answer;
    };
    auto started = writeNow(
        [id = m_current, text = userText.toStdString(), replaceFrom](Store& store) -> powerhouse::Result<Started> {
            Started s;
            if (!text.empty()) {
                auto user = replaceFrom != 0 ? store.replace_messages_from(replaceFrom, "user", text)
                                             : store.add_message(id, "user", text);
                if (!user) return user.error();
                s.user = std::move(user).value();
            }
            auto conversation = store.conversation(id);
            if (!conversation) return conversation.error();
            s.conversation = std::move(conversation).value();
            auto messages = store.messages(id);
            if (!messages) return messages.error();
            s.messages = std::move(messages).value();
            auto answer = store.add_message(id, "assistant", "", MessageState::streaming);
            if (!answer) return answer.error();
            s.answer = std::move(answer).value();
            return s;
        });
    if (!check(started)) return false;
    if (replaceFrom != 0) {
        if (const int row = m_messages.rowOf(replaceFrom); row >= 0) m_messages.removeFrom(row);
    }
    if (started->user) {
        m_messages.append(std::move(*started->user));
        m_conversations.reload();
    }
    powerhouse::GenerateCommand command;
    if (!started->conversation.system_prompt.empty())
        command.messages.push_back({"system", started->conversation.system_prompt});
    // The answers' content only: their reasoning is never sent back (the models' own templates
    // drop it from the history too), and an answer that was all thinking says nothing.
    for (const Message& m : started->messages) {
        if (m.role != "system" && !m.content.empty()) command.messages.push_back({m.role, m.content});
    }
    command.settings = m_conversationSettings.generation;
    // No seed given: a new one per answer, so that Regenerate says something new.
    command.settings.sampling.seed = m_conversationSettings.seed ? *m_conversationSettings.seed
                                                                 : QRandomGenerator::global()->generate64();
    // Speculative decoding by prompt lookup, when chosen in Settings: the same answer, written
    // a few tokens a step where it repeats the conversation.
    if (m_guessTokens) command.settings.lookup.max_draft = kGuessedTokens;
    command.overflow = powerhouse::ContextOverflow::drop_oldest;
    // The engine reads the answer in the model's format, so that a reasoning model's thinking
    // (a think block, gpt-oss's analysis channel) comes apart from the text instead of inside
    // it as markup. A remote server does that itself.
    command.read_answer = true;
    // The conversation's thinking and reasoning effort, kept whatever the model: a template
    // that does not read them ignores them.
    command.template_variables = conversation_template_variables(m_conversationSettings);
    const qint64 answerId = started->answer.id;
    m_messages.append(std::move(started->answer));
    const bool remote = m_remoteTarget.has_value();
    const quint64 request =
        remote ? m_remote.start(*m_remoteTarget, remote_chat_request(m_remoteTarget->model, std::move(command.messages),
                                                                     command.settings, command.template_variables))
               : m_engine.generate(std::move(command));
    m_answers[m_current] = Answer{request, remote, answerId, {}, {}, remote ? m_remoteTarget->url : QString()};
    m_conversations.setGenerating(m_current, true);
    if (!m_saveTimer.isActive()) m_saveTimer.start();
    emit generatingChanged();
    if (m_answerStarted) m_answerStarted(request);
    return true;
}

qint64 ChatController::conversationOf(quint64 request) const {
    for (const auto& [conversation, answer] : m_answers) {
        if (answer.request == request) return conversation;
    }
    return 0;
}

void ChatController::onTokens(quint64 request, const QString& text, const QString& reasoning) {
    const qint64 conversation = conversationOf(request);
    if (conversation == 0) return;
    Answer& answer = m_answers[conversation];
    // The thinking first: where both came in one frame, it was written before the text.
    answer.reasoning += reasoning;
    answer.text += text;
    if (conversation != m_current) return;
    m_messages.appendReasoning(answer.messageId, reasoning);
    m_messages.appendText(answer.messageId, text);
}

void ChatController::saveStreaming() {
    for (const auto& answer : m_answers) {
        write([id = answer.second.messageId, text = answer.second.text.toStdString(),
               reasoning = answer.second.reasoning.toStdString()](Store& store) {
            return store.update_message(id, text, reasoning);
        });
    }
}

void ChatController::finishAnswer(qint64 conversationId, QString text, QString reasoning, MessageState state,
                                  MessageStats stats, const QString& error) {
    const auto found = m_answers.find(conversationId);
    if (found == m_answers.end()) return;
    const Answer answer = std::move(found->second);
    m_answers.erase(found);
    if (m_answers.empty()) m_saveTimer.stop();
    m_conversations.setGenerating(conversationId, false);
    if (m_answerFinished) m_answerFinished(answer.request, stats);
    if (stats.energy_joules && stats.generated_tokens > 0 && stats.tokens_per_second > 0)
        emit answerMeasured(stats.generated_tokens, stats.tokens_per_second, *stats.energy_joules);
    // The view shows it as saved at once; the final save is queued after the streaming
    // saves before it (which it must not be overtaken by), and the list (newest activity
    // first) is read again once it has landed.
    if (const int row = conversationId == m_current ? m_messages.rowOf(answer.messageId) : -1; row >= 0) {
        Message shown = *m_messages.at(row);
        shown.content = text.toStdString();
        shown.reasoning = reasoning.toStdString();
        shown.state = state;
        shown.stats = stats;
        shown.error = error.toStdString();
        shown.updated_ms = QDateTime::currentMSecsSinceEpoch();
        m_messages.update(shown);
    }
    write([id = answer.messageId, text = text.toStdString(), reasoning = reasoning.toStdString(), state, stats,
           error = error.toStdString()](
              Store& store) { return store.finish_message(id, text, state, stats, error, reasoning); },
          [this] { m_conversations.reload(); });
    if (conversationId == m_current) {
        emit generatingChanged();
        emit templateSwitchesChanged();  // its last answer's model may be another
    }
    if (m_answers.empty()) emit idle();
}

void ChatController::abandonAnswer(qint64 conversationId) {
    const auto found = m_answers.find(conversationId);
    if (found == m_answers.end()) return;
    cancelRequest(found->second);
    finishAnswer(conversationId, found->second.text, found->second.reasoning, MessageState::stopped, {}, {});
}

void ChatController::onFinished(quint64 request, const QString& text, const QVariantMap& stats,
                                const QString& reasoning) {
    const qint64 conversation = conversationOf(request);
    if (conversation == 0) return;
    // The end's reasoning is the whole of it; an end that carries none keeps what streamed
    // rather than lose it.
    const QString thought = reasoning.isEmpty() ? m_answers[conversation].reasoning : reasoning;
    MessageStats s;
    s.model = stats.contains("model") ? stats.value("model").toString().toStdString() : m_localName.toStdString();
    s.engine = stats.contains("engine") ? stats.value("engine").toString().toStdString() : std::string("local");
    s.prompt_tokens = stats.value("promptTokens").toLongLong();
    s.reused_tokens = stats.value("reusedTokens").toLongLong();
    s.generated_tokens = stats.value("generatedTokens").toLongLong();
    s.ttft_ms = stats.value("ttftMs").toDouble();
    s.tokens_per_second = stats.value("tokensPerSecond").toDouble();
    s.drafted_tokens = stats.value("draftedTokens").toLongLong();
    s.accepted_tokens = stats.value("acceptedTokens").toLongLong();
    for (const QVariant& v : stats.value("recoveries").toList()) {
        const QVariantMap note = v.toMap();
        s.recoveries.push_back({note.value("atToken").toLongLong(), note.value("failed").toString().toStdString(),
                                note.value("cause").toString().toStdString(),
                                note.value("continuedOn").toString().toStdString()});
    }
    const QString reason = stats.value("stopReason").toString();
    if (reason == QLatin1String("interrupted")) {
        // A remote stream that broke: the text so far is kept, and why it broke.
        const QString why = stats.value("interruption").toString();
        finishAnswer(conversation, text, thought, MessageState::interrupted, s, why);
        showError(tr("The answer was cut off: %1").arg(why));
        return;
    }
    const bool stopped = reason == QLatin1String("cancelled");
    finishAnswer(conversation, text, thought, stopped ? MessageState::stopped : MessageState::complete, s, {});
    // All thinking and no answer: without a word the view would show only the folded thoughts.
    if (reason == QLatin1String("length") && text.trimmed().isEmpty() && !thought.isEmpty()) {
        showError(
            tr("The token limit came while the model was still thinking, before its answer: raise Max "
               "tokens in the conversation's settings and regenerate."));
    }
}

void ChatController::onFailed(quint64 request, const QString& message) {
    const qint64 conversation = conversationOf(request);
    if (conversation == 0) return;
    const Answer& answer = m_answers[conversation];
    const QString endpoint = answer.remote ? answer.endpoint : QString();
    finishAnswer(conversation, answer.text, answer.reasoning, MessageState::failed, {}, message);
    if (!endpoint.isEmpty()) emit remoteAnswerFailed(endpoint, message);
    // A device failure the banner explains is not said twice.
    if (!m_explained.remove(request)) showError(message);
}

void ChatController::stop() {
    const auto answer = m_answers.find(m_current);
    if (answer != m_answers.end()) cancelRequest(answer->second);
}

void ChatController::cancelRequest(const Answer& answer) {
    if (answer.remote) {
        m_remote.cancel(answer.request);
    } else {
        m_engine.cancel(answer.request);
    }
}

void ChatController::regenerate() {
    // Without a model to answer, the answer there is kept rather than replaced by an error.
    if (generating() || m_current == 0 || !readyToAnswer()) return;
    // Drop the last answer (and anything after the last user message), then answer again.
    int lastUser = -1;
    for (int row = m_messages.rowCount() - 1; row >= 0; --row) {
        if (m_messages.at(row)->role == "user") {
            lastUser = row;
            break;
        }
    }
    if (lastUser < 0) return;
    // On the writer, before the answer's own job, which reads the conversation after it.
    if (!check(writeNow([id = m_messages.at(lastUser)->id](Store& store) { return store.delete_messages_after(id); })))
        return;
    m_messages.removeFrom(lastUser + 1);
    startAnswer();
}

bool ChatController::editAndResend(qint64 messageId, const QString& text) {
    const int row = m_messages.rowOf(messageId);
    if (row < 0 || m_messages.at(row)->role != "user" || text.trimmed().isEmpty()) return false;
    // Checked before anything is deleted: send would refuse once the messages were gone.
    if (!readyToAnswer()) return false;
    abandonAnswer(m_current);
    // The edited message replaces the original and everything after it, in one write with
    // storing it: refused, both the original and its answer are still there.
    return startAnswer(text.trimmed(), messageId);
}

void ChatController::deleteMessage(qint64 messageId) {
    if (generating()) return;
    const int row = m_messages.rowOf(messageId);
    if (row < 0) return;
    auto rest = writeNow([messageId, id = m_current](Store& store) -> powerhouse::Result<std::vector<Message>> {
        if (auto deleted = store.delete_message(messageId); !deleted) return deleted.error();
        return store.messages(id);
    });
    if (check(rest)) m_messages.setMessages(std::move(rest).value());
}

void ChatController::renameConversation(qint64 id, const QString& title) {
    const QString trimmed = title.trimmed();
    if (trimmed.isEmpty()) return;
    // The window shows the title once it is stored: refused (another program holds the file),
    // the conversation keeps its title in the window as in the list and the store, and the
    // error line says why.
    write([id, title = trimmed.toStdString()](Store& store) { return store.rename_conversation(id, title); },
          [this, id, trimmed] {
              m_conversations.reload();
              if (id == m_current && m_currentTitle != trimmed) {
                  m_currentTitle = trimmed;
                  emit currentConversationChanged();
              }
          });
}

void ChatController::deleteConversation(qint64 id) {
    // Its answer stops here and is kept as it stands, for undo.
    abandonAnswer(id);
    // The list, the open conversation and Undo follow the store, so each write is waited for
    // (a user's click, rare): refused (another program holds the file), the conversation
    // stays where it was, and the error line says why. The previous deletion can no longer
    // be undone: purged first; refused, it can still be brought back and nothing is deleted.
    if (m_deleted != 0) {
        if (!check(writeNow([](Store& store) -> powerhouse::Result<void> {
                if (auto purged = store.purge_deleted(); !purged) return purged.error();
                return {};
            })))
            return;
        m_deleted = 0;
        emit canUndoDeleteChanged();
    }
    if (!check(writeNow([id](Store& store) { return store.delete_conversation(id); }))) return;
    m_deleted = id;
    emit canUndoDeleteChanged();
    m_conversations.remove(id);
    if (id == m_current) newConversation();
}

void ChatController::undoDelete() {
    if (m_deleted == 0) return;
    const qint64 id = std::exchange(m_deleted, 0);
    emit canUndoDeleteChanged();
    if (!check(writeNow([id](Store& store) { return store.restore_conversation(id); }))) return;
    m_conversations.reload();
    selectConversation(id);
}
