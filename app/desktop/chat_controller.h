// What the chat window does: the open conversation, sending and streaming answers, stop,
// regenerate, edit-and-resend, and the conversation list (new, rename, delete with undo,
// search). It keeps the store and the view in step: the user's message is stored before
// generation starts, the answer is saved every second while it streams, and saved for good
// when it ends, is stopped or fails.
//
// A reasoning model's thinking comes apart from its answer (the engine reads local answers in
// the model's own format, GenerateCommand::read_answer; remote servers send it apart): it is
// streamed, saved and shown beside the text (Message::reasoning, the view's `reasoning` role)
// and never sent back to the model, whose history is the answers' content alone, as the
// models' own chat templates keep it.
//
// Each conversation may have an answer generating (the engine runs them together), whether
// it is open or not: switching away leaves it streaming into its stored message, and
// switching back shows what has come so far. `generating`, Stop, Regenerate and
// edit-and-resend concern the open conversation only; deleting a conversation stops its
// answer.
//
// When a device fails under the model (EngineClient::recovery), the answers under way go on
// streaming into the same messages, and a banner says what happened: while the model is
// loaded again, once it answers again (where, and how fast), or why it cannot, with the way
// to other devices (Settings). The banner is the window's, not a conversation's: it stays
// while conversations are switched, until it is dismissed or another model is loaded. Each
// answer that went on elsewhere is stored with where (MessageStats::recoveries).
//
// Its writes to the store (new conversations and messages, the streaming and final saves,
// rename, delete and undo, edits, regenerations, a conversation's settings) run on the
// store's writer thread (store/writer.h), in the order made, so an fsync never holds up a
// frame: a final save lands after the streaming saves before it, a delete after the writes
// before it. How reads still see them:
//  - The GUI keeps its own state where it has it: the message list and the title change at
//    once, and the conversation list is read again when the write has landed (a queued call
//    back here), so those writes are not waited for.
//  - A write whose result the GUI needs (the id of a new conversation or message; the user's
//    message, which must be stored before the answer starts) waits for its own job
//    (StoreWriter::call): once per message sent, on the writer all the same.
//  - Every read of the store here and in the conversation list first waits for the writer
//    to drain (flushWrites), so it never misses a write made before it.
// A failed write is shown above the chat (errorText) as before, with the store's words.
// Destroying the controller saves the answers still streaming and drains the writer, so
// quitting loses nothing (the next open marks them interrupted). Without a writer (it could
// not be opened) the writes are made here, as they were.
//
// Thread-safety: GUI thread only.
#pragma once

#include <QObject>
#include <QSet>
#include <QString>
#include <QTimer>
#include <QVariantMap>
#include <QtQml/qqmlregistration.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "conversation_list_model.h"
#include "conversation_settings.h"
#include "engine_client.h"
#include "message_list_model.h"
#include "remote_chat.h"
#include "store/store.h"
#include "store/writer.h"

