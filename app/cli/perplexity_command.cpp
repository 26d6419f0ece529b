// powerhouse-cli perplexity [-m MODEL] -f TEXT [--ctx 512] [--batch N] [-t THREADS] [--chunks N]
//                           [--kl-base BASE] [--save-logits FILE [--logits-type f16|f32]] [--json]
//                           [--devices ...] [--split ...] (the model options of generate)
//
// Perplexity of a model over a text, computed as llama.cpp's llama-perplexity does
// (tools/perplexity/perplexity.cpp, perplexity() and kl_divergence()), so that the numbers
// can be set beside each other:
// - The whole text is tokenized once, plain text (special tokens not parsed), with BOS in
//   front when the model asks for one (tokenizer.ggml.add_bos_token). llama.cpp asserts that
//   the model adds no EOS; here an EOS is simply not added.
// - It is cut into chunks of n_ctx tokens; the tokens after the last whole chunk are not
//   used. At least two chunks are needed (2 * n_ctx tokens), as llama.cpp asks.
// - Each chunk runs from an empty cache, its first token replaced by BOS when the model
//   asks for one (so every chunk starts as a document does).
// - Only the second half of each chunk is scored: the logits at positions n_ctx/2 .. n_ctx-2
//   predict the tokens at n_ctx/2+1 .. n_ctx-1, so every scored token has at least half a
//   context of history: n_ctx - 1 - n_ctx/2 tokens a chunk.
// - NLL of a token = log-sum-exp(logits) - logit(token) (the largest logit as a float, the
//   sum of expf in double, as llama.cpp); PPL = exp(mean NLL) over all scored tokens so far.
//   After each chunk the running estimate is printed; at the end PPL ± the standard error
//   of the mean NLL carried through exp (ppl * sqrt((<nll^2> - <nll>^2) / (n - 1))).
//
// --kl-base BASE compares the model (Q) with a base at every scored position, as llama.cpp's
// --kl-divergence mode: BASE is another GGUF file of the same model (same vocabulary; it is
// loaded beside the model, on the same devices, and both run chunk by chunk) or a file
// written by --save-logits (logits_file.h; it brings its tokens, so -f may be left out).
// Reported: both perplexities, ln(PPL(Q)/PPL(base)), the mean KL(base || Q) with its
// standard error and percentiles, Δp (the change in the right token's probability), the
// share of positions whose top token agrees ("same top p"), and, beyond llama.cpp, the largest
// and mean absolute difference of the log-probabilities over every token of every scored
// position (how far apart the two sets of normalised logits are). A base of another
// vocabulary is refused.
//
// --save-logits FILE writes the model's log-probabilities at the scored positions (f16 by
// default, --logits-type f32 to keep them exactly), for a later --kl-base FILE.
// --json prints one JSON object at the end instead of the running text: the settings (n_ctx,
// n_batch, n_vocab, n_tokens, add_bos, n_chunks, first_scored: the position of a chunk's first
// scored token, scored_per_chunk, count), nll_mean/nll_error, ppl/ppl_error, per chunk its NLL
// sum, count, running PPL and time (with a base also its NLL sum, KL sum and same-top count),
// and "kl": the comparison (kl_json) or null.
//
// The engine runs each chunk through Model::decode_batch on a sequence of its own, in batches
// of --batch rows, asking logits (RowOutput::logits) only for the scored positions, and reads
// them with Model::batch_logits, the calls the scheduler makes.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "commands.h"
#include "format.h"
#include "generation.h"
#include "logits_file.h"
#include "perplexity_stats.h"
#include "powerhouse/model.h"

