#include "powerhouse/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "powerhouse/sampler.h"
#include "powerhouse/stop_strings.h"
#include "runtime/guess_cost.h"
#include "runtime/hints.h"
#include "runtime/lookup_draft.h"
#include "runtime/sampling_steps.h"

namespace powerhouse {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

DetokenizeOptions answer_detokenize(const GenerationSettings& settings) {
    DetokenizeOptions o;
    o.strip_leading_space = false;  // the answer continues the prompt
    o.render_special = settings.render_special;
    return o;
}

// Log-softmax of the model's logits at the chosen token, and the `top` likeliest tokens in
// the sampler's canonical order (sampling::comes_before). `candidates` is scratch.
TokenLogprob token_logprob(const Tokenizer& tokenizer, std::span<const float> logits, TokenId chosen, int32_t top,
                           std::vector<TokenCandidate>& candidates) {
    float max = -std::numeric_limits<float>::infinity();
    for (float v : logits) max = std::isnan(v) ? max : std::max(max, v);
    double sum = 0;
    for (float v : logits) sum += std::isfinite(v) || v == -INFINITY ? std::exp(static_cast<double>(v) - max) : 0.0;
    const auto lse = static_cast<float>(max + std::log(sum));
    const auto logprob = [&](TokenId id) {
        const float v = logits[static_cast<size_t>(id)];
        return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v - lse;
    };
    TokenLogprob out;
    out.chosen = {chosen, tokenizer.token_piece(chosen, true), logprob(chosen)};
    if (top > 0) {
        candidates.clear();
        for (size_t i = 0; i < logits.size(); ++i) {
            if (!std::isnan(logits[i])) candidates.push_back({logits[i], static_cast<TokenId>(i)});
        }
        const size_t k = std::min(static_cast<size_t>(top), candidates.size());
        if (k == candidates.size()) {
            std::sort(candidates.begin(), candidates.end(), sampling::comes_before);  // keep_top_k keeps all unsorted
        } else {
            sampling::keep_top_k(candidates, static_cast<int32_t>(k));
        }
        for (size_t i = 0; i < k; ++i) {
            out.top.push_back(
                {candidates[i].id, tokenizer.token_piece(candidates[i].id, true), logprob(candidates[i].id)});
        }
    }
    return out;
}

}  // namespace

struct Scheduler::Request {
    Request(uint64_t id_, std::vector<TokenId> prompt_, const GenerationSettings& settings_, Sampler sampler_,
            const Tokenizer& tokenizer, TextCallback text_cb, DoneCallback done_cb)
        : id(id_),
          prompt(std::move(prompt_)),
          settings(settings_),
          sampler(std::move(sampler_)),
          stops(settings_.stop),
          stream(tokenizer, answer_detokenize(settings_)),
          on_text(std::move(text_cb)),
          on_done(std::move(done_cb)),
          submitted(Clock::now()) {}

    uint64_t id;
    std::vector<TokenId> prompt;
    GenerationSettings settings;
    Sampler sampler;
    StopStringMatcher stops;
    StreamingDetokenizer stream;
    TextCallback on_text;
    DoneCallback on_done;
    GenerationResult result;
    std::optional<GrammarMatcher> grammar;  // when the answer is constrained
    size_t logprobs_sent = 0;               // result.logprobs already passed to on_text

    std::optional<SeqId> seq;      // while running
    std::vector<TokenId> pending;  // to decode: the rest of the prompt, or the last token sampled
    std::vector<TokenId> draft;    // guessed to follow the last token sampled, checked this step
    // Guesses worth making next step, from how the last ones fared: the number the model kept
    // plus one, or twice as many when it kept them all (0: none made yet, up to the setting).
    uint32_t guess_cap = 0;
    GuessRecord guesses;             // how its guesses fared (GuessPolicy::when_they_pay)
    uint32_t steps_since_guess = 0;  // steps it could have guessed in and did not
    std::optional<SeqId> draft_seq;  // its context in the draft model's cache
    bool started = false;          // admitted once (reused_tokens counted)
    bool cancelled = false;
    bool done = false;
    uint32_t take = 0;        // rows in the batch being built (pending ones, then the draft)
    size_t first_output = 0;  // its first output row in the batch
    Clock::time_point submitted, admitted, first_token;