class ChatController : public QObject {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("made by main.cpp")
    Q_PROPERTY(ConversationListModel* conversations READ conversations CONSTANT)
    Q_PROPERTY(MessageListModel* messages READ messages CONSTANT)
    Q_PROPERTY(qint64 currentConversationId READ currentConversationId NOTIFY currentConversationChanged)
    Q_PROPERTY(QString currentTitle READ currentTitle NOTIFY currentConversationChanged)
    Q_PROPERTY(bool generating READ generating NOTIFY generatingChanged)  // the open conversation
    Q_PROPERTY(ModelState modelState READ modelState NOTIFY modelChanged)
    Q_PROPERTY(QString modelName READ modelName NOTIFY modelChanged)
    Q_PROPERTY(QString modelDevice READ modelDevice NOTIFY modelChanged)
    Q_PROPERTY(double loadProgress READ loadProgress NOTIFY loadProgressChanged)
    Q_PROPERTY(QString loadStage READ loadStage NOTIFY loadProgressChanged)
    Q_PROPERTY(QString errorText READ errorText NOTIFY errorTextChanged)
    Q_PROPERTY(bool canUndoDelete READ canUndoDelete NOTIFY canUndoDeleteChanged)
    // The open conversation's system prompt and sampling settings (conversation_settings.h),
    // or those a new conversation will start with.
    Q_PROPERTY(QString systemPrompt READ systemPrompt NOTIFY conversationSettingsChanged)
    Q_PROPERTY(QVariantMap sampling READ sampling NOTIFY conversationSettingsChanged)
    // Which of the chat template's switches the settings offer: thinking (enable_thinking) and
    // reasoning effort, as the template of the conversation's model reads them
    // (ModelSummary::has_thinking_switch, has_reasoning_effort). The conversation's model is
    // the one that wrote its last answer; where it has none, or it is the model answering
    // now, the model answering now. A local model's switches are known once it has been
    // loaded (kept in the app setting `template_switches` by display name); what a remote
    // server's template reads is unknown: both are offered, and a model that reads neither
    // ignores them. templateSwitchesNote says that, or why neither is offered, and says so
    // when the switches shown are not those of the model that answers next.
    Q_PROPERTY(bool thinkingSwitch READ thinkingSwitch NOTIFY templateSwitchesChanged)
    Q_PROPERTY(bool reasoningEffortChoice READ reasoningEffortChoice NOTIFY templateSwitchesChanged)
    Q_PROPERTY(QString templateSwitchesNote READ templateSwitchesNote NOTIFY templateSwitchesChanged)
    // Why the loaded model chats with another template than its own (ModelSummary::
    // template_note: one chosen on the Models page, or a built-in one); "" when its own.
    Q_PROPERTY(QString templateNote READ templateNote NOTIFY modelChanged)
    // The draft model the loaded model was loaded with (the Models page: "Draft model"), by
    // its display name; "" for none, while a remote model answers, and after a device failure
    // (the engine goes on without it).
    Q_PROPERTY(QString draftModelName READ draftModelName NOTIFY modelChanged)
    // Why the loaded model cannot chat: it is an embedding model (ModelInfo::embedding_only),
    // loaded for the API server's /v1/embeddings. The chat view says it, the composer's send
    // is disabled with it, and send() refuses with it; "" when the model can chat (or a
    // remote model answers, or none is ready).
    Q_PROPERTY(QString cannotChatReason READ cannotChatReason NOTIFY modelChanged)

    // The device-failure banner: what it says, and its kind (None: not shown).
    Q_PROPERTY(Recovery recovery READ recovery NOTIFY recoveryChanged)
    Q_PROPERTY(QString recoveryText READ recoveryText NOTIFY recoveryChanged)
    // What the user has written in the composer and not sent yet. It is kept in the store
    // (the app setting `composer_draft`, saved a moment after the last change and when the
    // controller goes), so that quitting the app does not lose it.
    Q_PROPERTY(QString draft READ draft WRITE setDraft NOTIFY draftChanged)

public:
    ChatController(powerhouse::store::Store& store, EngineClient& engine, QObject* parent = nullptr);
    ~ChatController() override;