namespace powerhouse::cli {
namespace {

struct PerplexityOptions {
    ModelChoice model;
    std::string text_file;
    uint32_t n_batch = 0;  // 0: a whole chunk, up to kDefaultBatch
    uint32_t max_chunks = 0;  // 0: every whole chunk of the text
    std::string kl_base;
    std::string save_logits;
    std::string logits_type = "f16";
    bool json = false;
};

// What one chunk added.
struct ChunkResult {
    double nll_sum = 0;
    double base_nll_sum = 0;
    double kld_sum = 0;
    uint64_t same_top = 0;
    uint64_t count = 0;
    double ppl = 0;  // running estimate after this chunk
    double seconds = 0;
};

// The base of --kl-base: another model, or saved log-probabilities.
struct Base {
    std::string path;
    std::optional<Model> model;
    std::optional<LogitsReader> file;
};

// Tokens evaluated together by default: llama-perplexity's n_batch is 2048, capped at n_ctx (a
// whole chunk at its default context of 512); more adds memory for the logits of the batch
// (n_vocab floats a scored row) and no speed on the CPU, and a CUDA stage takes at most 4096.
constexpr uint32_t kDefaultBatch = 512;

Error usage(std::string message) { return make_error(ErrorCode::invalid_argument, std::move(message)); }

// Checks that two tokenizers have the same vocabulary, token by token.
Result<void> check_same_vocabulary(const Model& model, const Model& base, const std::string& base_path) {
    const Tokenizer& a = model.tokenizer();
    const Tokenizer& b = base.tokenizer();
    if (model.n_vocab() != base.n_vocab() || a.n_vocab() != b.n_vocab()) {
        return usage(fmt::format("the base '{}' has another vocabulary: {} tokens ({} logits), the model {} ({} "
                                 "logits); a KL divergence compares two files of the same model",
                                 base_path, b.n_vocab(), base.n_vocab(), a.n_vocab(), model.n_vocab()));
    }
    for (int32_t id = 0; id < a.n_vocab(); ++id) {
        if (a.token_text(id) != b.token_text(id)) {
            return usage(fmt::format("the base '{}' has another vocabulary: token {} is '{}' there and '{}' in the "
                                     "model; a KL divergence compares two files of the same model",
                                     base_path, id, b.token_text(id), a.token_text(id)));
        }
    }
    return {};
}

// The tokens of the whole text, as llama.cpp's perplexity tokenizes it.
std::vector<TokenId> tokenize_text(const Tokenizer& tokenizer, const std::string& text) {
    std::vector<TokenId> tokens;
    if (tokenizer.adds_bos() && tokenizer.bos()) tokens.push_back(*tokenizer.bos());
    const std::vector<TokenId> body = tokenizer.tokenize(text, /*add_special=*/false, /*parse_special=*/false);
    tokens.insert(tokens.end(), body.begin(), body.end());
    return tokens;
}

// The chunks as evaluated: n_chunks * n_ctx ids, each chunk's first replaced by BOS when the
// model asks for one.
std::vector<TokenId> make_chunks(const Tokenizer& tokenizer, const std::vector<TokenId>& tokens, uint32_t n_ctx,
                                 uint32_t n_chunks) {
    std::vector<TokenId> chunks(tokens.begin(), tokens.begin() + static_cast<ptrdiff_t>(uint64_t{n_ctx} * n_chunks));
    if (tokenizer.adds_bos() && tokenizer.bos()) {
        for (uint32_t c = 0; c < n_chunks; ++c) chunks[uint64_t{c} * n_ctx] = *tokenizer.bos();
    }
    return chunks;
}

nlohmann::ordered_json mean_error_json(const MeanError& m) {
    return {{"value", m.mean}, {"error", m.error}};
}

nlohmann::ordered_json kl_json(const KlReport& r, const Base& base) {
    return {
        {"base", base.path},
        {"base_kind", base.model ? "gguf" : "logits"},
        {"ppl_base", r.ppl_base.mean},
        {"ppl_base_error", r.ppl_base.error},
        {"ppl", r.ppl_model.mean},
        {"ppl_error", r.ppl_model.error},
        {"ppl_correlation", r.ppl_correlation},
        {"ln_ppl_ratio", mean_error_json(r.ln_ppl_ratio)},
        {"ppl_ratio", mean_error_json(r.ppl_ratio)},
        {"ppl_diff", mean_error_json(r.ppl_diff)},
        {"kld_mean", r.kld.mean},
        {"kld_error", r.kld.error},
        {"kld_percentiles",
         {{"max", r.kld_max},
          {"99.9", r.kld_99_9},
          {"99", r.kld_99},
          {"95", r.kld_95},
          {"90", r.kld_90},
          {"median", r.kld_median},
          {"10", r.kld_10},
          {"5", r.kld_5},
          {"1", r.kld_1},
          {"0.1", r.kld_0_1},
          {"min", r.kld_min}}},
        {"delta_p_mean", mean_error_json(r.p_diff)},
        {"delta_p_rms", mean_error_json(r.p_diff_rms)},
        {"delta_p_percentiles",
         {{"max", r.p_diff_max}, {"99", r.p_diff_99}, {"median", r.p_diff_median}, {"1", r.p_diff_1},
          {"min", r.p_diff_min}}},
        {"same_top", r.same_top.mean},
        {"same_top_error", r.same_top.error},
        {"max_abs_log_prob_diff", r.max_abs_log_prob_diff},
        {"mean_abs_log_prob_diff", r.mean_abs_log_prob_diff},
    };
}

void print_kl_report(const KlReport& r) {
    std::printf("\n====== Perplexity statistics ======\n");
    std::printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", r.ppl_model.mean, r.ppl_model.error);
    std::printf("Mean PPL(base)                : %10.6f ± %10.6f\n", r.ppl_base.mean, r.ppl_base.error);
    std::printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * r.ppl_correlation);
    std::printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", r.ln_ppl_ratio.mean, r.ln_ppl_ratio.error);
    std::printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", r.ppl_ratio.mean, r.ppl_ratio.error);
    std::printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", r.ppl_diff.mean, r.ppl_diff.error);
    std::printf("\n====== KL divergence statistics ======\n");
    std::printf("Mean    KLD: %10.6f ± %10.6f\n", r.kld.mean, r.kld.error);
    std::printf("Maximum KLD: %10.6f\n", r.kld_max);
    std::printf("99.9%%   KLD: %10.6f\n", r.kld_99_9);
    std::printf("99.0%%   KLD: %10.6f\n", r.kld_99);
    std::printf("95.0%%   KLD: %10.6f\n", r.kld_95);
    std::printf("90.0%%   KLD: %10.6f\n", r.kld_90);
    std::printf("Median  KLD: %10.6f\n", r.kld_median);
    std::printf("10.0%%   KLD: %10.6f\n", r.kld_10);
    std::printf(" 5.0%%   KLD: %10.6f\n", r.kld_5);
    std::printf(" 1.0%%   KLD: %10.6f\n", r.kld_1);
    std::printf(" 0.1%%   KLD: %10.6f\n", r.kld_0_1);
    std::printf("Minimum KLD: %10.6f\n", r.kld_min);
    std::printf("\n====== Token probability statistics ======\n");
    std::printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * r.p_diff.mean, 100.0 * r.p_diff.error);
    std::printf("Maximum Δp: %6.3f%%\n", 100.0 * r.p_diff_max);
    std::printf("99.0%%   Δp: %6.3f%%\n", 100.0 * r.p_diff_99);
    std::printf("Median  Δp: %6.3f%%\n", 100.0 * r.p_diff_median);
    std::printf(" 1.0%%   Δp: %6.3f%%\n", 100.0 * r.p_diff_1);
    std::printf("Minimum Δp: %6.3f%%\n", 100.0 * r.p_diff_min);
    std::printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * r.p_diff_rms.mean, 100.0 * r.p_diff_rms.error);
    std::printf("Same top p: %6.3f ± %5.3f %%\n", 100.0 * r.same_top.mean, 100.0 * r.same_top.error);
    std::printf("\n====== Log-probability differences (every token of every scored position) ======\n");
    std::printf("Maximum |Δ log p|: %10.6f\n", r.max_abs_log_prob_diff);
    std::printf("Mean    |Δ log p|: %10.6f\n", r.mean_abs_log_prob_diff);
}