    // The argmax alone is enough (a GPU picks it): no sampling, no constraint, no logprobs.
    bool greedy() const { return sampler.plain_greedy() && !grammar && !settings.logprobs; }
    // The last token sampled is to be decoded: the request is writing its answer.
    bool generating() const { return pending.size() == 1 && !result.ids.empty(); }
    // The prompt and the answer so far: what the cache must hold, but for the last token.
    std::vector<TokenId> context() const {
        std::vector<TokenId> all = prompt;
        all.insert(all.end(), result.ids.begin(), result.ids.end());
        return all;
    }
    void emit(std::string_view text) {
        if (text.empty()) return;
        result.text += text;
        const std::span<const TokenLogprob> logprobs =
            std::span<const TokenLogprob>(result.logprobs).subspan(logprobs_sent);
        logprobs_sent = result.logprobs.size();
        if (on_text) on_text(id, text, logprobs);
    }
    // Feeds a piece of the answer through the stop strings; true when one was found.
    bool feed(const std::string& piece) {
        const StopStringOutput out = stops.feed(piece);
        emit(out.text_to_emit);
        return out.stopped;
    }
};

Scheduler::Scheduler(Model& model, const SchedulerOptions& options) : model_(&model), asked_(options) {
    take_limits();
}

void Scheduler::take_limits() {
    options_ = asked_;
    const uint32_t most = model_->max_sequences();
    options_.max_sequences = options_.max_sequences == 0 ? most : std::min(options_.max_sequences, most);
    if (options_.prefill_chunk == 0) options_.prefill_chunk = model_->n_batch();
    // Fixed for the model's life; kv_stats() walks every block, so it is read once here.
    const KvStats kv = model_->kv_stats();
    kv_block_size_ = std::max<uint32_t>(1, kv.block_size);
    kv_total_blocks_ = kv.total_blocks;
    // Another model (after a device failure) takes its own time: timed afresh.
    step_cost_ = std::make_unique<StepCost>();
    draft_guess_seconds_ = 0;
    if (options_.guess_costs && options_.guess_costs->step_seconds) {
        for (uint32_t rows = 1; rows <= StepCost::kMaxRows; ++rows) {
            step_cost_->observe(rows, options_.guess_costs->step_seconds(rows));
        }
        draft_guess_seconds_ = options_.guess_costs->draft_seconds;
    }
}

void Scheduler::hold_for_recovery() {
    // The latest started first, each to the front: the queue keeps their order.
    while (!running_.empty()) {
        std::unique_ptr<Request> r = std::move(running_.back());
        running_.pop_back();
        r->seq.reset();  // the failed model's cache goes with it
        r->draft_seq.reset();  // and the draft's (the engine sets it again, or none)
        r->pending.clear();
        waiting_.insert(waiting_.begin(), std::move(r));
    }
}

void Scheduler::move_to(Model& model) {
    hold_for_recovery();  // none runs after a failure; the old model may be gone: not touched
    model_ = &model;
    take_limits();
    const uint64_t pool = uint64_t{kv_total_blocks_} * kv_block_size_;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
        const size_t length = (*it)->prompt.size() + (*it)->result.ids.size();
        if (length + 1 > std::min<uint64_t>(model_->n_ctx(), pool)) {
            fail(**it, make_error(ErrorCode::context_full,
                                  fmt::format("the conversation and its answer so far are {} tokens, more than the "
                                              "model holds on the devices it continued on ({} positions)",
                                              length, std::min<uint64_t>(model_->n_ctx(), pool))));
            it = waiting_.erase(it);
        } else {
            ++it;
        }
    }
}

std::vector<Scheduler::Progress> Scheduler::progress() const {
    std::vector<Progress> out;
    for (const auto* list : {&running_, &waiting_}) {
        for (const auto& r : *list) out.push_back({r->id, static_cast<uint32_t>(r->result.ids.size())});
    }
    return out;
}

Scheduler::~Scheduler() {
    for (auto& r : running_) {
        if (r->seq) model_->close_sequence(*r->seq, false);
        close_draft(*r, false);
    }
}