    ConversationListModel* conversations() { return &m_conversations; }
    MessageListModel* messages() { return &m_messages; }
    qint64 currentConversationId() const { return m_current; }
    QString currentTitle() const { return m_currentTitle; }
    bool generating() const { return m_answers.contains(m_current); }
    // Whether any conversation is generating.
    bool generatingAny() const { return !m_answers.empty(); }
    bool generatingIn(qint64 conversationId) const { return m_answers.contains(conversationId); }
    // Whether a model can answer: none loaded, loading, ready (a local model or a remote
    // engine's), or the last load failed. QML reads them as ChatController.Ready, ...
    enum class ModelState { None, Loading, Ready, Failed };
    Q_ENUM(ModelState)
    ModelState modelState() const { return m_modelState; }
    // The device-failure banner: the model is being loaded again (Reloading), answers again
    // elsewhere (Recovered), or could not go on (Failed: it gave up, or the policy stopped
    // the answers). QML reads them as ChatController.Reloading, ...
    enum class Recovery { None, Reloading, Recovered, Failed };
    Q_ENUM(Recovery)
    Recovery recovery() const { return m_recovery; }
    QString recoveryText() const { return m_recoveryText; }
    QString modelName() const { return m_modelName; }
    QString modelDevice() const { return m_modelDevice; }
    double loadProgress() const { return m_loadProgress; }
    QString loadStage() const { return m_loadStage; }
    QString errorText() const { return m_errorText; }
    bool canUndoDelete() const { return m_deleted != 0; }
    QString systemPrompt() const { return m_systemPrompt; }
    QVariantMap sampling() const { return conversation_settings_variant(m_conversationSettings); }
    bool thinkingSwitch() const { return templateOffer().thinking; }
    bool reasoningEffortChoice() const { return templateOffer().effort; }
    QString templateSwitchesNote() const { return templateOffer().note; }
    QString templateNote() const { return m_remoteTarget ? QString() : m_templateNote; }
    QString cannotChatReason() const;
    QString draftModelName() const { return m_remoteTarget ? QString() : m_draftModelName; }
    // Speculative decoding by prompt lookup (SettingsController::guessTokens): each answer
    // sent from now on guesses up to kGuessedTokens tokens a step from the conversation itself
    // (GenerationSettings::lookup.max_draft). Off by default.
    static constexpr uint32_t kGuessedTokens = 8;
    bool guessTokens() const { return m_guessTokens; }
    void setGuessTokens(bool on) { m_guessTokens = on; }
    QString draft() const { return m_draft; }
    void setDraft(const QString& text);

    // Without options.chat_template, the one chosen for the model (model_templates.h), if any;
    // with the draft model chosen for it (model_draft_model), if any.
    void loadModel(const QString& path, powerhouse::ModelOptions options,
                   powerhouse::RecoveryPolicy recovery = powerhouse::RecoveryPolicy::replan);
    // The next answers go to this remote engine's model (Settings → Engines, the model bar),
    // through RemoteChat, until a local model is loaded. The model bar then names the model
    // and the endpoint; a local model stays loaded meanwhile.
    void useRemote(const RemoteTarget& target);
    bool usingRemote() const { return m_remoteTarget.has_value(); }
    // Told when each answer starts and ends, by its request id (answers overlap); the end
    // fills in what was measured of it: the energy it used, whether the GPUs were slowed
    // meanwhile (MessageStats::energy_joules, throttle). DesktopApp connects the dashboard's
    // energy meter and throttling summary here.
    void setAnswerObserver(std::function<void(quint64)> started,
                           std::function<void(quint64, powerhouse::store::MessageStats&)> finished) {
        m_answerStarted = std::move(started);
        m_answerFinished = std::move(finished);
    }
    // What answers are generated with where a conversation does not say otherwise (default:
    // up to 1024 tokens, the sampler's defaults, a random seed per answer).
    void setGenerationSettings(const powerhouse::GenerationSettings& settings);

