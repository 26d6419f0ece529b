#include "powerhouse/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "powerhouse/scheduler.h"
#include "runtime/answer_reader.h"

namespace powerhouse {

namespace {

template <class... F>
struct Overloaded : F... {
    using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

const char* recovery_policy_name(RecoveryPolicy policy) {
    switch (policy) {
        case RecoveryPolicy::replan: return "replan";
        case RecoveryPolicy::retry: return "retry";
        case RecoveryPolicy::stop: return "stop";
    }
    return "?";
}

struct Engine::State {
    // Commands, guarded by `mutex`.
    std::mutex mutex;
    std::condition_variable command_ready;
    std::deque<std::pair<uint64_t, EngineCommand>> commands;  // with their sequence numbers
    uint64_t next_seq = 1;
    uint64_t cancel_all_through = 0;      // generates submitted up to this sequence are cancelled
    bool cancel_all = false;              // a cancel of everything not yet passed to the scheduler
    std::set<uint64_t> cancels;           // request ids to cancel, not yet passed on
    bool loading = false;
    bool stopping = false;
    std::function<void()> notify;

    // Read by a load in progress.
    std::atomic<bool> cancel_load{false};

    // Events, guarded by `event_mutex`.
    std::mutex event_mutex;
    std::condition_variable event_ready;
    std::deque<EngineEvent> events;

    // Touched by the engine thread only.
    std::optional<Model> model;
    std::optional<Model> draft;            // LoadCommand::draft_model; reset after the scheduler
    std::unique_ptr<Scheduler> scheduler;  // uses `model` and `draft`: reset first
    std::set<uint64_t> cancelled_ids;      // cancels of ids that were not running: for a later generate
    std::map<uint64_t, DoneEvent> started; // requests in the scheduler: what the DoneEvent carries
    // Embeddings asked for, in order: the first is under way (an input at a time between the
    // scheduler's steps), the rest wait for it.
    struct PendingEmbed {
        EmbedCommand command;
        EmbeddingsEvent done;  // the vectors of the inputs embedded so far
    };
    std::deque<PendingEmbed> embeds;
    std::optional<LoadCommand> loaded_from;  // how the model was loaded: recovery loads it again
    std::vector<std::string> failed_gpus;    // set aside for the rest of the session
    int retries = 0;                         // reloads on the same devices since the LoadCommand
    SchedulerStats last_stats;
    std::chrono::steady_clock::time_point last_stats_time;
    std::thread thread;

