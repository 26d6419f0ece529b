// The engine thread: the one place a model is loaded and run, driven by commands and
// answering with events, so that a user interface never waits on inference.
//
// Commands (load, unload, generate, cancel) and events (load progress, loaded, unloaded,
// token text, done with statistics, error, scheduler state) are plain copyable structs, so
// the engine could later live in a worker process without its callers changing. Commands
// are taken in the order they were submitted. Generations run together (continuous
// batching, powerhouse/scheduler.h): a generate joins the running ones at the next step,
// up to the model's max_sequences, and waits its turn beyond that. Cancel acts at once:
//   - cancel stops the generation it names before its next step (request_id 0: every
//     running and queued generation, and a load in progress); a cancelled generation still
//     ends with a DoneEvent (StopReason::cancelled) carrying what was generated so far, a
//     cancelled load with an ErrorEvent (ErrorCode::cancelled);
//   - load and unload first stop the running generations or load (their results would be
//     of no use); loading a model frees the previous one before reading the new one, so two
//     models are never in memory together.
// Request ids must be unique among running requests: a cancel of an id that is not running
// is remembered for the next generate with that id.
// Every command ends with exactly one event saying how it went: load -> LoadedEvent or
// ErrorEvent (after LoadProgressEvents), unload -> UnloadedEvent, generate -> DoneEvent or
// ErrorEvent (after TokenEvents). Errors are events; nothing is thrown to the caller.
//
// The prompt cache: finished conversations stay in the model's KV cache as cached prefixes,
// and a generate whose prompt starts the same way (the next turn of that conversation, or
// going back to another one) processes only what is new (GenerationStats::reused_tokens).
//
// Thread-safety: submit(), poll(), wait_event() and set_notify() may be called from any
// thread. The notify callback runs on the engine thread after each event is queued; it must
// be quick and must not call back into the engine (a GUI posts itself a message from it).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "powerhouse/generation.h"
#include "powerhouse/model.h"
#include "powerhouse/result.h"
#include "powerhouse/scheduler.h"

namespace powerhouse {

// ---- Commands ----

// What the engine does when a device fails while requests run (ARCHITECTURE.md section 7):
//   replan  set the device aside for the rest of the session (ModelOptions::excluded_gpus),
//           plan the model on the devices left (or, with none left or none that holds it,
//           on the CPU and RAM), load it there and continue every request from its last
//           token;
//   retry   load the model again on the same devices and continue (a fault that a reload
//           clears); a third fault of the same loaded model ends as stop does;
//   stop    end the requests with the error (ErrorCode::device_failed, naming the device).
enum class RecoveryPolicy { replan, retry, stop };
const char* recovery_policy_name(RecoveryPolicy policy);  // "replan", "retry", "stop"

struct LoadCommand {
    LoadCommand() = default;
    LoadCommand(std::filesystem::path model, ModelOptions model_options,
                RecoveryPolicy on_failure = RecoveryPolicy::replan)
        : path(std::move(model)), options(std::move(model_options)), recovery(on_failure) {}

