#include "backend/split_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

#include "backend/cpu/thread_pool.h"
#include "backend/step_watchdog.h"

namespace powerhouse {

namespace {

KvBlocksOptions kv_options(const SplitShape& shape, bool contiguous) {
    KvBlocksOptions o;
    o.block_size = std::max<uint32_t>(1, shape.kv_block_size);
    o.n_blocks = shape.kv_blocks != 0 ? shape.kv_blocks : (shape.n_ctx + o.block_size - 1) / o.block_size;
    o.max_length = shape.n_ctx;
    o.max_sequences = std::max<uint32_t>(1, shape.max_sequences);
    o.max_cached = shape.max_cached;
    o.contiguous = contiguous;
    return o;
}

bool all_paged(const std::vector<std::unique_ptr<DeviceStage>>& stages) {
    return std::all_of(stages.begin(), stages.end(), [](const auto& s) { return s->paged_kv(); });
}

class SplitBackend final : public Backend {
public:
    SplitBackend(std::vector<std::unique_ptr<DeviceStage>> stages, std::unique_ptr<Communicator> comm,
                 const SplitShape& shape)
        : stages_(std::move(stages)),
          comm_(std::move(comm)),
          shape_(shape),
          kv_(kv_options(shape, !all_paged(stages_))),
          // One thread per stage (the caller's thread is the first); a single stage runs inline.
          threads_(static_cast<int>(stages_.size())) {
        if (shape_.step_deadline.count() > 0) {
            watchdog_ = std::make_unique<StepWatchdog>(shape_.step_deadline, [this] {
                comm_->abort(fmt::format("a step took longer than its deadline of {}", deadline_text()));
                for (auto& stage : stages_) stage->interrupt();
            });
        }
    }

    ~SplitBackend() override;
    KvBlocks& kv() override { return kv_; }
    Result<SeqId> open_sequence() override {
        if (kv_.options().contiguous && single_ && kv_.contains(*single_)) {
            kv_.close(*single_, true);
            single_.reset();
        }
        return kv_.open();
    }
    const KvBlocks& kv() const override { return kv_; }
    Result<void> decode_batch(std::span<const BatchRow> rows) override;
    Output output(size_t i) const override {
        Output o;
        if (i >= outputs_.size()) return o;
        const OutputSlot& slot = outputs_[i];
        if (slot.logits_at >= 0) {
            o.logits = std::span<const float>(logits_).subspan(static_cast<size_t>(slot.logits_at) * shape_.n_vocab,
                                                               shape_.n_vocab);
        }
        if (slot.hidden_at >= 0) {
            o.hidden = std::span<const float>(hidden_).subspan(static_cast<size_t>(slot.hidden_at) * shape_.n_embd,
                                                               shape_.n_embd);
        }
        o.argmax = slot.argmax;
        return o;
    }
    uint64_t kv_block_bytes() const override {
        const uint32_t blocks = kv_.options().n_blocks;
        return blocks == 0 ? 0 : kv_cache_bytes() / blocks;
    }

    Result<std::span<const float>> decode(std::span<const TokenId> tokens) override {
        PH_TRY(decode_single(tokens, RowOutput::logits));
        return output(0).logits;
    }
    Result<TokenId> decode_argmax(std::span<const TokenId> tokens) override {
        PH_TRY(decode_single(tokens, RowOutput::argmax));
        return output(0).argmax;
    }
    uint32_t n_past() const override { return single_ && kv_.contains(*single_) ? kv_.length(*single_) : 0; }
    uint32_t n_ctx() const override { return shape_.n_ctx; }
    void truncate(uint32_t n) override {
        if (single_ && kv_.contains(*single_)) kv_.truncate(*single_, n);
    }
    std::span<const TokenId> cached_tokens() const override {
        if (single_ && kv_.contains(*single_)) return kv_.tokens(*single_);
        return {};
    }
    size_t kv_cache_bytes() const override {
        size_t bytes = 0;
        for (const auto& s : stages_) bytes += s->usage().kv_cache_bytes;
        return bytes;
    }
    std::optional<DeviceFault> fault() const override { return fault_; }
    void set_fault(const DeviceFault& fault) override {
        if (fault_) return;  // the first failure is the one that counts
        if (fault.device >= 0 && static_cast<size_t>(fault.device) < stages_.size()) {
            abandoned_[static_cast<size_t>(fault.device)] = true;
        }
        fault_error_ = make_error(ErrorCode::device_failed,
                                  fault.name.empty() ? fault.cause : fault.name + ": " + fault.cause);
        fault_ = fault;
    }
    std::vector<DeviceUsage> devices() const override {
        std::vector<DeviceUsage> out;
        for (size_t i = 0; i < stages_.size(); ++i) {
            DeviceUsage u = stages_[i]->usage();
            u.comm_seconds = comm_->seconds(static_cast<int>(i));
            out.push_back(std::move(u));
        }
        return out;
    }

private:
    struct OutputSlot {
        int row = 0;
        RowOutput kind = RowOutput::none;
        int logits_at = -1;  // index into logits_ (rows of n_vocab)
        int hidden_at = -1;  // index into hidden_ (rows of n_embd)
        TokenId argmax = -1;
    };