// Evaluates every chunk, scores it, compares it with the base and saves it, printing the
// running figures unless --json.
class Evaluation {
public:
    Evaluation(Model& model, Base& base, const std::vector<TokenId>& chunks, uint32_t n_ctx, uint32_t n_chunks,
               uint32_t n_batch, LogitsWriter* writer, bool quiet)
        : model_(model), base_(base), chunks_(chunks), n_ctx_(n_ctx), n_chunks_(n_chunks), n_batch_(n_batch),
          first_(n_ctx / 2), writer_(writer), quiet_(quiet), kl_(base.model || base.file) {}

    Result<void> run() {
        for (uint32_t c = 0; c < n_chunks_; ++c) {
            const auto start = std::chrono::steady_clock::now();
            ChunkResult chunk;
            PH_TRY(run_chunk(c, chunk));
            chunk.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            chunk.ppl = kl_ ? kl_sums.model.ppl() : sums.ppl();
            results.push_back(chunk);
            if (!quiet_) print_chunk(c);
            if (base_.file) base_.file->release_chunk(c);
        }
        if (!quiet_ && !kl_) std::printf("\n");
        return {};
    }

    NllSums sums;  // the model's NLLs (also in kl_sums.model when comparing)
    KlSums kl_sums;
    std::vector<ChunkResult> results;

private:
    std::span<const TokenId> chunk_tokens(uint32_t c) const {
        return std::span<const TokenId>(chunks_).subspan(uint64_t{c} * n_ctx_, n_ctx_);
    }