    std::filesystem::path path;
    ModelOptions options;
    RecoveryPolicy recovery = RecoveryPolicy::replan;
    // A draft model for speculative decoding (GenerationSettings::draft_tokens): a small
    // model whose vocabulary is the model's (every token the same text; the load fails
    // naming the first that is not). Loaded after the model on the same devices, unsplit.
    // After a device failure the answers go on without it. Empty: none.
    std::filesystem::path draft_model;
    uint32_t draft_tokens = 8;  // guesses a step, unless a request says otherwise
    // Whether guesses (a draft model's or a request's lookup) are made only where this
    // machine's step timings say they pay, or always as asked (for measuring).
    GuessPolicy guesses = GuessPolicy::when_they_pay;
};

struct UnloadCommand {};

struct GenerateCommand {
    uint64_t request_id = 0;  // chosen by the caller; echoed in the events of this request
    // The conversation, put through the model's chat template; ignored when raw_prompt is set.
    std::vector<ChatMessage> messages;
    // OpenAI tool objects offered to the model, put into the prompt with the conversation
    // (chat_prompt); null or empty: none. The calls come back in DoneEvent::tool_calls with
    // read_answer; without, reading them is the caller's (powerhouse/tool_calls.h).
    nlohmann::ordered_json tools;
    // More variables for the chat template (chat_prompt): {"enable_thinking": false},
    // {"reasoning_effort": "low"}; null: none.
    nlohmann::ordered_json template_variables;
    std::optional<std::string> raw_prompt;  // text used as it is (the BOS token added as the model asks)
    bool parse_special = true;  // raw_prompt: special tokens written in it become their ids
    // Chat (not raw_prompt): read the answer in the model's own format as it streams
    // (powerhouse/tool_calls.h, the format of the model's chat template). The model's
    // reasoning (a think block, one the prompt opened included; gpt-oss's analysis channel)
    // comes apart from the text: TokenEvent::reasoning and DoneEvent::reasoning. With tools
    // offered, the calls come back in DoneEvent::tool_calls and their markup never reaches
    // the text. TokenEvent::text and DoneEvent::text are then the answer's content (its ends
    // trimmed, control tokens hidden). The engine generates with render_special for it.
    bool read_answer = false;
    GenerationSettings settings;
    ContextOverflow overflow = ContextOverflow::fail;
    // Text the answer is expected to resemble (OpenAI's predicted outputs: the code being
    // edited): tokenized into settings.lookup.prediction, whose guesses are then checked as
    // the answer is written (settings.lookup.max_draft, or 16 when that is 0).
    std::string prediction;
};

struct CancelCommand {
    uint64_t request_id = 0;  // 0: the running generation and every queued one
};

// A GPU failed, as the GPU monitor sees it (powerhouse/telemetry.h: NVML reports it lost,
// or a fatal Xid). The engine sets it aside for the session; if the loaded model uses it, the
// model fails and the RecoveryPolicy applies at once (RecoveryEvents), whether requests run
// or not. The only command with no event of its own: when the model does not use the GPU,
// nothing is to be seen.
struct DeviceFailedCommand {
    std::string uuid;   // "GPU-8f6d..." (a virtual CPU device, in tests: its name, "CPU 1")
    std::string cause;  // "Xid 79, fell off the bus"
    bool stopped_answering = false;  // lost, rather than failing with an error
};

// Embeddings of texts (Model::embed), for retrieval: one EmbeddingsEvent with a vector per
// input, or one ErrorEvent. Run an input at a time between the scheduler's steps (all at once
// when nothing generates), each input in batches of its own, in the order asked, before a
// later load or unload; while every sequence the model holds is generating (a GPU keeps one
// for now), it waits for one to end.
struct EmbedCommand {
    uint64_t request_id = 0;
    std::vector<std::string> inputs;                 // texts, tokenized as prompts (special tokens stay text)
    std::vector<std::vector<TokenId>> token_inputs;  // or token ids, used as they are (after the texts)
    std::optional<EmbeddingPooling> pooling;         // unset: the model's (default_pooling)
    bool normalize = true;                           // each vector of length 1
};

using EngineCommand =
    std::variant<LoadCommand, UnloadCommand, GenerateCommand, CancelCommand, DeviceFailedCommand, EmbedCommand>;

// ---- Events ----

struct LoadProgressEvent {
    std::filesystem::path path;
    float fraction = 0;  // 0..1, increasing
    std::string stage;   // "reading the weights"
};

struct LoadedEvent {
    ModelSummary model;
    double seconds = 0;
    std::optional<ModelSummary> draft;  // LoadCommand::draft_model, when one was asked for
};

struct UnloadedEvent {};

struct TokenEvent {
    uint64_t request_id = 0;
    std::string text;  // the new text (never half a UTF-8 character)
    // GenerateCommand::read_answer: the new reasoning (text and reasoning may both be empty
    // while the reader waits to see what a marker opens).
    std::string reasoning;
    // When the request asked for them: the tokens generated since the previous TokenEvent.
    std::vector<TokenLogprob> logprobs;
};

// An answer that a device failure interrupted and that went on elsewhere.
struct RecoveryNote {
    uint32_t at_token = 0;     // tokens of the answer generated before the failure
    std::string failed;        // the device: "GPU 1"
    std::string cause;         // "did not answer within 60 s"
    std::string continued_on;  // ModelSummary::device of the model that went on
};

struct DoneEvent {
    uint64_t request_id = 0;
    std::vector<RecoveryNote> recoveries;  // in the order they happened; usually none
    std::string text;                      // the whole answer (with read_answer: its content)
    // GenerateCommand::read_answer: the whole reasoning, and the tool calls the answer made
    // when tools were offered.
    std::string reasoning;
    std::vector<ToolCall> tool_calls;
    std::vector<TokenId> prompt_ids;
    std::vector<TokenId> generated_ids;
    GenerationStats stats;
    std::vector<TokenLogprob> logprobs;  // every generated token's, when the request asked for them
};

// How the running generations stand (sequences running and waiting, KV blocks in use): sent
// when a request starts or ends, and at most twice a second while they run.
struct SchedulerEvent {
    SchedulerStats stats;
};

struct ErrorEvent {
    uint64_t request_id = 0;  // 0 for load and unload
    Error error;
};

// A device failed while requests ran, and what the engine did about it (RecoveryPolicy).
// Sent first with `reloading` (then LoadProgressEvents), and then once more: `recovered`
// (the requests go on; their DoneEvents carry a RecoveryNote) or `gave_up` (the requests
// end with an ErrorEvent saying why, and no model is loaded any more). With the policy stop
// only the requests' ErrorEvents are sent.
struct RecoveryEvent {
    enum class Phase { reloading, recovered, gave_up };
    Phase phase = Phase::reloading;
    DeviceFault fault;
    std::string devices;  // ModelOptions::devices of the reload
    // For a banner: "GPU 1 stopped answering: did not answer within 60 s. Continuing on GPU
    // 0 (NVIDIA H200), at about 120 tokens/s."
    std::string message;
    std::vector<uint64_t> requests;  // the requests that were running or waiting
    ModelSummary model;              // recovered: where the model runs now
};

// The answer to an EmbedCommand: a vector of n_embd floats per input, in order.
struct EmbeddingsEvent {
    uint64_t request_id = 0;
    std::vector<std::vector<float>> vectors;
    uint64_t prompt_tokens = 0;  // all inputs' tokens together
};

using EngineEvent = std::variant<LoadProgressEvent, LoadedEvent, UnloadedEvent, TokenEvent, DoneEvent, ErrorEvent,
                                 SchedulerEvent, RecoveryEvent, EmbeddingsEvent>;

class Engine {
public:
    Engine();   // starts the engine thread; no model is loaded
    ~Engine();  // cancels what runs, drops queued commands, joins the thread, frees the model
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    void submit(EngineCommand command);

    // The next event, if one is queued.
    std::optional<EngineEvent> poll();
    // The next event, waiting up to `timeout` for one.
    std::optional<EngineEvent> wait_event(std::chrono::milliseconds timeout);

    // Called on the engine thread after each event is queued (replaces the previous one).
    void set_notify(std::function<void()> notify);

    struct State;

private:
    std::shared_ptr<State> state_;
};

}  // namespace powerhouse