    Result<void> decode_single(std::span<const TokenId> tokens, RowOutput out) {
        if (tokens.empty()) return make_error(ErrorCode::invalid_argument, "decode() needs at least one token");
        if (!single_ || !kv_.contains(*single_)) {
            Result<SeqId> opened = kv_.open(true);
            if (!opened) return opened.error();
            single_ = *opened;
        }
        std::vector<BatchRow> rows(tokens.size());
        for (size_t i = 0; i < tokens.size(); ++i) rows[i] = BatchRow{*single_, tokens[i], RowOutput::none};
        rows.back().output = out;
        return decode_batch(rows);
    }

    // Runs work[i] on stage i's thread for every i with work, all at once. On failure the
    // communicator is aborted so that no stage waits for the one that failed; the first
    // failure that is not such a release is returned.
    Result<void> run_stages(const std::vector<std::function<Result<void>()>>& work);
    Result<void> run_layer_split(std::span<const TokenId> tokens, const StageBatch& batch);
    Result<void> run_tensor_split(std::span<const TokenId> tokens, const StageBatch& batch);
    Result<void> copy_x(size_t from, size_t to, int n);
    // The output stage's head on the output rows among rows [first, first + count) of the
    // batch, which sit at rows 0 .. count - 1 of its x().
    Result<void> run_heads(DeviceStage& stage, int first, int count);
    // The error with the device's name in front.
    Result<void> named(size_t stage, Result<void> r) const {
        if (r) return r;
        return make_error(r.error().code, fmt::format("{}: {}", stages_[stage]->name(), r.error().message));
    }
    // As named(), on the thread that drives the stages: also remembers the stage as the
    // step's failure, unless an earlier one was, or it was only released by another's.
    Result<void> blamed(size_t stage, Result<void> r) {
        if (!r && error_stage_ < 0 && r.error().code != ErrorCode::cancelled) {
            error_stage_ = static_cast<int>(stage);
            error_cause_ = r.error().message;
        }
        return named(stage, std::move(r));
    }
    // The block copies the bookkeeping queued, then the batch through the stages.
    Result<void> run_batch(std::span<const TokenId> tokens, const StageBatch& batch);
    // The error of a failed step, turned into the backend's fault when a device failed or
    // the deadline passed (then the backend runs nothing more).
    Error step_failed(const Error& error, bool late);
    std::string deadline_text() const {
        return fmt::format("{:.3g} s", std::chrono::duration<double>(shape_.step_deadline).count());
    }

    std::vector<std::unique_ptr<DeviceStage>> stages_;
    std::unique_ptr<Communicator> comm_;
    SplitShape shape_;
    KvBlocks kv_;
    cpu::ThreadPool threads_;
    std::optional<SeqId> single_;  // the sequence of decode()

    // The batch being run: its outputs and where their logits went.
    std::vector<OutputSlot> outputs_;
    size_t next_output_ = 0;  // outputs_ filled so far (they come in row order)
    std::vector<float> logits_;
    std::vector<float> hidden_;

