// Continuous batching: many generations on one model at once. Each step() runs one batch
// that takes the next token of every sequence that is generating, plus a chunk of prompt
// from the sequences that are starting (at most `prefill_chunk` prompt tokens a step, given
// first come, first served), so that a long prompt never holds the others up for more than
// a step. Every request keeps its own sampler, seed, stop strings and cancel.
//
// The KV cache is the model's pool of blocks (powerhouse/sequences.h). A new request first
// takes the longest beginning of its prompt that another sequence or a cached prefix holds
// (GenerationStats::reused_tokens). When the pool lacks blocks for a step, the most
// recently started requests are paused: their sequence is closed into the cache and,
// when there is room again, they resume by taking it back (what was dropped meanwhile is
// computed again), so a lack that is temporary never fails a request. A prompt that could
// never fit in the pool is refused.
//
// A request may constrain its answer by a grammar (GenerationSettings::grammar: JSON, a
// schema, a tool call), which masks the logits before its sampler, and may ask for the
// log-probabilities of its tokens.
//
// Greedy requests (temperature 0, no penalties, no grammar, no logprobs) take only the argmax
// of their logits, which a GPU picks itself. On the CPU every row of a batch is computed as it would be alone, so a
// request gives the same tokens under batching as alone.
//
// Thread-safety: used by one thread (the engine's); callbacks run on it, inside step().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "powerhouse/generation.h"
#include "powerhouse/model.h"
#include "powerhouse/result.h"
#include "powerhouse/sequences.h"

namespace powerhouse {

class StepCost;  // runtime/guess_cost.h

// When a request that asks for speculative guesses (GenerationSettings::lookup,
// draft_tokens) makes them.
enum class GuessPolicy : uint8_t {
    // As many as make its steps worth the most tokens a second, judged by what steps of so
    // many rows have taken and by how its own guesses fared (its first guesses are made as
    // asked, to find out); none where they cannot pay (a CPU with guesses that mostly fail),
    // but one every 16 steps to notice a change.
    when_they_pay,
    // As many as asked, fewer only after a miss (the number kept plus one).
    always,
};

// What guesses cost, given instead of measured (tests; a device whose figures are known).
struct GuessCosts {
    std::function<double(uint32_t rows)> step_seconds;  // a step of so many rows, every row an output
    double draft_seconds = 0;                           // the draft model's time for one guess
};

struct SchedulerOptions {
    uint32_t max_sequences = 0;  // generating at once; 0: what the model was loaded for
    uint32_t prefill_chunk = 0;  // prompt tokens a step takes; 0: the model's n_batch
    // When a device fails (ErrorCode::device_failed), keep the requests for move_to()
    // instead of ending them with the error: the engine's recovery (ARCHITECTURE.md
    // section 7).
    bool hold_on_device_failure = false;
    GuessPolicy guesses = GuessPolicy::when_they_pay;
    std::optional<GuessCosts> guess_costs;  // unset: timed from the steps run
};

struct SchedulerStats {
    uint32_t running = 0;  // sequences in the cache, generating or reading their prompt
    uint32_t waiting = 0;  // not started yet, or paused for lack of KV blocks
    uint64_t steps = 0;
    uint64_t pauses = 0;   // requests paused for lack of blocks, so far
    uint64_t generated_tokens = 0;  // tokens sampled for all requests, so far (a rate from two readings)
    // The last step's batch: rows that carried a generated token, prompt rows, and rows of
    // speculative guesses (GenerationSettings::lookup).
    uint32_t last_decode_rows = 0;
    uint32_t last_prompt_rows = 0;
    uint32_t last_draft_rows = 0;
    // Guessed tokens checked, and of those the ones the model chose, so far.
    uint64_t drafted_tokens = 0;
    uint64_t accepted_tokens = 0;
    KvStats kv;
};

class Scheduler {
public:
    // Called once per request, with its result or its error.
    using DoneCallback = std::function<void(uint64_t id, Result<GenerationResult> result)>;
    // New text of the answer, and the log-probabilities (when asked for) of the tokens
    // generated since the previous call.
    using TextCallback =
        std::function<void(uint64_t id, std::string_view text, std::span<const TokenLogprob> logprobs)>;