Result<void> Scheduler::submit(uint64_t id, std::vector<TokenId> prompt, const GenerationSettings& settings,
                               TextCallback on_text, DoneCallback on_done) {
    if (prompt.empty()) return make_error(ErrorCode::invalid_argument, "the prompt is empty");
    if (settings.max_tokens < 0) {
        return make_error(ErrorCode::invalid_argument, fmt::format("max_tokens = {} is negative", settings.max_tokens));
    }
    if (prompt.size() > model_->n_ctx()) {
        return make_error(ErrorCode::context_full,
                          fmt::format("the prompt is {} tokens long but the context holds {}: "
                                      "shorten it or {}",
                                      prompt.size(), model_->n_ctx(), longer_context_hint(*model_)));
    }
    const uint64_t pool = uint64_t{kv_total_blocks_} * kv_block_size_;
    if (prompt.size() + 1 > pool) {
        return make_error(ErrorCode::out_of_memory,
                          fmt::format("the prompt is {} tokens long but the KV cache holds {} positions for all "
                                      "conversations together: load the model with a larger KV cache or shorten it",
                                      prompt.size(), pool));
    }
    for (const auto* list : {&running_, &waiting_}) {
        for (const auto& r : *list) {
            if (r->id == id) return make_error(ErrorCode::invalid_argument, fmt::format("request {} is in use", id));
        }
    }
    if (settings.top_logprobs < 0 || settings.top_logprobs > 20) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("top_logprobs = {} is outside 0..20", settings.top_logprobs));
    }
    Result<Sampler> sampler = Sampler::create(settings.sampling);
    if (!sampler) return sampler.error();
    for (TokenId t : prompt) sampler->accept(t);
    auto r = std::make_unique<Request>(id, std::move(prompt), settings, std::move(sampler).value(), model_->tokenizer(),
                                       std::move(on_text), std::move(on_done));
    r->result.stats.prompt_tokens = static_cast<uint32_t>(r->prompt.size());
    if (settings.grammar) {
        // The vocabulary's trie is built once, for the first constrained request.
        if (!grammar_vocabulary_) grammar_vocabulary_ = GrammarVocabulary::build(model_->tokenizer());
        r->grammar.emplace(*settings.grammar, grammar_vocabulary_);
    }
    waiting_.push_back(std::move(r));
    return {};
}

bool Scheduler::cancel(uint64_t id) {
    for (const auto* list : {&running_, &waiting_}) {
        for (const auto& r : *list) {
            if (r->id == id && !r->done) {
                r->cancelled = true;
                return true;
            }
        }
    }
    return false;
}

void Scheduler::cancel_all() {
    for (auto& r : running_) r->cancelled = true;
    for (auto& r : waiting_) r->cancelled = true;
}

void Scheduler::fail_all(const Error& error) {
    for (auto* queue : {&running_, &waiting_}) {
        for (auto& r : *queue) fail(*r, error);
        queue->clear();
    }
}

bool Scheduler::idle() const {
    return running_.empty() && waiting_.empty();
}

size_t Scheduler::running() const {
    return running_.size();
}

SchedulerStats Scheduler::stats() const {
    SchedulerStats s;
    s.running = static_cast<uint32_t>(running_.size());
    s.waiting = static_cast<uint32_t>(waiting_.size());
    s.steps = steps_;
    s.pauses = pauses_;
    s.generated_tokens = generated_;
    s.last_decode_rows = last_decode_rows_;
    s.last_prompt_rows = last_prompt_rows_;
    s.last_draft_rows = last_draft_rows_;
    s.drafted_tokens = drafted_;
    s.accepted_tokens = accepted_;
    s.kv = model_->kv_stats();
    return s;
}

void Scheduler::close_draft(Request& r, bool keep_cached) {
    if (r.draft_seq && draft_ != nullptr) draft_->close_sequence(*r.draft_seq, keep_cached);
    r.draft_seq.reset();
}

void Scheduler::set_draft(Model* draft, uint32_t default_tokens) {
    for (auto* list : {&running_, &waiting_}) {
        for (auto& r : *list) close_draft(*r, false);
    }
    draft_ = draft;
    draft_default_ = default_tokens;
}

void Scheduler::end(Request& r, bool keep_cached) {
    close_draft(r, keep_cached);
    if (r.seq) model_->close_sequence(*r.seq, keep_cached);
    r.seq.reset();
    r.done = true;
}

void Scheduler::finish(Request& r, StopReason reason) {
    GenerationStats& stats = r.result.stats;
    if (reason != StopReason::stop && !r.feed(r.stream.flush())) r.emit(r.stops.flush());
    stats.stop_reason = reason;
    stats.generated_tokens = static_cast<uint32_t>(r.result.ids.size());
    const auto now = Clock::now();
    if (!r.result.ids.empty()) stats.generation_seconds = seconds_between(r.first_token, now);
    if (!r.started) stats.prompt_seconds = 0;
    end(r, true);
    if (r.on_done) r.on_done(r.id, std::move(r.result));
}