    Q_INVOKABLE void newConversation();
    Q_INVOKABLE void selectConversation(qint64 id);
    // Starts the answer to `text` in the open conversation (a new one if none is open).
    // False when it could not (nothing to send, an answer already running, no model ready,
    // a failed save: the reason is shown), so that the composer keeps the words.
    Q_INVOKABLE bool send(const QString& text);
    Q_INVOKABLE void stop();
    Q_INVOKABLE void regenerate();
    // Replaces a message of the user's, and all after it, with `text`, and answers it. False
    // when it could not (no model ready: the reason is shown, and nothing is changed).
    Q_INVOKABLE bool editAndResend(qint64 messageId, const QString& text);
    Q_INVOKABLE void deleteMessage(qint64 messageId);
    Q_INVOKABLE void renameConversation(qint64 id, const QString& title);
    Q_INVOKABLE void deleteConversation(qint64 id);
    Q_INVOKABLE void undoDelete();
    Q_INVOKABLE void dismissError();
    Q_INVOKABLE void dismissRecovery();
    // Sets the open conversation's system prompt and the sampling fields given (keys as
    // `sampling`); the fields not given keep their values. False, with the reason shown, if a
    // value is out of range (then nothing changes).
    Q_INVOKABLE bool setConversationSettings(const QString& systemPrompt, const QVariantMap& sampling);
    // What the settings dialog shows beside a field before it saves: {field, message} for a
    // value setConversationSettings would refuse (conversation_settings_problem), empty if
    // none. Nothing is shown above the chat.
    Q_INVOKABLE QVariantMap conversationSettingsProblem(const QVariantMap& sampling) const {
        return conversation_settings_problem(withConversationSettings(sampling), m_defaults);
    }
    // Every field back to the app's defaults, and no system prompt.
    Q_INVOKABLE void resetConversationSettings();
    void showError(const QString& message);
    // Waits until every write made so far is in the database (before a read elsewhere, and
    // for tests).
    void flushWrites();

signals:
    void currentConversationChanged();
    void generatingChanged();
    void modelChanged();
    void loadProgressChanged();
    void errorTextChanged();
    void canUndoDeleteChanged();
    // The window became idle: nothing loading or generating (for --screenshot and tests).
    void idle();
    void conversationSettingsChanged();
    void templateSwitchesChanged();
    void recoveryChanged();
    void draftChanged();
    // A remote answer could not be had from the endpoint at `url` (RemoteChat::failed: it
    // could not be reached, refused the key, ...): DesktopApp marks the endpoint's row.
    void remoteAnswerFailed(const QString& url, const QString& message);
    // An answer ended whose energy the dashboard measured (the Costs view's figures).
    void answerMeasured(qint64 tokens, double tokensPerSecond, double joules);

private:
    // An answer being generated, in the conversation that maps to it.
    struct Answer {
        quint64 request = 0;    // the engine's request id (RemoteChat's for a remote answer)
        bool remote = false;    // answered by RemoteChat
        qint64 messageId = 0;   // the stored message it streams into
        QString text;           // what has streamed so far
        QString reasoning;      // the model's thinking so far, apart from the text
        QString endpoint;       // a remote answer's endpoint (its base URL)
    };

    std::function<void(quint64)> m_answerStarted;
    std::function<void(quint64, powerhouse::store::MessageStats&)> m_answerFinished;
    // Starts the answer to the open conversation as stored (its last message is the user's),
    // after storing `userText` as its new last message if it is not empty; with `replaceFrom`,
    // in place of that message and all after it (edit and resend), in the same write.
    // False, with the reason shown, if it could not be started.
    bool startAnswer(const QString& userText = {}, qint64 replaceFrom = 0);
    // Whether a model can answer now; if not, shows why (once the banner does not say it).
    bool readyToAnswer();
    void onTokens(quint64 request, const QString& text, const QString& reasoning);
    void onFinished(quint64 request, const QString& text, const QVariantMap& stats, const QString& reasoning);
    void onFailed(quint64 request, const QString& message);
    void onRecovery(const EngineRecovery& recovery);
    void setRecovery(Recovery state, const QString& text);
    void saveStreaming();
    void cancelRequest(const Answer& answer);
    // The conversation whose answer a request is, or 0.
    qint64 conversationOf(quint64 request) const;
    // Ends a conversation's answer: stores it for good, and shows it if it is open.
    void finishAnswer(qint64 conversationId, QString text, QString reasoning, powerhouse::store::MessageState state,
                      powerhouse::store::MessageStats stats, const QString& error);
    // Cancels a conversation's answer and stores it at once as stopped, with what has come:
    // its messages are about to change, so the engine's last word on it is not waited for.
    void abandonAnswer(qint64 conversationId);
    template <class T>
    bool check(const powerhouse::Result<T>& result);
    // Shows the first error of the writer's failed saves, if any.
    void reportWriteErrors(const std::vector<powerhouse::Error>& errors);
    // Queues a write on the writer, after those before it, and does not wait; `then` runs
    // here once it succeeded, a failure is shown.
    void write(powerhouse::store::StoreWriter::Job job, std::function<void()> then = {});
    // Runs a write on the writer, after those before it, and waits for its result.
    template <class Job>
    auto writeNow(Job job) -> decltype(job(std::declval<powerhouse::store::Store&>()));