    void emit(EngineEvent event);
    void run();
    void apply_cancels();
    void stop_generations();
    void load(const LoadCommand& command);
    // Model::load with LoadProgressEvents, stopped by a cancel-all, a newer load or an unload.
    Result<Model> load_model(const std::filesystem::path& path, const ModelOptions& options);
    Result<Model> load_draft(const LoadCommand& command);
    void start_scheduler();
    // After a step failed with ErrorCode::device_failed: the RecoveryPolicy.
    void recover(const Error& error);
    void device_failed(const DeviceFailedCommand& command);
    // Keeps a failed GPU out of every later load of this session (not a CPU device's name).
    void set_aside(const std::string& uuid);
    void unload();
    void generate(const GenerateCommand& command, uint64_t seq);
    Result<void> start_generation(const GenerateCommand& command, DoneEvent& done);
    void report_stats(bool force);
    // Runs the embeddings that can run now (a sequence is free), in order.
    void run_embeds();
    Result<bool> embed_next(PendingEmbed& pending);
};

void Engine::State::emit(EngineEvent event) {
    {
        const std::lock_guard lock(event_mutex);
        events.push_back(std::move(event));
    }
    event_ready.notify_all();
    std::function<void()> callback;
    {
        const std::lock_guard lock(mutex);
        callback = notify;
    }
    if (callback) callback();
}

// The engine thread: commands in order; between them, while generations run, one step of
// the scheduler at a time, so that a new request joins the running ones at the next step.
void Engine::State::run() {
    for (;;) {
        std::deque<std::pair<uint64_t, EngineCommand>> batch;
        {
            std::unique_lock lock(mutex);
            const bool busy = (scheduler != nullptr && !scheduler->idle()) || !embeds.empty();
            if (!busy) {
                command_ready.wait(lock,
                                   [&] { return stopping || !commands.empty() || cancel_all || !cancels.empty(); });
            }
            if (stopping) break;
            batch.swap(commands);
        }
        apply_cancels();
        for (auto& [seq, command] : batch) {
            std::visit(Overloaded{
                           [&](const LoadCommand& c) { load(c); },
                           [&](const UnloadCommand&) { unload(); },
                           [&, seq = seq](const GenerateCommand& c) { generate(c, seq); },
                           [&](const CancelCommand&) {},  // acted on in submit() and apply_cancels()
                           [&](const DeviceFailedCommand& c) { device_failed(c); },
                           [&](const EmbedCommand& c) {
                               embeds.push_back(PendingEmbed{c, EmbeddingsEvent{c.request_id, {}, 0}});
                               run_embeds();
                           },
                       },
                       command);
            apply_cancels();
        }
        run_embeds();
        if (scheduler != nullptr && !scheduler->idle()) {
            // A failure is the requests' error event, sent by their callbacks, unless the
            // recovery policy keeps them (SchedulerOptions::hold_on_device_failure).
            const Result<void> stepped = scheduler->step();
            if (!stepped && stepped.error().code == ErrorCode::device_failed && !scheduler->idle()) {
                recover(stepped.error());
            }
            if (scheduler != nullptr) report_stats(scheduler->idle());
        }
    }
    scheduler.reset();
    draft.reset();
    model.reset();  // free the models on the thread that used them
}

// Cancels asked since the last look: passed to the scheduler, or kept for a later generate.
void Engine::State::apply_cancels() {
    bool all = false;
    std::set<uint64_t> ids;
    {
        const std::lock_guard lock(mutex);
        all = std::exchange(cancel_all, false);
        ids.swap(cancels);
    }
    if (all && scheduler != nullptr) scheduler->cancel_all();
    for (uint64_t id : ids) {
        if (scheduler == nullptr || !scheduler->cancel(id)) cancelled_ids.insert(id);
    }
    // End them now, so that their DoneEvents come before those of requests still in this
    // batch of commands that a cancel-all also ends (in the order they were submitted).
    if (scheduler != nullptr && (all || !ids.empty())) {
        scheduler->end_cancelled();
        report_stats(scheduler->idle());  // no step may follow to report that they ended
    }
}

// Ends every generation (each with its DoneEvent, StopReason::cancelled) before the model goes.
void Engine::State::stop_generations() {
    if (scheduler == nullptr) return;
    scheduler->cancel_all();
    while (!scheduler->idle()) (void)scheduler->step();
    report_stats(true);
    scheduler.reset();
}

void Engine::State::report_stats(bool force) {
    if (scheduler == nullptr) return;
    const auto now = std::chrono::steady_clock::now();
    const SchedulerStats st = scheduler->stats();
    const bool changed = st.running != last_stats.running || st.waiting != last_stats.waiting;
    if (!force && !changed && now - last_stats_time < std::chrono::milliseconds(500)) return;
    last_stats = st;
    last_stats_time = now;
    emit(SchedulerEvent{st});
}

Result<Model> Engine::State::load_model(const std::filesystem::path& path, const ModelOptions& options) {
    {
        const std::lock_guard lock(mutex);
        loading = true;  // a cancel, a newer load or an unload stops this one
        cancel_load = false;
    }
    float last = -1.0f;
    std::string last_stage;
    Result<Model> loaded = Model::load(path, options, [&](float fraction, std::string_view stage) {
        // Enough for a progress bar: every 1% and every change of stage.
        if (fraction - last >= 0.01f || fraction >= 1.0f || stage != last_stage) {
            last = fraction;
            last_stage = stage;
            emit(LoadProgressEvent{path, fraction, std::string(stage)});
        }
        return !cancel_load.load(std::memory_order_relaxed);
    });
    {
        const std::lock_guard lock(mutex);
        loading = false;
    }
    return loaded;
}

void Engine::State::start_scheduler() {
    SchedulerOptions options;
    options.hold_on_device_failure = loaded_from && loaded_from->recovery != RecoveryPolicy::stop;
    if (loaded_from) options.guesses = loaded_from->guesses;
    scheduler = std::make_unique<Scheduler>(*model, options);
    if (draft) scheduler->set_draft(&*draft, loaded_from ? loaded_from->draft_tokens : 0);
}

void Engine::State::load(const LoadCommand& command) {
    stop_generations();
    run_embeds();  // those asked before the load, on the model they were asked of
    draft.reset();
    model.reset();  // never two models in memory at once
    loaded_from.reset();
    const auto start = std::chrono::steady_clock::now();
    LoadCommand effective = command;
    // GPUs that failed in this session stay aside (ModelOptions::excluded_gpus).
    for (const std::string& uuid : failed_gpus) effective.options.excluded_gpus.push_back(uuid);
    Result<Model> loaded = load_model(effective.path, effective.options);
    if (!loaded) {
        emit(ErrorEvent{0, loaded.error()});
        return;
    }
    model.emplace(std::move(loaded).value());
    if (!effective.draft_model.empty()) {
        Result<Model> drafting = load_draft(effective);
        if (!drafting) {
            model.reset();
            emit(ErrorEvent{0, drafting.error()});
            return;
        }
        draft.emplace(std::move(drafting).value());
    }
    loaded_from = std::move(effective);
    retries = 0;
    start_scheduler();
    LoadedEvent loaded_event{
        model->summary(), std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), {}};
    if (draft) loaded_event.draft = draft->summary();
    emit(std::move(loaded_event));
}

// The draft model on the model's devices, unsplit, and only if it writes the same tokens.
Result<Model> Engine::State::load_draft(const LoadCommand& command) {
    ModelOptions options = command.options;
    options.split = SplitMode::single;
    options.chat_template.reset();  // the model's: the draft never renders a prompt
    options.kv_cache_tokens = 0;
    Result<Model> loaded = load_model(command.draft_model, options);
    if (!loaded) {
        return make_error(loaded.error().code,
                          fmt::format("the draft model {}: {}", command.draft_model.string(), loaded.error().message));
    }
    const Tokenizer& ours = model->tokenizer();
    const Tokenizer& theirs = loaded->tokenizer();
    const uint32_t common = std::min(model->summary().n_vocab, loaded->summary().n_vocab);
    for (uint32_t id = 0; id < common; ++id) {
        const std::string a = ours.token_piece(static_cast<TokenId>(id), true);
        const std::string b = theirs.token_piece(static_cast<TokenId>(id), true);
        if (a == b) continue;
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("the draft model {} cannot guess for {}: their vocabularies differ (token {} is "
                                      "'{}' in the draft, '{}' in the model); use a smaller model of the same family",
                                      command.draft_model.filename().string(), model->summary().name, id, b, a));
    }
    return loaded;
}

namespace {

// The options for the devices left after `removed` (the index among the named devices):
// the user's ratios and main device follow, and a test's injected fault stays with the
// device it was on.
void drop_device(ModelOptions& options, int removed) {
    const auto r = static_cast<size_t>(removed);
    if (r < options.ratios.size()) options.ratios.erase(options.ratios.begin() + removed);
    if (options.main_device == r) {
        options.main_device = 0;
    } else if (options.main_device > r) {
        --options.main_device;
    }
    if (options.fail_device == removed) {
        options.fail_device = -1;
    } else if (options.fail_device > removed) {
        --options.fail_device;
    }
}

std::string banner(const DeviceFault& fault) {
    const std::string who = fault.name.empty() ? std::string("A device") : fault.name;
    return fault.stopped_answering ? fmt::format("{} stopped answering: {}.", who, fault.cause)
                                   : fmt::format("{} failed: {}.", who, fault.cause);
}

}  // namespace

void Engine::State::device_failed(const DeviceFailedCommand& command) {
    if (command.uuid.empty()) return;
    set_aside(command.uuid);
    if (!model || model->fault() || !model->set_failed(command.uuid, command.cause, command.stopped_answering)) return;
    const Error error = make_error(ErrorCode::device_failed, command.cause);
    recover(error);
}

void Engine::State::set_aside(const std::string& uuid) {
    if (uuid.rfind("GPU-", 0) != 0) return;
    if (std::find(failed_gpus.begin(), failed_gpus.end(), uuid) == failed_gpus.end()) failed_gpus.push_back(uuid);
}

void Engine::State::recover(const Error& error) {
    if (!model || !loaded_from) {
        scheduler->fail_all(error);
        return;
    }
    // The draft model may sit on the device that failed: the answers go on without it.
    if (draft) {
        scheduler->set_draft(nullptr, 0);
        draft.reset();
    }
    DeviceFault fault = model->fault().value_or(DeviceFault{-1, "", "", false, false, error.message});
    const RecoveryPolicy policy = loaded_from->recovery;
    RecoveryEvent event;
    event.fault = fault;
    for (const Scheduler::Progress& p : scheduler->progress()) event.requests.push_back(p.id);
    const auto give_up = [&](const Error& why) {
        event.phase = RecoveryEvent::Phase::gave_up;
        event.message = fmt::format("{} {}", banner(fault), why.message);
        emit(event);  // before the requests' ends, which it explains
        if (why.code == ErrorCode::cancelled) {
            // The user stopped it (a cancel, a newer load, an unload): the requests end as
            // cancelled ones do, with what they had generated.
            scheduler->cancel_all();
            scheduler->end_cancelled();
        } else {
            scheduler->fail_all(make_error(ErrorCode::device_failed, event.message));
        }
        scheduler.reset();
        model.reset();
        loaded_from.reset();
    };
    if (policy == RecoveryPolicy::stop) {  // a DeviceFailedCommand: no step ended the requests
        give_up(make_error(ErrorCode::device_failed, "Stopped, as the recovery setting asks: load the model again "
                                                     "to go on without that device."));
        return;
    }
    // Loading again where it failed (the policy, or no device to blame: a collective that
    // never completed) is tried twice at most for a model the user loaded: a fault that
    // comes back is not one a reload clears.
    if ((policy == RecoveryPolicy::retry || fault.device < 0) && ++retries > 2) {
        give_up(make_error(ErrorCode::device_failed, "Loading the model again twice did not help."));
        return;
    }
    ModelOptions options = loaded_from->options;
    // Replan: without the failed device.
    if (policy == RecoveryPolicy::replan && fault.device >= 0) {
        const Model::DevicesLeft left = model->devices_without(fault);
        if (!fault.uuid.empty()) {
            set_aside(fault.uuid);
            options.excluded_gpus.push_back(fault.uuid);
        }
        drop_device(options, left.removed);
        options.devices = left.devices.empty() ? std::string("cpu") : left.devices;
        if (left.devices.empty()) options.split = SplitMode::automatic;
    }
    event.devices = options.devices;
    event.message = fmt::format("{} Loading the model again on {}.", banner(fault), options.devices);
    emit(event);

    // Every request now waits in the scheduler with its answer so far; the failed model goes
    // (a failed GPU's part of it without touching that GPU: Backend::fault()).
    std::vector<Scheduler::Progress> progress = scheduler->progress();
    model.reset();
    Result<Model> loaded = load_model(loaded_from->path, options);
    if (!loaded && options.devices != "cpu" && options.devices.rfind("cpu:", 0) != 0 &&
        loaded.error().code != ErrorCode::cancelled) {
        // The GPUs left cannot hold it: the CPU and RAM, if they can.
        ModelOptions on_cpu = options;
        on_cpu.devices = "cpu";
        on_cpu.split = SplitMode::automatic;
        on_cpu.ratios.clear();
        on_cpu.main_device = 0;
        on_cpu.fail_device = -1;
        Result<Model> cpu = load_model(loaded_from->path, on_cpu);
        if (cpu) {
            options = on_cpu;
            loaded = std::move(cpu);
        } else if (cpu.error().code == ErrorCode::cancelled) {
            loaded = cpu.error();
        } else {
            loaded = make_error(loaded.error().code, fmt::format("{}; nor on the CPU: {}", loaded.error().message,
                                                                 cpu.error().message));
        }
    }
    if (!loaded) {
        give_up(loaded.error().code == ErrorCode::cancelled
                    ? make_error(ErrorCode::cancelled, "Loading the model again was cancelled.")
                    : make_error(loaded.error().code, fmt::format("The model could not be loaded again on {}: {}",
                                                                  options.devices, loaded.error().message)));
        return;
    }
    model.emplace(std::move(loaded).value());
    loaded_from->options = options;
    scheduler->move_to(*model);
    const ModelSummary& summary = model->summary();
    for (const Scheduler::Progress& p : progress) {
        if (auto it = started.find(p.id); it != started.end()) {
            it->second.recoveries.push_back({p.generated, fault.name, fault.cause, summary.device});
        }
    }
    event.phase = RecoveryEvent::Phase::recovered;
    event.devices = options.devices;
    event.model = summary;
    event.message = summary.expected_tokens_per_second > 0
                        ? fmt::format("{} Continuing on {}, at about {:.0f} tokens/s.", banner(fault), summary.device,
                                      summary.expected_tokens_per_second)
                        : fmt::format("{} Continuing on {}.", banner(fault), summary.device);
    emit(event);
}

void Engine::State::unload() {
    stop_generations();
    run_embeds();
    draft.reset();
    model.reset();
    loaded_from.reset();
    emit(UnloadedEvent{});
}

// The embeddings asked for, an input at a time while generations run, so that a request of
// many inputs (a retrieval tool's documents) holds the answers up for one input's batches at
// most; all at once when nothing else runs.
void Engine::State::run_embeds() {
    while (!embeds.empty()) {
        PendingEmbed& pending = embeds.front();
        if (!model) {
            emit(ErrorEvent{pending.command.request_id,
                            make_error(ErrorCode::invalid_argument, "no model is loaded: load a model first")});
            embeds.pop_front();
            continue;
        }
        const bool generating = scheduler != nullptr && !scheduler->idle();
        // Every sequence generating: wait for one to end (the steps go on meanwhile).
        if (generating && scheduler->running() >= model->max_sequences()) return;
        Result<bool> finished = embed_next(pending);
        if (!finished) {
            emit(ErrorEvent{pending.command.request_id, finished.error()});
            embeds.pop_front();
        } else if (*finished) {
            emit(std::move(pending.done));
            embeds.pop_front();
        }
        if (generating) return;  // a step before the next input
    }
}

// Embeds the next input of `pending`; true when it was the last.
Result<bool> Engine::State::embed_next(PendingEmbed& pending) {
    const EmbedCommand& command = pending.command;
    const size_t n = command.inputs.size() + command.token_inputs.size();
    if (n == 0) return make_error(ErrorCode::invalid_argument, "nothing to embed: no input was given");
    const size_t i = pending.done.vectors.size();
    const std::vector<TokenId> tokens = i < command.inputs.size()
                                            ? model->tokenizer().tokenize(command.inputs[i], true, false)
                                            : command.token_inputs[i - command.inputs.size()];
    for (TokenId t : tokens) {
        if (t < 0 || static_cast<uint32_t>(t) >= model->summary().n_vocab) {
            return make_error(ErrorCode::invalid_argument,
                              fmt::format("input {}: token id {} is not in the model's vocabulary of {}", i, t,
                                          model->summary().n_vocab));
        }
    }
    const EmbeddingPooling pooling = command.pooling.value_or(default_pooling(model->summary().info));
    Result<std::vector<float>> vector = model->embed(tokens, pooling, command.normalize);
    if (!vector) {
        return make_error(vector.error().code,
                          n == 1 ? vector.error().message : fmt::format("input {}: {}", i, vector.error().message));
    }
    pending.done.prompt_tokens += tokens.size();
    pending.done.vectors.push_back(std::move(vector).value());
    return pending.done.vectors.size() == n;
}

void Engine::State::generate(const GenerateCommand& command, uint64_t seq) {
    const uint64_t id = command.request_id;
    DoneEvent done;
    done.request_id = id;
    bool cancelled = cancelled_ids.erase(id) > 0;
    {
        const std::lock_guard lock(mutex);
        cancelled = cancelled || seq <= cancel_all_through;
    }
    if (cancelled) {
        done.stats.stop_reason = StopReason::cancelled;
        emit(std::move(done));
        return;
    }
    if (Result<void> started_ok = start_generation(command, done); !started_ok) {
        emit(ErrorEvent{id, started_ok.error()});
    }
}

Result<void> Engine::State::start_generation(const GenerateCommand& command, DoneEvent& done) {
    if (!model || scheduler == nullptr) {
        return make_error(ErrorCode::invalid_argument, "no model is loaded: load a model first");
    }
    if (model->summary().info.embedding_only) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("{} is an embedding model: it makes embeddings (POST /v1/embeddings, "
                                      "powerhouse-cli embed), not text; load a chat model to generate",
                                      model->summary().name));
    }
    if (started.count(command.request_id) != 0) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("request {} is already running: give each request its own id", command.request_id));
    }
    if (command.raw_prompt) {
        done.prompt_ids = raw_prompt(*model, *command.raw_prompt, command.parse_special);
    } else {
        if (command.messages.empty()) {
            return make_error(ErrorCode::invalid_argument, "nothing to answer: the conversation has no messages");
        }
        // Room for the answer: what was asked, but never more than a quarter of the context.
        const auto wanted = static_cast<uint32_t>(std::max(1, command.settings.max_tokens));
        const uint32_t reserve = std::clamp<uint32_t>(wanted, 1, std::max<uint32_t>(1, model->n_ctx() / 4));
        Result<std::vector<TokenId>> prompt =
            fit_chat_prompt(*model, command.messages, command.overflow, reserve, done.stats.dropped_messages,
                            command.tools, command.template_variables);
        if (!prompt) return prompt.error();
        done.prompt_ids = std::move(prompt).value();
    }
    const uint64_t id = command.request_id;
    // A chat answer read in the model's format: the reasoning apart, the calls out of the
    // text. The reader needs the control tokens the model writes.
    std::shared_ptr<AnswerReader> reader;
    GenerationSettings settings = command.settings;
    if (!command.prediction.empty()) {
        settings.lookup.prediction = model->tokenizer().tokenize(command.prediction, false, false);
        if (settings.lookup.max_draft == 0) settings.lookup.max_draft = 16;
    }
    if (command.read_answer && !command.raw_prompt) {
        reader = std::make_shared<AnswerReader>(*model, command, done.prompt_ids);
        settings.render_special = true;
    }
    PH_TRY(scheduler->submit(
        id, done.prompt_ids, settings,
        [this, reader](uint64_t rid, std::string_view text, std::span<const TokenLogprob> logprobs) {
            TokenEvent token{rid, std::string(text), {}, {logprobs.begin(), logprobs.end()}};
            if (reader) {
                AnswerReader::Delta delta = reader->feed(text);
                token.text = std::move(delta.text);
                token.reasoning = std::move(delta.reasoning);
            }
            emit(std::move(token));
        },
        [this, reader](uint64_t rid, Result<GenerationResult> result) {
            auto it = started.find(rid);
            if (it == started.end()) return;
            DoneEvent event = std::move(it->second);
            started.erase(it);
            if (!result) {
                emit(ErrorEvent{rid, result.error()});
                return;
            }
            const uint32_t dropped = event.stats.dropped_messages;
            event.stats = result->stats;
            event.stats.dropped_messages = dropped;
            event.text = std::move(result->text);
            event.generated_ids = std::move(result->ids);
            event.logprobs = std::move(result->logprobs);
            if (reader) {
                // What the reader held back until the end streams first, so that the
                // TokenEvents add up to the DoneEvent's text and reasoning.
                ParsedAnswer rest = reader->finish();
                if (!rest.content.empty() || !rest.reasoning.empty()) {
                    emit(TokenEvent{rid, std::move(rest.content), std::move(rest.reasoning), {}});
                }
                event.text = reader->content();
                event.reasoning = reader->reasoning();
                event.tool_calls = std::move(rest.tool_calls);
            }
            emit(std::move(event));
        }));
    started.emplace(id, std::move(done));
    report_stats(true);
    return {};
}
Engine::Engine() : state_(std::make_shared<State>()) {
    state_->thread = std::thread([state = state_.get()] { state->run(); });
}