    // The step's failure: the first stage that failed of itself, and its message.
    int error_stage_ = -1;
    std::string error_cause_;
    std::optional<DeviceFault> fault_;
    std::optional<Error> fault_error_;
    std::vector<bool> abandoned_ = std::vector<bool>(stages_.size(), false);  // failed devices' stages
    // Last: it calls into the stages and the communicator until it is destroyed.
    std::unique_ptr<StepWatchdog> watchdog_;
};

SplitBackend::~SplitBackend() {
    watchdog_.reset();
    // A failed GPU's stage, and the communicator that joins it to the others, go with the
    // process: destroying them would touch that GPU (DeviceStage::destroyable_after_fault).
    bool leak_comm = false;
    for (size_t s = 0; s < stages_.size(); ++s) {
        if (abandoned_[s] && !stages_[s]->destroyable_after_fault()) {
            (void)stages_[s].release();
            leak_comm = true;
        }
    }
    if (leak_comm) (void)comm_.release();
}

Result<void> SplitBackend::run_stages(const std::vector<std::function<Result<void>()>>& work) {
    std::vector<Result<void>> results(work.size());
    threads_.run([&](int i, int) {
        const auto s = static_cast<size_t>(i);
        if (s >= work.size() || !work[s]) return;
        results[s] = named(s, work[s]());
        if (!results[s]) comm_->abort(fmt::format("{} failed", stages_[s]->name()));
    });
    const Result<void>* first = nullptr;
    for (size_t s = 0; s < results.size(); ++s) {
        const Result<void>& r = results[s];
        if (r) continue;
        // A stage released from an all-reduce by another's failure is not the cause.
        if (first == nullptr || (first->error().code == ErrorCode::cancelled && r.error().code != ErrorCode::cancelled)) {
            first = &r;
        }
        if (error_stage_ < 0 && r.error().code != ErrorCode::cancelled) {
            error_stage_ = static_cast<int>(s);
            const std::string prefix = stages_[s]->name() + ": ";
            error_cause_ = r.error().message.substr(r.error().message.rfind(prefix, 0) == 0 ? prefix.size() : 0);
        }
    }
    if (first == nullptr) return {};
    comm_->reset();
    return *first;
}

Result<void> SplitBackend::copy_x(size_t from, size_t to, int n) {
    return comm_->copy(static_cast<int>(from), stages_[from]->x(), static_cast<int>(to), stages_[to]->x(),
                       static_cast<size_t>(n) * shape_.n_embd);
}

Result<void> SplitBackend::decode_batch(std::span<const BatchRow> rows) {
    outputs_.clear();
    next_output_ = 0;
    if (fault_error_) return *fault_error_;
    if (rows.empty()) return make_error(ErrorCode::invalid_argument, "a batch needs at least one token");
    // The rows per sequence, in order of first appearance.
    std::map<SeqId, uint32_t> count;
    std::vector<SeqId> order;
    for (const BatchRow& r : rows) {
        if (r.token < 0 || static_cast<uint32_t>(r.token) >= shape_.n_vocab) {
            return make_error(ErrorCode::invalid_argument, fmt::format("token id {} is out of range", r.token));
        }
        if (!kv_.contains(r.seq)) {
            return make_error(ErrorCode::invalid_argument, fmt::format("sequence {} is not open", r.seq));
        }
        if (count[r.seq]++ == 0) order.push_back(r.seq);
    }
    // Blocks for every sequence first: a batch that cannot have them all runs nothing.
    uint32_t need = 0;
    for (SeqId s : order) {
        const uint32_t len = kv_.length(s);
        if (len + count[s] > shape_.n_ctx) {
            return make_error(ErrorCode::context_full,
                              fmt::format("the context is full: {} tokens held, {} more asked, the context holds {}",
                                          len, count[s], shape_.n_ctx));
        }
        need += kv_.blocks_needed(s, count[s]);
    }
    if (need > kv_.available_blocks()) {
        return make_error(ErrorCode::out_of_memory,
                          fmt::format("the KV cache is full: the batch needs {} more blocks of {} positions, {} of {} "
                                      "can be had",
                                      need, kv_.block_size(), kv_.available_blocks(), kv_.options().n_blocks));
    }
    for (SeqId s : order) PH_TRY(kv_.reserve(s, count[s]));

    // Positions and block tables.
    const size_t n = rows.size();
    std::vector<int32_t> pos(n), seq(n);
    std::map<SeqId, int32_t> index;
    size_t stride = 1;
    for (SeqId s : order) {
        index[s] = static_cast<int32_t>(index.size());
        stride = std::max(stride, kv_.table(s).size());
    }
    std::vector<int32_t> tables(order.size() * stride, 0);
    for (SeqId s : order) {
        const std::span<const int32_t> t = kv_.table(s);
        if (kv_.options().contiguous) {
            for (size_t b = 0; b < t.size(); ++b) {
                if (t[b] != static_cast<int32_t>(b)) {
                    return make_error(ErrorCode::internal, "a stage that reads its cache by position got a block "
                                                           "table that is not the pool's first blocks in order");
                }
            }
        }
        std::copy(t.begin(), t.end(), tables.begin() + static_cast<ptrdiff_t>(index[s]) * static_cast<ptrdiff_t>(stride));
    }
    std::map<SeqId, int32_t> next;
    std::vector<TokenId> tokens(n);
    size_t n_logits = 0, n_hidden = 0;
    for (size_t i = 0; i < n; ++i) {
        const SeqId s = rows[i].seq;
        auto [it, fresh] = next.try_emplace(s, static_cast<int32_t>(kv_.length(s)));
        pos[i] = it->second++;
        seq[i] = index[s];
        tokens[i] = rows[i].token;
        if (rows[i].output != RowOutput::none) {
            OutputSlot slot;
            slot.row = static_cast<int>(i);
            slot.kind = rows[i].output;
            if (slot.kind == RowOutput::logits) slot.logits_at = static_cast<int>(n_logits++);
            if (slot.kind == RowOutput::hidden) slot.hidden_at = static_cast<int>(n_hidden++);
            outputs_.push_back(slot);
        }
    }
    logits_.resize(n_logits * shape_.n_vocab);
    hidden_.resize(n_hidden * shape_.n_embd);
    StageBatch batch;
    batch.n = static_cast<int>(n);
    batch.pos = pos.data();
    batch.seq = seq.data();
    batch.tables = tables.data();
    batch.table_stride = static_cast<int>(stride);
    batch.block_size = kv_.block_size();

    error_stage_ = -1;
    error_cause_.clear();
    if (watchdog_) watchdog_->arm();
    const Result<void> ran = run_batch(tokens, batch);
    const bool late = watchdog_ && watchdog_->disarm();
    if (!ran || late) {
        outputs_.clear();
        return step_failed(ran ? make_error(ErrorCode::device_failed, "late") : ran.error(), late);
    }
    // The rows are in the cache now.
    std::map<SeqId, std::vector<TokenId>> added;
    for (const BatchRow& r : rows) added[r.seq].push_back(r.token);
    for (const auto& [s, toks] : added) kv_.append(s, toks);
    return {};
}

Result<void> SplitBackend::run_batch(std::span<const TokenId> tokens, const StageBatch& batch) {
    const std::vector<KvBlockCopy> copies = kv_.take_copies();
    if (!copies.empty()) {
        for (size_t i = 0; i < stages_.size(); ++i) PH_TRY(blamed(i, stages_[i]->copy_kv_blocks(copies)));
    }
    return shape_.mode == SplitMode::tensor ? run_tensor_split(tokens, batch) : run_layer_split(tokens, batch);
}

Error SplitBackend::step_failed(const Error& error, bool late) {
    if (!late && error.code != ErrorCode::device_failed) return error;  // not the device's fault
    DeviceFault f;
    f.timed_out = late;
    f.stopped_answering = late;
    f.device = error_stage_;
    if (f.device >= 0) f.name = stages_[static_cast<size_t>(f.device)]->name();
    if (late) {
        f.cause = f.device >= 0 ? fmt::format("did not answer within {}", deadline_text())
                                : fmt::format("the devices did not finish a step within {} (a collective that never "
                                              "completed)",
                                              deadline_text());
    } else {
        f.cause = f.device >= 0 ? error_cause_ : error.message;
    }
    // Never touched again: the failed device (set_fault), or, when none can be blamed, any.
    if (f.device < 0) std::fill(abandoned_.begin(), abandoned_.end(), true);
    set_fault(f);
    return *fault_error_;
}

Result<void> SplitBackend::run_heads(DeviceStage& stage, int first, int count) {
    std::vector<OutputSlot*> here;
    while (next_output_ < outputs_.size() && outputs_[next_output_].row < first + count) {
        here.push_back(&outputs_[next_output_++]);
    }
    const auto max_rows = static_cast<size_t>(std::max(1, stage.max_head_rows()));
    // Argmax, logits and hidden rows go in separate head calls, at most max_rows at a time.
    for (RowOutput kind : {RowOutput::argmax, RowOutput::logits, RowOutput::hidden}) {
        std::vector<OutputSlot*> of_kind;
        for (OutputSlot* s : here) {
            if (s->kind == kind) of_kind.push_back(s);
        }
        for (size_t at = 0; at < of_kind.size(); at += max_rows) {
            const size_t k = std::min(max_rows, of_kind.size() - at);
            std::vector<int> local(k);
            for (size_t i = 0; i < k; ++i) local[i] = of_kind[at + i]->row - first;
            if (kind == RowOutput::argmax) {
                std::vector<TokenId> ids(k);
                PH_TRY(stage.head_argmax(local, ids));
                for (size_t i = 0; i < k; ++i) of_kind[at + i]->argmax = ids[i];
            } else {
                // Rows of floats: each slot's at its place in logits_ or hidden_.
                const bool hidden = kind == RowOutput::hidden;
                Result<std::span<const float>> rows = hidden ? stage.head_hidden(local) : stage.head(local);
                if (!rows) return rows.error();
                const size_t width = hidden ? shape_.n_embd : shape_.n_vocab;
                std::vector<float>& to = hidden ? hidden_ : logits_;
                for (size_t i = 0; i < k; ++i) {
                    const int place = hidden ? of_kind[at + i]->hidden_at : of_kind[at + i]->logits_at;
                    std::copy_n(rows->begin() + static_cast<ptrdiff_t>(i * width), width,
                                to.begin() + static_cast<ptrdiff_t>(place) * static_cast<ptrdiff_t>(width));
                }
            }
        }
    }
    return {};
}

// A wavefront over micro-batches: at step t, stage d runs micro-batch t - d. After each step
// the activations move one stage on, last boundary first, so that nothing is overwritten
// before it has been passed along.
Result<void> SplitBackend::run_layer_split(std::span<const TokenId> tokens, const StageBatch& batch) {
    const size_t micro = shape_.n_batch;
    const size_t total = tokens.size();
    const size_t n_micro = (total + micro - 1) / micro;
    const size_t n_stages = stages_.size();
    const auto micro_size = [&](size_t m) { return static_cast<int>(std::min(micro, total - m * micro)); };
    for (size_t step = 0; step < n_micro + n_stages - 1; ++step) {
        std::vector<std::function<Result<void>()>> work(n_stages);
        for (size_t d = 0; d < n_stages; ++d) {
            if (step < d || step - d >= n_micro) continue;
            const size_t m = step - d;
            work[d] = [&, d, m]() -> Result<void> {
                DeviceStage& stage = *stages_[d];
                const int n = micro_size(m);
                const int first = static_cast<int>(m * micro);
                const StageBatch rows = batch.rows(first, n);
                if (d == 0) {
                    PH_TRY(stage.embed(tokens.subspan(static_cast<size_t>(first), static_cast<size_t>(n)),
                                       std::span<const int32_t>(rows.pos, static_cast<size_t>(n))));
                }
                PH_TRY(stage.run_layers(rows));
                if (d + 1 == n_stages) PH_TRY(run_heads(stage, first, n));
                return {};
            };
        }
        if (Result<void> r = run_stages(work); !r) return r;
        for (size_t d = n_stages - 1; d-- > 0;) {
            if (step < d || step - d >= n_micro) continue;
            if (Result<void> r = copy_x(d, d + 1, micro_size(step - d)); !r) return r;
        }
    }
    return {};
}

Result<void> SplitBackend::run_tensor_split(std::span<const TokenId> tokens, const StageBatch& batch) {
    const size_t micro = shape_.n_batch;
    for (size_t at = 0; at < tokens.size(); at += micro) {
        const size_t n = std::min(micro, tokens.size() - at);
        DeviceStage& first = *stages_[shape_.embedding_stage];
        const StageBatch part = batch.rows(static_cast<int>(at), static_cast<int>(n));
        PH_TRY(
            blamed(shape_.embedding_stage, first.embed(tokens.subspan(at, n), std::span<const int32_t>(part.pos, n))));
        for (size_t s = 0; s < stages_.size(); ++s) {
            if (s == shape_.embedding_stage) continue;
            PH_TRY(copy_x(shape_.embedding_stage, s, static_cast<int>(n)));
        }
        std::vector<std::function<Result<void>()>> work(stages_.size());
        for (size_t s = 0; s < stages_.size(); ++s) {
            work[s] = [&, s] { return stages_[s]->run_layers(part); };
        }
        PH_TRY(run_stages(work));
        PH_TRY(blamed(shape_.output_stage,
                      run_heads(*stages_[shape_.output_stage], static_cast<int>(at), static_cast<int>(n))));
    }
    return {};
}

}  // namespace

Result<std::unique_ptr<Backend>> make_split_backend(std::vector<std::unique_ptr<DeviceStage>> stages,
                                                    std::unique_ptr<Communicator> comm, const SplitShape& shape) {
    if (stages.empty() || comm == nullptr || comm->size() != static_cast<int>(stages.size()) ||
        shape.embedding_stage >= stages.size() || shape.output_stage >= stages.size() || shape.n_batch == 0) {
        return make_error(ErrorCode::internal, "a split backend needs stages, a communicator with one rank each, and a "
                                               "batch size");
    }
    if (shape.mode != SplitMode::tensor && (shape.embedding_stage != 0 || shape.output_stage + 1 != stages.size())) {
        return make_error(ErrorCode::internal, "a layer split embeds on its first stage and ends on its last");
    }
    return std::unique_ptr<Backend>(std::make_unique<SplitBackend>(std::move(stages), std::move(comm), shape));
}

}  // namespace powerhouse
