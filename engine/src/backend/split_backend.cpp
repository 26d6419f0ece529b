#include "backend/split_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "backend/cpu/thread_pool.h"

namespace powerhouse {

namespace {

class SplitBackend final : public Backend {
public:
    SplitBackend(std::vector<std::unique_ptr<DeviceStage>> stages, std::unique_ptr<Communicator> comm,
                 const SplitShape& shape)
        : stages_(std::move(stages)),
          comm_(std::move(comm)),
          shape_(shape),
          // One thread per stage (the caller's thread is the first); a single stage runs inline.
          threads_(static_cast<int>(stages_.size())) {}

    Result<std::span<const float>> decode(std::span<const TokenId> tokens) override;
    Result<TokenId> decode_argmax(std::span<const TokenId> tokens) override {
        want_argmax_ = true;
        Result<std::span<const float>> done = decode(tokens);
        want_argmax_ = false;
        if (!done) return done.error();
        return argmax_;
    }
    uint32_t n_past() const override { return n_past_; }
    uint32_t n_ctx() const override { return shape_.n_ctx; }
    void truncate(uint32_t n) override { n_past_ = std::min(n_past_, n); }
    size_t kv_cache_bytes() const override {
        size_t bytes = 0;
        for (const auto& s : stages_) bytes += s->usage().kv_cache_bytes;
        return bytes;
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
    // Runs work[i] on stage i's thread for every i with work, all at once. On failure the
    // communicator is aborted so that no stage waits for the one that failed; the first
    // failure that is not such a release is returned.
    Result<void> run_stages(const std::vector<std::function<Result<void>()>>& work);
    Result<std::span<const float>> decode_layer_split(std::span<const TokenId> tokens, uint32_t pos);
    Result<std::span<const float>> decode_tensor_split(std::span<const TokenId> tokens, uint32_t pos);
    Result<void> copy_x(size_t from, size_t to, int n);
    // The output stage's head on `row`: the logits, or with want_argmax_ only their argmax.
    Result<std::span<const float>> run_head(DeviceStage& stage, int row) {
        if (!want_argmax_) return stage.head(row);
        Result<TokenId> best = stage.head_argmax(row);
        if (!best) return best.error();
        argmax_ = *best;
        return std::span<const float>();
    }
    // The error with the device's name in front.
    Result<void> named(size_t stage, Result<void> r) const {
        if (r) return r;
        return make_error(r.error().code, fmt::format("{}: {}", stages_[stage]->name(), r.error().message));
    }

    std::vector<std::unique_ptr<DeviceStage>> stages_;
    std::unique_ptr<Communicator> comm_;
    SplitShape shape_;
    cpu::ThreadPool threads_;
    uint32_t n_past_ = 0;
    bool want_argmax_ = false;  // decode_argmax in progress
    TokenId argmax_ = -1;
};

Result<void> SplitBackend::run_stages(const std::vector<std::function<Result<void>()>>& work) {
    std::vector<Result<void>> results(work.size());
    threads_.run([&](int i, int) {
        const auto s = static_cast<size_t>(i);
        if (s >= work.size() || !work[s]) return;
        results[s] = named(s, work[s]());
        if (!results[s]) comm_->abort(fmt::format("{} failed", stages_[s]->name()));
    });
    const Result<void>* first = nullptr;
    for (const Result<void>& r : results) {
        if (r) continue;
        // A stage released from an all-reduce by another's failure is not the cause.
        if (first == nullptr || (first->error().code == ErrorCode::cancelled && r.error().code != ErrorCode::cancelled)) {
            first = &r;
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

Result<std::span<const float>> SplitBackend::decode(std::span<const TokenId> tokens) {
    if (tokens.empty()) return make_error(ErrorCode::invalid_argument, "decode() needs at least one token");
    if (n_past_ + tokens.size() > shape_.n_ctx) {
        return make_error(ErrorCode::out_of_memory,
                          fmt::format("the context is full: {} tokens held, {} more asked, the context holds {}",
                                      n_past_, tokens.size(), shape_.n_ctx));
    }
    for (TokenId id : tokens) {
        if (id < 0 || static_cast<uint32_t>(id) >= shape_.n_vocab) {
            return make_error(ErrorCode::invalid_argument, fmt::format("token id {} is out of range", id));
        }
    }
    Result<std::span<const float>> logits = shape_.mode == SplitMode::tensor ? decode_tensor_split(tokens, n_past_)
                                                                             : decode_layer_split(tokens, n_past_);
    if (logits) n_past_ += static_cast<uint32_t>(tokens.size());
    return logits;
}

// A wavefront over micro-batches: at step t, stage d runs micro-batch t - d. After each step
// the activations move one stage on, last boundary first, so that nothing is overwritten
// before it has been passed along.
Result<std::span<const float>> SplitBackend::decode_layer_split(std::span<const TokenId> tokens, uint32_t pos) {
    const size_t batch = shape_.n_batch;
    const size_t n_micro = (tokens.size() + batch - 1) / batch;
    const size_t n_stages = stages_.size();
    const auto micro_size = [&](size_t m) { return static_cast<int>(std::min(batch, tokens.size() - m * batch)); };
    std::span<const float> logits;
    for (size_t step = 0; step < n_micro + n_stages - 1; ++step) {
        std::vector<std::function<Result<void>()>> work(n_stages);
        for (size_t d = 0; d < n_stages; ++d) {
            if (step < d || step - d >= n_micro) continue;
            const size_t m = step - d;
            work[d] = [&, d, m]() -> Result<void> {
                DeviceStage& stage = *stages_[d];
                const int n = micro_size(m);
                if (d == 0) {
                    Result<void> e = stage.embed(tokens.subspan(m * batch, static_cast<size_t>(n)));
                    if (!e) return e;
                }
                Result<void> r = stage.run_layers(n, pos + static_cast<uint32_t>(m * batch));
                if (!r) return r;
                if (d + 1 == n_stages && m + 1 == n_micro) {
                    Result<std::span<const float>> l = run_head(stage, n - 1);
                    if (!l) return l.error();
                    logits = *l;
                }
                return {};
            };
        }
        if (Result<void> r = run_stages(work); !r) return r.error();
        for (size_t d = n_stages - 1; d-- > 0;) {
            if (step < d || step - d >= n_micro) continue;
            if (Result<void> r = copy_x(d, d + 1, micro_size(step - d)); !r) return r.error();
        }
    }
    return logits;
}

Result<std::span<const float>> SplitBackend::decode_tensor_split(std::span<const TokenId> tokens, uint32_t pos) {
    const size_t batch = shape_.n_batch;
    std::span<const float> logits;
    for (size_t at = 0; at < tokens.size(); at += batch) {
        const size_t n = std::min(batch, tokens.size() - at);
        DeviceStage& first = *stages_[shape_.embedding_stage];
        if (Result<void> e = named(shape_.embedding_stage, first.embed(tokens.subspan(at, n))); !e) return e.error();
        for (size_t s = 0; s < stages_.size(); ++s) {
            if (s == shape_.embedding_stage) continue;
            if (Result<void> r = copy_x(shape_.embedding_stage, s, static_cast<int>(n)); !r) return r.error();
        }
        std::vector<std::function<Result<void>()>> work(stages_.size());
        for (size_t s = 0; s < stages_.size(); ++s) {
            work[s] = [&, s] { return stages_[s]->run_layers(static_cast<int>(n), pos + static_cast<uint32_t>(at)); };
        }
        if (Result<void> r = run_stages(work); !r) return r.error();
        if (at + n == tokens.size()) {
            Result<std::span<const float>> l = run_head(*stages_[shape_.output_stage], static_cast<int>(n) - 1);
            if (!l) return named(shape_.output_stage, l.error()).error();
            logits = *l;
        }
    }
    return logits;
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