Engine::~Engine() {
    {
        const std::lock_guard lock(state_->mutex);
        state_->stopping = true;
        state_->commands.clear();
        state_->cancel_load = true;
    }
    state_->command_ready.notify_all();
    state_->thread.join();
}

void Engine::submit(EngineCommand command) {
    {
        const std::lock_guard lock(state_->mutex);
        if (state_->stopping) return;
        const uint64_t seq = state_->next_seq++;
        if (const auto* cancel = std::get_if<CancelCommand>(&command)) {
            if (cancel->request_id == 0) {
                state_->cancel_all_through = seq;
                state_->cancel_all = true;
                if (state_->loading) state_->cancel_load = true;
            } else {
                state_->cancels.insert(cancel->request_id);
            }
            state_->command_ready.notify_one();
            return;  // acted on at the engine thread's next look; nothing to queue
        }
        if (std::holds_alternative<LoadCommand>(command) || std::holds_alternative<UnloadCommand>(command)) {
            if (state_->loading) state_->cancel_load = true;
        }
        state_->commands.emplace_back(seq, std::move(command));
    }
    state_->command_ready.notify_one();
}

std::optional<EngineEvent> Engine::poll() {
    const std::lock_guard lock(state_->event_mutex);
    if (state_->events.empty()) return std::nullopt;
    EngineEvent event = std::move(state_->events.front());
    state_->events.pop_front();
    return event;
}

std::optional<EngineEvent> Engine::wait_event(std::chrono::milliseconds timeout) {
    std::unique_lock lock(state_->event_mutex);
    if (!state_->event_ready.wait_for(lock, timeout, [&] { return !state_->events.empty(); })) return std::nullopt;
    EngineEvent event = std::move(state_->events.front());
    state_->events.pop_front();
    return event;
}

void Engine::set_notify(std::function<void()> notify) {
    const std::lock_guard lock(state_->mutex);
    state_->notify = std::move(notify);
}

}  // namespace powerhouse