void Scheduler::fail(Request& r, const Error& e) {
    end(r, false);
    if (r.on_done) r.on_done(r.id, e);
}

// Starts waiting requests, first come first served, while there are sequences to spare and
// the pool has room for their first chunk (a paused one: for all it held).
void Scheduler::admit() {
    const uint32_t bs = kv_block_size_;
    while (!waiting_.empty() && running_.size() < options_.max_sequences) {
        Request& r = *waiting_.front();
        if (r.cancelled) {
            finish(r, StopReason::cancelled);
            waiting_.erase(waiting_.begin());
            continue;
        }
        const std::vector<TokenId> context = r.context();
        const size_t first = r.started ? context.size() : std::min<size_t>(context.size(), options_.prefill_chunk);
        const uint64_t need = (first + bs - 1) / bs + running_.size();
        if (!running_.empty() && model_->available_blocks() < need) break;
        Result<SeqId> seq = model_->open_sequence();
        if (!seq) {
            // The model's own limit, reached by sequences of other users of the model: wait for
            // a running request to end, or fail if none will.
            if (!running_.empty()) break;
            fail(r, seq.error());
            waiting_.erase(waiting_.begin());
            continue;
        }
        r.seq = *seq;
        const uint32_t reused = model_->adopt_prefix(*seq, context);
        r.pending.assign(context.begin() + reused, context.end());
        if (!r.started) {
            r.started = true;
            r.admitted = Clock::now();
            r.result.stats.reused_tokens = reused;
        }
        running_.push_back(std::move(waiting_.front()));
        waiting_.erase(waiting_.begin());
    }
}

// Pauses the most recently started request: its sequence goes to the cache, the request
// back to the front of the queue. False when none can be paused (one request or none).
bool Scheduler::pause_latest() {
    if (running_.size() < 2) return false;
    std::unique_ptr<Request> r = std::move(running_.back());
    running_.pop_back();
    if (r->seq) model_->close_sequence(*r->seq, true);
    close_draft(*r, true);
    r->seq.reset();
    r->pending.clear();
    ++pauses_;
    waiting_.insert(waiting_.begin(), std::move(r));
    return true;
}

void Scheduler::end_cancelled() {
    for (auto* queue : {&running_, &waiting_}) {
        for (auto it = queue->begin(); it != queue->end();) {
            if ((*it)->cancelled) {
                finish(**it, StopReason::cancelled);
                it = queue->erase(it);
            } else {
                ++it;
            }
        }
    }
}