    Result<void> run_chunk(uint32_t c, ChunkResult& chunk) {
        const std::span<const TokenId> tokens = chunk_tokens(c);
        // A sequence per chunk, closed without keeping its cache: each chunk starts empty.
        Result<SeqId> seq = model_.open_sequence();
        if (!seq) return seq.error();
        std::optional<SeqId> base_seq;
        if (base_.model) {
            Result<SeqId> s = base_.model->open_sequence();
            if (!s) {
                model_.close_sequence(*seq, false);
                return s.error();
            }
            base_seq = *s;
        }
        Result<void> r = run_batches(c, tokens, *seq, base_seq, chunk);
        model_.close_sequence(*seq, false);
        if (base_seq) base_.model->close_sequence(*base_seq, false);
        return r;
    }

    Result<void> run_batches(uint32_t c, std::span<const TokenId> tokens, SeqId seq, std::optional<SeqId> base_seq,
                             ChunkResult& chunk) {
        std::vector<BatchRow> rows;
        for (uint32_t at = 0; at < n_ctx_; at += n_batch_) {
            const uint32_t end = std::min(n_ctx_, at + n_batch_);
            rows.clear();
            for (uint32_t p = at; p < end; ++p) {
                // The last position's logits would predict the token after the chunk: not asked.
                const bool scored = p >= first_ && p + 1 < n_ctx_;
                rows.push_back(BatchRow{seq, tokens[p], scored ? RowOutput::logits : RowOutput::none});
            }
            PH_TRY(model_.decode_batch(rows));
            if (base_seq) {
                for (BatchRow& row : rows) row.seq = *base_seq;
                PH_TRY(base_.model->decode_batch(rows));
            }
            size_t output = 0;
            for (uint32_t p = at; p < end; ++p) {
                if (p < first_ || p + 1 >= n_ctx_) continue;
                PH_TRY(score(c, p, tokens[p + 1], output++, chunk));
            }
        }
        return {};
    }