    explicit Scheduler(Model& model, const SchedulerOptions& options = {});
    // A draft model for speculative decoding (GenerationSettings::draft_tokens, by default
    // `default_tokens`): it guesses the next tokens of each request from its own cache of
    // the request's context, which it catches up before guessing and cuts back to what the
    // model kept after. Null: none. The draft must outlive the scheduler or a later call.
    void set_draft(Model* draft, uint32_t default_tokens);
    ~Scheduler();  // ends what runs (no callbacks), keeping nothing
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    // Queues a generation after `prompt`. Bad settings, or a prompt longer than the context
    // or the whole KV cache, fail here; the id must not be in use.
    Result<void> submit(uint64_t id, std::vector<TokenId> prompt, const GenerationSettings& settings,
                        TextCallback on_text, DoneCallback on_done);
    // Stops a request at the next step (it ends with StopReason::cancelled). False: no such id.
    bool cancel(uint64_t id);
    // Stops every request.
    void cancel_all();
    // Ends every request now with `error`, without a step (the running ones first).
    void fail_all(const Error& error);
    // Ends the cancelled requests now, without a step: each gets its on_done (cancelled),
    // the running ones first, then the waiting ones, in their order.
    void end_cancelled();
    bool idle() const;
    // The requests holding a sequence of the model now (cheap; stats() also walks the cache).
    size_t running() const;
    // Runs one batch and delivers what it produced. An error of the model (a device that
    // failed) ends every request that was in the batch with it, and is also returned; with
    // hold_on_device_failure a device failure instead puts them back at the front of the
    // queue, in their order, with what they have generated, for move_to().
    Result<void> step();
    // Goes on with `model` (the same file, loaded again elsewhere after a device failed).
    // Each request held keeps its answer so far, sampler, stop strings and grammar, and
    // continues from its last token: its prompt and answer so far are read again into the
    // new model's cache. A request that no longer fits that cache ends with context_full.
    void move_to(Model& model);
    // The requests not yet ended and the tokens each has generated.
    struct Progress {
        uint64_t id = 0;
        uint32_t generated = 0;
    };
    std::vector<Progress> progress() const;
    // Steps until every request has ended.
    Result<void> run();
    SchedulerStats stats() const;

    struct Request;

private:
    Model* model_;
    SchedulerOptions asked_;    // as given
    SchedulerOptions options_;  // within the model's limits
    std::vector<std::unique_ptr<Request>> running_;  // in the order they started
    std::vector<std::unique_ptr<Request>> waiting_;  // first come, first served
    uint64_t steps_ = 0;
    uint64_t pauses_ = 0;
    uint64_t generated_ = 0;
    uint32_t kv_block_size_ = 1;    // positions per KV block
    uint32_t kv_total_blocks_ = 0;  // the model's whole pool
    uint32_t last_decode_rows_ = 0;
    uint32_t last_prompt_rows_ = 0;
    uint32_t last_draft_rows_ = 0;
    uint64_t drafted_ = 0;
    uint64_t accepted_ = 0;
    std::unique_ptr<StepCost> step_cost_;  // what steps of so many rows took (or were given)
    double draft_guess_seconds_ = 0;       // the draft model's time per guess, a running mean
    Model* draft_ = nullptr;  // the draft model, when set_draft gave one
    uint32_t draft_default_ = 0;
    std::shared_ptr<const GrammarVocabulary> grammar_vocabulary_;  // built for the first constrained request
    std::vector<TokenCandidate> order_scratch_;                    // top_logprobs
    std::vector<float> logits_scratch_;                            // a row's logits, masked

    void take_limits();
    void hold_for_recovery();
    void admit();
    bool pause_latest();
    void plan_drafts(uint32_t avail, uint32_t budget);
    uint32_t guesses_worth_making(Request& r, uint32_t limit, uint32_t rows, double& value, bool by_model) const;
    void guess_with_draft_model(const std::vector<std::pair<Request*, uint32_t>>& guessing);
    void close_draft(Request& r, bool keep_cached);
    std::optional<TokenId> choose(Request& r, size_t output);
    void take_outputs(Request& r);
    void finish(Request& r, StopReason reason);
    void fail(Request& r, const Error& e);
    void end(Request& r, bool keep_cached);
};

}  // namespace powerhouse