    powerhouse::store::Store& m_store;
    EngineClient& m_engine;
    RemoteChat m_remote;
    std::optional<RemoteTarget> m_remoteTarget;
    QString m_localName;  // the local model last loaded (stored with its answers)
    bool m_localThinkingSwitch = false;   // its template reads enable_thinking
    bool m_localReasoningEffort = false;  // ... reasoning_effort
    QString m_templateNote;               // its summary's template_note
    bool m_localEmbeddingOnly = false;    // it makes embeddings, not text (cannotChatReason)
    QString m_draftModelName;             // the draft model it was loaded with ("": none)
    QString m_loadingDraft;               // the draft model of the load under way ("": none)
    bool m_guessTokens = false;
    // What a chat template reads of the conversation's switches.
    struct TemplateSwitches {
        bool thinking = false;
        bool effort = false;
        bool operator==(const TemplateSwitches&) const = default;
    };
    // Those of the local models loaded so far, by display name (as their answers' stats name
    // them), kept in the store across starts.
    std::map<QString, TemplateSwitches> m_knownSwitches;
    void rememberSwitches(const QString& model, TemplateSwitches switches);
    // What the settings dialog offers, and the line under it.
    struct TemplateOffer {
        bool thinking = false;
        bool effort = false;
        QString note;
    };
    TemplateOffer templateOffer() const;
    ConversationListModel m_conversations;
    MessageListModel m_messages;
    qint64 m_current = 0;
    QString m_currentTitle;
    ModelState m_modelState = ModelState::None;
    QString m_modelName;
    QString m_modelDevice;
    double m_loadProgress = 0;
    QString m_loadStage;
    QString m_errorText;
    Recovery m_recovery = Recovery::None;
    QString m_recoveryText;
    // Requests whose failure the banner explains (a recovery gave up or was stopped): their
    // error is kept with their message, not shown a second time above the chat.
    QSet<quint64> m_explained;
    qint64 m_deleted = 0;      // the conversation that undo would restore
    std::map<qint64, Answer> m_answers;  // by conversation id: those generating
    QTimer m_saveTimer;                  // saves the streaming answers every second
    QString m_draft;                     // the composer's unsent text
    QTimer m_draftTimer;                 // saves it once the typing pauses
    void saveDraft();
    // Every write runs on the store's writer thread, in order (without one, here).
    std::unique_ptr<powerhouse::store::StoreWriter> m_writer;
    ConversationSettings m_defaults;              // where a conversation says nothing
    ConversationSettings m_conversationSettings;  // the open conversation's (or the next new one's)
    std::string m_settingsJson;                   // ... as stored
    QString m_systemPrompt;
    // Those saved for the new chat before its first message (it is not stored yet): kept
    // across New chat and switching conversations, given to it when it is created.
    QString m_newSystemPrompt;
    std::string m_newSettingsJson;
    void readConversationSettings(const std::string& json);
    // The open conversation's settings (as `sampling`) with the fields of `sampling` over them.
    QVariantMap withConversationSettings(const QVariantMap& sampling) const;
};