    // The position p of chunk c, whose logits are the output-th of the last batch.
    Result<void> score(uint32_t c, uint32_t p, TokenId target, size_t output, ChunkResult& chunk) {
        const std::span<const float> logits = model_.batch_logits(output);
        if (logits.empty() || static_cast<size_t>(target) >= logits.size()) {
            return make_error(ErrorCode::internal, "the engine returned no logits for a scored position");
        }
        const LogitsSummary summary = summarize_logits(logits);
        const double nll = summary.log_sum_exp - logits[static_cast<size_t>(target)];
        chunk.nll_sum += nll;
        ++chunk.count;
        if (writer_ != nullptr || kl_) to_log_probs(logits, summary.log_sum_exp, log_probs_);
        if (writer_ != nullptr) PH_TRY(writer_->append(log_probs_));
        if (!kl_) {
            sums.add(nll);
            return {};
        }
        double base_nll = 0;
        TokenId base_top = 0;
        if (base_.model) {
            const std::span<const float> base_logits = base_.model->batch_logits(output);
            if (base_logits.size() != logits.size()) {
                return make_error(ErrorCode::internal, "the base returned logits of another width");
            }
            const LogitsSummary b = summarize_logits(base_logits);
            base_nll = b.log_sum_exp - base_logits[static_cast<size_t>(target)];
            base_top = b.argmax;
            to_log_probs(base_logits, b.log_sum_exp, base_log_probs_);
        } else {
            base_.file->read_row(c, p - first_, base_log_probs_);
            base_nll = -static_cast<double>(base_log_probs_[static_cast<size_t>(target)]);
            base_top = argmax_of(base_log_probs_);
        }
        const double kld_before = kl_sums.sum_kld;
        const uint64_t same_before = kl_sums.same_top;
        kl_sums.add(log_probs_, base_log_probs_, nll, base_nll, summary.argmax, base_top);
        sums.add(nll);
        chunk.base_nll_sum += base_nll;
        chunk.kld_sum += kl_sums.sum_kld - kld_before;
        chunk.same_top += kl_sums.same_top - same_before;
        return {};
    }

    void print_chunk(uint32_t c) {
        if (!kl_) {
            std::printf("[%u]%.4f,", c + 1, results.back().ppl);
            std::fflush(stdout);
            return;
        }
        if (c == 0) {
            std::printf("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              "
                        "Δp RMS            Same top p\n");
        }
        const KlReport r = kl_report(kl_sums);
        std::printf("%4u    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
                    c + 1, r.ppl_model.mean, r.ppl_model.error, r.ln_ppl_ratio.mean, r.ln_ppl_ratio.error, r.kld.mean,
                    r.kld.error, 100.0 * r.p_diff_rms.mean, 100.0 * r.p_diff_rms.error, 100.0 * r.same_top.mean,
                    100.0 * r.same_top.error);
        std::fflush(stdout);
    }

    Model& model_;
    Base& base_;
    const std::vector<TokenId>& chunks_;
    uint32_t n_ctx_, n_chunks_, n_batch_, first_;
    LogitsWriter* writer_;
    bool quiet_;
    bool kl_;
    std::vector<float> log_probs_, base_log_probs_;
};