Result<void> Scheduler::step() {
    // Cancelled requests end before anything runs.
    end_cancelled();
    admit();
    if (running_.empty()) return {};

    // What each request takes this step: the next token of those generating, then prompt
    // chunks in the order the requests started, as far as the pool's blocks go. When even
    // the tokens of those generating do not fit, the latest started is paused.
    const uint32_t bs = kv_block_size_;
    uint32_t avail = 0;
    uint32_t budget = 0;
    for (;;) {
        avail = model_->available_blocks();
        bool short_of_blocks = false;
        for (auto& r : running_) {
            r->take = 0;
            r->draft.clear();
            if (r->pending.size() != 1) continue;
            const uint32_t need = model_->blocks_needed(*r->seq, 1);
            if (need > avail) {
                short_of_blocks = true;
                break;
            }
            avail -= need;
            r->take = 1;
        }
        budget = options_.prefill_chunk;
        for (auto& r : running_) {
            if (short_of_blocks || r->pending.size() <= 1 || budget == 0) continue;
            uint32_t take = std::min<uint32_t>(budget, static_cast<uint32_t>(r->pending.size()));
            while (take > 0 && model_->blocks_needed(*r->seq, take) > avail) take = take > bs ? take - bs : 0;
            if (take == 0) continue;
            avail -= model_->blocks_needed(*r->seq, take);
            budget -= take;
            r->take = take;
        }
        const bool empty = std::none_of(running_.begin(), running_.end(), [](const auto& r) { return r->take > 0; });
        if (!short_of_blocks && !empty) break;
        if (pause_latest()) continue;
        // One request, and the pool is full of it: it can go no further.
        finish(*running_.front(), StopReason::context);
        running_.clear();
        return {};
    }
    // Guesses once the step's takes are settled, after any pause above.
    plan_drafts(avail, budget);

    std::vector<BatchRow> rows;
    size_t n_outputs = 0;
    last_decode_rows_ = last_prompt_rows_ = last_draft_rows_ = 0;
    for (auto& r : running_) {
        if (r->take == 0) continue;
        const uint32_t from_pending = r->take - static_cast<uint32_t>(r->draft.size());
        (r->generating() ? last_decode_rows_ : last_prompt_rows_) += from_pending;
        last_draft_rows_ += static_cast<uint32_t>(r->draft.size());
        const RowOutput output = r->greedy() ? RowOutput::argmax : RowOutput::logits;
        r->first_output = n_outputs;
        for (uint32_t i = 0; i < from_pending; ++i) {
            const bool last = i + 1 == r->pending.size();
            rows.push_back({*r->seq, r->pending[i], last ? output : RowOutput::none});
            n_outputs += last ? 1 : 0;
        }
        // Each guess's row gives the token after it.
        for (TokenId t : r->draft) rows.push_back({*r->seq, t, output});
        n_outputs += r->draft.size();
    }
    ++steps_;
    const auto started = Clock::now();
    Result<void> ran = model_->decode_batch(rows);
    // Steps in which every row gives an output (decoding, guesses) tell what rows cost.
    if (ran && last_prompt_rows_ == 0 && !options_.guess_costs) {
        step_cost_->observe(static_cast<uint32_t>(rows.size()), seconds_between(started, Clock::now()));
    }
    if (!ran) {
        for (auto& r : running_) r->draft.clear();
        if (ran.error().code == ErrorCode::out_of_memory && pause_latest()) return {};
        if (ran.error().code == ErrorCode::device_failed && options_.hold_on_device_failure) {
            hold_for_recovery();
            return ran;
        }
        for (auto& r : running_) fail(*r, ran.error());
        running_.clear();
        return ran;
    }
    for (auto& r : running_) {
        if (r->take == 0) continue;
        const size_t from_pending = r->take - r->draft.size();
        const bool answers = from_pending == r->pending.size();  // its last pending row gave an output
        r->pending.erase(r->pending.begin(), r->pending.begin() + static_cast<std::ptrdiff_t>(from_pending));
        if (answers) take_outputs(*r);
        r->draft.clear();
    }
    std::erase_if(running_, [](const auto& r) { return r->done; });
    return {};
}

// Guesses for the requests writing their answers that asked for them, as far as the pool's
// blocks and the step's rows go (after the prompt chunks: guessing is what gives way), and
// as many as pay (GuessPolicy). The draft model's guesses are made for all its requests
// together.
void Scheduler::plan_drafts(uint32_t avail, uint32_t budget) {
    std::vector<std::pair<Request*, uint32_t>> by_model;
    std::vector<std::pair<Request*, uint32_t>> guessed;
    uint32_t rows = 0;
    for (const auto& r : running_) rows += r->take;
    double value = rows;  // the tokens the step is worth: a row each, and each guess as likely kept
    for (auto& r : running_) {
        const LookupSettings& lookup = r->settings.lookup;
        const uint32_t model_tokens = draft_ != nullptr ? r->settings.draft_tokens.value_or(draft_default_) : 0;
        const uint32_t wanted = model_tokens > 0 ? model_tokens : lookup.max_draft;
        if (wanted == 0 || r->take != 1 || !r->generating() || budget == 0) continue;
        // Every guess the model takes is one more token of the answer and position of the context.
        const uint64_t written = r->result.ids.size();
        const auto max_tokens = static_cast<uint64_t>(r->settings.max_tokens);
        const uint64_t held = model_->sequence_length(*r->seq);
        uint64_t limit = std::min<uint64_t>(wanted, budget);
        if (r->guess_cap > 0) limit = std::min<uint64_t>(limit, r->guess_cap);
        limit = std::min(limit, max_tokens > written + 1 ? max_tokens - written - 1 : 0);
        limit = std::min(limit, model_->n_ctx() > held + 1 ? model_->n_ctx() - held - 1 : 0);
        limit = guesses_worth_making(*r, static_cast<uint32_t>(limit), rows, value, model_tokens > 0);
        if (limit == 0) continue;
        rows += static_cast<uint32_t>(limit);
        budget -= static_cast<uint32_t>(limit);  // given back below for what is not guessed
        const auto planned = std::make_pair(r.get(), static_cast<uint32_t>(limit));
        if (model_tokens > 0) {
            by_model.push_back(planned);
        } else {
            r->draft = lookup_draft(r->prompt, r->result.ids, lookup, planned.second);
        }
        guessed.push_back(planned);
    }
    if (!by_model.empty()) guess_with_draft_model(by_model);
    for (const auto& [request, limit] : guessed) {
        Request* r = request;  // a lambda below takes it (clang before 16 captures no bindings)
        std::vector<TokenId>& draft = r->draft;
        const uint32_t counted = model_->blocks_needed(*r->seq, 1);  // the next token's, taken already
        const auto more = [&] {
            return model_->blocks_needed(*r->seq, 1 + static_cast<uint32_t>(draft.size())) - counted;
        };
        while (!draft.empty() && more() > avail) draft.pop_back();
        budget += limit - static_cast<uint32_t>(draft.size());
        if (draft.empty()) continue;
        avail -= more();
        r->take += static_cast<uint32_t>(draft.size());
    }
}

