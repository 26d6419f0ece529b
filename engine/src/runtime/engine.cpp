#include "powerhouse/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

namespace powerhouse {

namespace {

template <class... F>
struct Overloaded : F... {
    using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

struct Engine::State {
    // Commands, guarded by `mutex`.
    std::mutex mutex;
    std::condition_variable command_ready;
    std::deque<std::pair<uint64_t, EngineCommand>> commands;  // with their sequence numbers
    uint64_t next_seq = 1;
    uint64_t cancel_all_through = 0;      // generates submitted up to this sequence are cancelled
    std::set<uint64_t> cancelled_ids;     // request ids cancelled before they ran
    uint64_t running_id = 0;              // the generation in progress (0: none)
    bool running = false;
    bool stopping = false;
    std::function<void()> notify;

    // Read by the running generation before each decode step.
    std::atomic<bool> cancel_running{false};

    // Events, guarded by `event_mutex`.
    std::mutex event_mutex;
    std::condition_variable event_ready;
    std::deque<EngineEvent> events;

    std::optional<Model> model;  // touched by the engine thread only
    std::thread thread;

    void emit(EngineEvent event);
    void run();
    void load(const LoadCommand& command);
    void unload();
    void generate(const GenerateCommand& command, uint64_t seq);
    Result<GenerationResult> run_generation(const GenerateCommand& command, DoneEvent& done);
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

void Engine::State::run() {
    for (;;) {
        std::pair<uint64_t, EngineCommand> next;
        {
            std::unique_lock lock(mutex);
            command_ready.wait(lock, [&] { return stopping || !commands.empty(); });
            if (stopping) break;
            next = std::move(commands.front());
            commands.pop_front();
        }
        std::visit(Overloaded{
                       [&](const LoadCommand& c) { load(c); },
                       [&](const UnloadCommand&) { unload(); },
                       [&](const GenerateCommand& c) { generate(c, next.first); },
                       [&](const CancelCommand&) {},  // acted on in submit()
                   },
                   next.second);
    }
    model.reset();  // free the model on the thread that used it
}

void Engine::State::load(const LoadCommand& command) {
    model.reset();  // never two models in memory at once
    {
        const std::lock_guard lock(mutex);
        running = true;  // a cancel, a newer load or an unload stops this one
        running_id = 0;
        cancel_running = false;
    }
    const auto start = std::chrono::steady_clock::now();
    float last = -1.0f;
    std::string last_stage;
    Result<Model> loaded = Model::load(command.path, command.options, [&](float fraction, std::string_view stage) {
        // Enough for a progress bar: every 1% and every change of stage.
        if (fraction - last >= 0.01f || fraction >= 1.0f || stage != last_stage) {
            last = fraction;
            last_stage = stage;
            emit(LoadProgressEvent{command.path, fraction, std::string(stage)});
        }
        return !cancel_running.load(std::memory_order_relaxed);
    });
    {
        const std::lock_guard lock(mutex);
        running = false;
    }
    if (!loaded) {
        emit(ErrorEvent{0, loaded.error()});
        return;
    }
    model.emplace(std::move(loaded).value());
    emit(LoadedEvent{model->summary(), std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()});
}

void Engine::State::unload() {
    model.reset();
    emit(UnloadedEvent{});
}

void Engine::State::generate(const GenerateCommand& command, uint64_t seq) {
    const uint64_t id = command.request_id;
    DoneEvent done;
    done.request_id = id;
    {
        const std::lock_guard lock(mutex);
        if (seq <= cancel_all_through || cancelled_ids.erase(id) > 0) {
            done.stats.stop_reason = StopReason::cancelled;
        } else {
            running = true;
            running_id = id;
            cancel_running = false;
        }
    }
    if (done.stats.stop_reason == StopReason::cancelled) {
        emit(std::move(done));
        return;
    }
    Result<GenerationResult> result = run_generation(command, done);
    {
        const std::lock_guard lock(mutex);
        running = false;
        running_id = 0;
        cancelled_ids.erase(id);
    }
    if (!result) {
        emit(ErrorEvent{id, result.error()});
        return;
    }
    const uint32_t dropped = done.stats.dropped_messages;
    done.stats = result->stats;
    done.stats.dropped_messages = dropped;
    done.text = std::move(result->text);
    done.generated_ids = std::move(result->ids);
    emit(std::move(done));
}

Result<GenerationResult> Engine::State::run_generation(const GenerateCommand& command, DoneEvent& done) {
    if (!model) return make_error(ErrorCode::invalid_argument, "no model is loaded: load a model first");
    if (command.raw_prompt) {
        done.prompt_ids = raw_prompt(*model, *command.raw_prompt);
    } else {
        if (command.messages.empty()) {
            return make_error(ErrorCode::invalid_argument, "nothing to answer: the conversation has no messages");
        }
        // Room for the answer: what was asked, but never more than a quarter of the context.
        const auto wanted = static_cast<uint32_t>(std::max(1, command.settings.max_tokens));
        const uint32_t reserve = std::clamp<uint32_t>(wanted, 1, std::max<uint32_t>(1, model->n_ctx() / 4));
        Result<std::vector<TokenId>> prompt =
            fit_chat_prompt(*model, command.messages, command.overflow, reserve, done.stats.dropped_messages);
        if (!prompt) return prompt.error();
        done.prompt_ids = std::move(prompt).value();
    }
    GenerationCallbacks callbacks;
    callbacks.on_text = [&](std::string_view text) { emit(TokenEvent{command.request_id, std::string(text)}); };
    callbacks.cancelled = [&] { return cancel_running.load(std::memory_order_relaxed); };
    return powerhouse::generate(*model, done.prompt_ids, command.settings, callbacks);
}

Engine::Engine() : state_(std::make_shared<State>()) {
    state_->thread = std::thread([state = state_.get()] { state->run(); });
}

Engine::~Engine() {
    {
        const std::lock_guard lock(state_->mutex);
        state_->stopping = true;
        state_->commands.clear();
        state_->cancel_running = true;
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
                state_->cancel_running = true;
            } else if (state_->running && state_->running_id == cancel->request_id) {
                state_->cancel_running = true;
            } else {
                state_->cancelled_ids.insert(cancel->request_id);
            }
            return;  // acted on now; nothing to queue
        }
        if (std::holds_alternative<LoadCommand>(command) || std::holds_alternative<UnloadCommand>(command)) {
            if (state_->running) state_->cancel_running = true;
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