int run_perplexity(const CLI::App& command, PerplexityOptions options) {
    const bool ctx_given = command.get_option("--ctx")->count() > 0;
    Base base;
    base.path = options.kl_base;
    if (!options.kl_base.empty()) {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(options.kl_base, ec)) {
            const bool folder = std::filesystem::is_directory(options.kl_base, ec);
            return report_error(
                usage(fmt::format("--kl-base '{}': {}", options.kl_base,
                                  folder ? "is a folder: name a GGUF file or a --save-logits file" : "no such file")));
        }
        if (is_logits_file(options.kl_base)) {
            Result<LogitsReader> reader = LogitsReader::open(options.kl_base);
            if (!reader) return report_error(reader.error());
            base.file.emplace(std::move(reader).value());
        }
    }
    if (options.text_file.empty() && !base.file) {
        return report_error(usage("-f TEXT is needed: the text whose perplexity to measure (only --kl-base with a "
                                  "file written by --save-logits brings its own tokens)"));
    }
    uint32_t n_ctx = options.model.options.n_ctx;
    if (base.file) {
        const LogitsFileInfo& info = base.file->info();
        if (ctx_given && n_ctx != info.n_ctx) {
            return report_error(usage(fmt::format("--ctx {} differs from the context of {} the logits in '{}' were "
                                                  "saved with; leave --ctx out",
                                                  n_ctx, info.n_ctx, base.path)));
        }
        n_ctx = info.n_ctx;
    }
    std::optional<std::string> text;
    if (!options.text_file.empty()) {
        Result<std::string> read = read_file_text(options.text_file);
        if (!read) return report_error(read.error());
        text = std::move(read).value();
    }

    Result<ModelToLoad> to_load = resolve_model(options.model);
    if (!to_load) return report_error(to_load.error());
    ModelOptions& model_options = to_load->options;
    model_options.n_ctx = n_ctx;
    const uint32_t n_batch = std::min(options.n_batch == 0 ? kDefaultBatch : options.n_batch, n_ctx);
    model_options.n_batch = n_batch;
    model_options.kv_cache_tokens = n_ctx;  // one chunk at a time
    const auto load_start = std::chrono::steady_clock::now();
    Result<Model> model = Model::load(to_load->path, model_options);
    if (!model) return report_error(model.error());
    if (model->n_ctx() != n_ctx) {
        return report_error(usage(fmt::format("a context of {} is longer than the {} tokens {} was trained for", n_ctx,
                                              model->summary().n_ctx_train, to_load->path.string())));
    }
    const Tokenizer& tokenizer = model->tokenizer();

    // The chunks: from the text, or from the logits file (then checked against the text).
    uint32_t n_chunks = 0;
    std::vector<TokenId> chunks;
    uint64_t n_tokens = 0;
    if (text) {
        const std::vector<TokenId> tokens = tokenize_text(tokenizer, *text);
        n_tokens = tokens.size();
        if (tokens.size() < 2 * uint64_t{n_ctx}) {
            return report_error(usage(fmt::format(
                "'{}' is {} tokens long; a context of {} needs at least {} (two chunks of {}: a longer text, or a "
                "smaller --ctx)",
                options.text_file, tokens.size(), n_ctx, 2 * uint64_t{n_ctx}, n_ctx)));
        }
        n_chunks = static_cast<uint32_t>(tokens.size() / n_ctx);
        if (options.max_chunks != 0) n_chunks = std::min(n_chunks, options.max_chunks);
        chunks = make_chunks(tokenizer, tokens, n_ctx, n_chunks);
    }
    if (base.file) {
        const LogitsFileInfo& info = base.file->info();
        if (info.n_vocab != model->n_vocab() || info.vocab_hash != vocab_hash(tokenizer)) {
            return report_error(usage(fmt::format(
                "the logits in '{}' were saved by a model of another vocabulary ({} logits a position, the model "
                "has {}{}); a KL divergence compares two files of the same model",
                base.path, info.n_vocab, model->n_vocab(), info.n_vocab == model->n_vocab() ? ", and other tokens" : "")));
        }
        uint32_t file_chunks = info.n_chunks;
        if (options.max_chunks != 0) file_chunks = std::min(file_chunks, options.max_chunks);
        if (text) {
            if (n_chunks < file_chunks) {
                return report_error(usage(fmt::format("'{}' makes {} chunks of {} tokens, the logits in '{}' hold {}",
                                                      options.text_file, n_chunks, n_ctx, base.path, file_chunks)));
            }
            for (uint32_t c = 0; c < file_chunks; ++c) {
                const std::span<const TokenId> saved = base.file->chunk_tokens(c);
                for (uint32_t p = 0; p < n_ctx; ++p) {
                    if (saved[p] != chunks[uint64_t{c} * n_ctx + p]) {
                        return report_error(usage(fmt::format(
                            "'{}' is not the text the logits in '{}' were saved from (chunk {}, token {} differs); "
                            "leave -f out to use the saved tokens",
                            options.text_file, base.path, c + 1, p)));
                    }
                }
            }
        } else {
            n_tokens = uint64_t{info.n_chunks} * n_ctx;
        }
        n_chunks = file_chunks;
        chunks.resize(uint64_t{n_chunks} * n_ctx);
        for (uint32_t c = 0; c < n_chunks; ++c) {
            const std::span<const TokenId> saved = base.file->chunk_tokens(c);
            std::copy(saved.begin(), saved.end(), chunks.begin() + static_cast<ptrdiff_t>(uint64_t{c} * n_ctx));
        }
    }
    if (!options.kl_base.empty() && !base.file) {
        Result<Model> base_model = Model::load(options.kl_base, model_options);
        if (!base_model) return report_error(base_model.error());
        if (Result<void> same = check_same_vocabulary(*model, *base_model, base.path); !same) {
            return report_error(same.error());
        }
        if (base_model->n_ctx() != n_ctx) {
            return report_error(usage(fmt::format("a context of {} is longer than the base '{}' was trained for ({})",
                                                  n_ctx, base.path, base_model->summary().n_ctx_train)));
        }
        base.model.emplace(std::move(base_model).value());
    }
    const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

    const uint32_t first = n_ctx / 2;
    const uint32_t n_scored = n_ctx - 1 - first;
    std::optional<LogitsWriter> writer;
    if (!options.save_logits.empty()) {
        LogitsFileInfo info;
        info.type = options.logits_type == "f32" ? LogitsType::f32 : LogitsType::f16;
        info.n_vocab = model->n_vocab();
        info.n_ctx = n_ctx;
        info.n_chunks = n_chunks;
        info.n_scored = n_scored;
        info.vocab_hash = vocab_hash(tokenizer);
        Result<LogitsWriter> created = LogitsWriter::create(options.save_logits, info, chunks);
        if (!created) return report_error(created.error());
        writer.emplace(std::move(created).value());
    }

    const ModelSummary& summary = model->summary();
    if (!options.json) {
        std::printf("model: %s (%s), %s\n", summary.name.c_str(), to_load->path.filename().string().c_str(),
                    summary.device.c_str());
        if (base.model) std::printf("base: %s (%s)\n", base.model->summary().name.c_str(), base.path.c_str());
        if (base.file) std::printf("base: the log-probabilities saved in %s\n", base.path.c_str());
        std::printf("%llu tokens%s: %u chunk%s of %u, each from an empty cache; scoring the tokens at positions "
                    "%u..%u of each (%u a chunk, %llu in all); batch %u\n",
                    static_cast<unsigned long long>(n_tokens), tokenizer.adds_bos() ? " (BOS first)" : "", n_chunks,
                    n_chunks == 1 ? "" : "s", n_ctx, first + 1, n_ctx - 1, n_scored, static_cast<unsigned long long>(uint64_t{n_scored} * n_chunks),
                    n_batch);
        std::fflush(stdout);
    }

    Evaluation evaluation(*model, base, chunks, n_ctx, n_chunks, n_batch, writer ? &*writer : nullptr, options.json);
    const auto start = std::chrono::steady_clock::now();
    if (Result<void> r = evaluation.run(); !r) return report_error(r.error());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (writer) {
        if (Result<void> r = writer->finish(); !r) return report_error(r.error());
    }
    const NllSums& sums = evaluation.sums;
    const MeanError nll = sums.mean();
    const bool kl = base.model || base.file;

    if (options.json) {
        nlohmann::ordered_json chunk_list = nlohmann::ordered_json::array();
        for (const ChunkResult& c : evaluation.results) {
            nlohmann::ordered_json item = {{"nll_sum", c.nll_sum}, {"count", c.count}, {"ppl", c.ppl},
                                           {"seconds", c.seconds}};
            if (kl) {
                item["base_nll_sum"] = c.base_nll_sum;
                item["kld_sum"] = c.kld_sum;
                item["same_top"] = c.same_top;
            }
            chunk_list.push_back(std::move(item));
        }
        nlohmann::ordered_json out = {
            {"model", to_load->path.string()},
            {"text", options.text_file.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(options.text_file)},
            {"device", summary.device},
            {"n_ctx", n_ctx},
            {"n_batch", n_batch},
            {"n_vocab", model->n_vocab()},
            {"n_tokens", n_tokens},
            {"add_bos", tokenizer.adds_bos()},
            {"n_chunks", n_chunks},
            {"first_scored", first + 1},
            {"scored_per_chunk", n_scored},
            {"count", sums.count},
            {"nll_mean", nll.mean},
            {"nll_error", nll.error},
            {"ppl", sums.ppl()},
            {"ppl_error", sums.ppl_error()},
            {"chunks", chunk_list},
            {"load_seconds", load_seconds},
            {"seconds", seconds},
            {"tokens_per_second", seconds > 0 ? static_cast<double>(uint64_t{n_ctx} * n_chunks) / seconds : 0.0},
            {"kl", kl ? kl_json(kl_report(evaluation.kl_sums), base) : nlohmann::ordered_json()},
            {"saved_logits",
             options.save_logits.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(options.save_logits)},
        };
        std::puts(json_text(out, 2).c_str());
        return 0;
    }
    if (kl) print_kl_report(kl_report(evaluation.kl_sums));
    std::printf("\n%.2f seconds per chunk (%.1f tokens/s%s)\n", seconds / n_chunks,
                static_cast<double>(uint64_t{n_ctx} * n_chunks) / seconds, base.model ? ", both models" : "");
    if (writer) std::printf("log-probabilities of %u positions saved to %s\n", n_scored * n_chunks,
                            options.save_logits.c_str());
    std::printf("Final estimate: PPL = %.4f +/- %.5f\n", sums.ppl(), sums.ppl_error());
    return 0;
}

}  // namespace