// How many of at most `limit` guesses request `r` makes this step, in a step of `rows` rows
// so far worth `value` tokens (to which its guesses' expected worth is added).
uint32_t Scheduler::guesses_worth_making(Request& r, uint32_t limit, uint32_t rows, double& value,
                                         bool by_model) const {
    if (limit == 0 || options_.guesses == GuessPolicy::always) return limit;
    // A request's first guesses are made as asked: they tell how its guesses fare (a passage
    // being repeated keeps nearly all, a story a quarter).
    if (r.guesses.kept == 0 && r.guesses.missed == 0) return limit;
    const double rate = r.guesses.rate();
    const std::optional<uint32_t> pays =
        guesses_that_pay(*step_cost_, rows, value, rate, limit, by_model ? draft_guess_seconds_ : 0.0);
    // Until steps of two sizes are timed, guess as asked: those steps are what tells.
    uint32_t k = pays.value_or(limit);
    constexpr uint32_t kProbeEvery = 16;  // a guess now and then notices guesses that begin to hold
    if (k == 0 && ++r.steps_since_guess >= kProbeEvery) k = 1;
    if (k > 0) {
        r.steps_since_guess = 0;
        value += expected_kept(rate, k);
    }
    return k;
}

// The draft model's guesses: each request's context caught up in its cache (the prompt on
// first use, else what was written since), then one token at a time, each the argmax, for
// all the requests in the same batches. A batch the draft model cannot run leaves the
// requests without guesses, not failed.
void Scheduler::guess_with_draft_model(const std::vector<std::pair<Request*, uint32_t>>& guessing) {
    std::vector<std::pair<Request*, uint32_t>> going;
    std::vector<BatchRow> rows;
    for (auto [r, limit] : guessing) {
        const std::vector<TokenId> context = r->context();
        if (!r->draft_seq) {
            Result<SeqId> seq = draft_->open_sequence();
            if (!seq) continue;
            r->draft_seq = *seq;
            draft_->adopt_prefix(*seq, context);
        }
        // Since the last guesses the cache holds the context then all guesses but the last.
        // The model kept the first `a` of them and wrote its own token after: the context has
        // grown by a + 1, and the cache is right up to the context's last token. Cutting it
        // there drops the guess the model turned down and those after it (none when it kept
        // all but the last, or all: then the cache is shorter, and catches up).
        uint32_t held = draft_->sequence_length(*r->draft_seq);
        if (held >= context.size()) {
            draft_->truncate_sequence(*r->draft_seq, static_cast<uint32_t>(context.size() - 1));
            held = static_cast<uint32_t>(context.size() - 1);
        }
        for (size_t i = held; i < context.size(); ++i) {
            rows.push_back({*r->draft_seq, context[i], i + 1 == context.size() ? RowOutput::argmax : RowOutput::none});
        }
        going.emplace_back(r, limit);
    }
    while (!going.empty()) {
        const auto started = Clock::now();
        if (!draft_->decode_batch(rows)) {
            for (auto [r, limit] : going) close_draft(*r, false);  // its cache is unknown now
            return;
        }
        // Each round gives every request one guess.
        if (!options_.guess_costs) {
            const double took = seconds_between(started, Clock::now());
            draft_guess_seconds_ =
                draft_guess_seconds_ == 0 ? took : draft_guess_seconds_ + 0.25 * (took - draft_guess_seconds_);
        }
        std::vector<std::pair<Request*, uint32_t>> next;
        rows.clear();
        for (size_t i = 0; i < going.size(); ++i) {
            auto [r, limit] = going[i];
            r->draft.push_back(draft_->batch_argmax(i));
            if (r->draft.size() >= limit) continue;
            rows.push_back({*r->draft_seq, r->draft.back(), RowOutput::argmax});
            next.push_back(going[i]);
        }
        going.swap(next);
    }
}