Command add_perplexity_command(CLI::App& app) {
    auto options = std::make_shared<PerplexityOptions>();
    options->model.options.n_ctx = 512;  // llama-perplexity's default
    CLI::App* sub = app.add_subcommand(
        "perplexity", "Perplexity over a text, and KL divergence against a base model (like llama-perplexity)");
    add_model_options(*sub, options->model);
    sub->add_option("-f,--file", options->text_file, "Text file whose perplexity to measure ('-': standard input)");
    sub->add_option("-b,--batch", options->n_batch,
                    "Tokens the engine evaluates together (default: a chunk, at most 512); changes the speed, not the result")
        ->check(CLI::Range(1u, 1u << 16));
    sub->add_option("--chunks", options->max_chunks, "Evaluate at most this many chunks (default: all)")
        ->check(CLI::Range(1u, 1u << 30));
    sub->add_option("--kl-base", options->kl_base,
                    "Compare with a base: another GGUF file of the same model, or a file written by --save-logits");
    sub->add_option("--save-logits", options->save_logits,
                    "Save the model's log-probabilities at the scored positions, for a later --kl-base");
    sub->add_option("--logits-type", options->logits_type, "Value type of --save-logits: f16 or f32")
        ->check(CLI::IsMember({"f16", "f32"}))
        ->capture_default_str();
    sub->add_flag("--json", options->json, "Print one JSON object at the end instead of the running text");
    return {sub, [sub, options] { return run_perplexity(*sub, *options); }};
}

}  // namespace powerhouse::cli