// The token of a request's output row: the argmax, or sampled from the logits under its
// grammar (with its log-probability when asked). None when the grammar allows no token: the
// request has failed then.
std::optional<TokenId> Scheduler::choose(Request& r, size_t output) {
    if (r.greedy()) return model_->batch_argmax(output);
    const std::span<const float> logits = model_->batch_logits(output);
    logits_scratch_.assign(logits.begin(), logits.end());
    if (r.grammar) r.grammar->mask(logits_scratch_);
    const TokenId next = r.sampler.sample(logits_scratch_);
    if (next == kNoToken && r.grammar) {
        fail(r,
             make_error(ErrorCode::internal, "the answer's grammar allows no token of this model's vocabulary here"));
        return std::nullopt;
    }
    if (next != kNoToken && r.settings.logprobs && !model_->tokenizer().is_eog(next)) {
        r.result.logprobs.push_back(
            token_logprob(model_->tokenizer(), logits, next, r.settings.top_logprobs, order_scratch_));
    }
    if (next != kNoToken && r.grammar && !model_->tokenizer().is_eog(next)) r.grammar->accept(next);
    return next;
}

// The tokens of a request's output rows, in order: its next token, then, for as long as the
// model chose each guess, the token after it. The guesses after the first it did not choose
// are dropped from the cache, so that what it holds is what it would hold without guessing.
void Scheduler::take_outputs(Request& r) {
    GenerationStats& stats = r.result.stats;
    const size_t n = 1 + r.draft.size();
    const uint32_t held = model_->sequence_length(*r.seq);  // the guesses included
    stats.drafted_tokens += static_cast<uint32_t>(r.draft.size());
    drafted_ += r.draft.size();
    for (size_t j = 0; j < n; ++j) {
        const auto now = Clock::now();
        if (r.result.ids.empty()) stats.prompt_seconds = seconds_between(r.admitted, now);
        if (r.settings.max_tokens == 0 && r.result.ids.empty()) {
            finish(r, StopReason::length);
            return;
        }
        const std::optional<TokenId> chosen = choose(r, r.first_output + j);
        if (!chosen) return;
        const TokenId next = *chosen;
        if (r.result.ids.empty()) {
            r.first_token = now;
            stats.time_to_first_token = seconds_between(r.submitted, now);
        }
        r.sampler.accept(next);
        r.result.ids.push_back(next);
        ++generated_;
        // The positions of the cache that count: the rows up to this output's.
        const uint32_t valid = held - static_cast<uint32_t>(n - 1 - j);
        std::optional<StopReason> stop;
        if (model_->tokenizer().is_eog(next) && !r.settings.ignore_eos) {
            stop = StopReason::eos;
        } else if (r.feed(r.stream.feed(next))) {
            stop = StopReason::stop;
        } else if (r.result.ids.size() >= static_cast<size_t>(r.settings.max_tokens)) {
            stop = StopReason::length;
        } else if (valid >= model_->n_ctx()) {
            stop = StopReason::context;
        }
        const bool guessed = j + 1 < n && next == r.draft[j];
        if (!guessed && !r.draft.empty()) {
            r.guesses.update(static_cast<uint32_t>(r.draft.size()), static_cast<uint32_t>(j));
            // j guesses kept: a row that fails costs a row, so fewer after a miss, more while they hold.
            r.guess_cap =
                j == r.draft.size() ? static_cast<uint32_t>(2 * r.draft.size()) : static_cast<uint32_t>(j + 1);
        }
        if (stop || !guessed) {
            if (valid < held) model_->truncate_sequence(*r.seq, valid);
            if (stop) {
                finish(r, *stop);
            } else {
                r.pending.assign(1, next);
            }
            return;
        }
        ++stats.accepted_tokens;
        ++accepted_;
    }
}

Result<void> Scheduler::run() {
    while (!idle()) PH_TRY(step());
    return {};
}

}  // namespace powerhouse
