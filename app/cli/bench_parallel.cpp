#include "bench_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "format.h"
#include "powerhouse/scheduler.h"

namespace powerhouse::cli {

namespace {

using Clock = std::chrono::steady_clock;

double mean_of(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

double stddev_of(const std::vector<double>& v) {
    if (v.size() < 2) return 0;
    const double m = mean_of(v);
    double sq = 0;
    for (double x : v) sq += (x - m) * (x - m);
    return std::sqrt(sq / static_cast<double>(v.size() - 1));
}

struct ParallelSample {
    double prefill_seconds = 0;    // the first step: every prompt, each request's first token
    double decode_seconds = 0;     // the steps with one token of every sequence only
    uint64_t decode_tokens = 0;
    double ttft_under_load = 0;    // the late request's time to first token
    uint64_t peak_kv_blocks = 0;   // blocks held by sequences (not counting cached prefixes)
};

// One run: n_seq requests start at once (their prompts in the first step), then generate
// n_gen tokens each; halfway, one more request with a prompt of its own arrives, and its
// time to first token is the time to first token under load.
Result<ParallelSample> run_parallel_once(Model& model, uint32_t n_seq, const ParallelBenchOptions& o, uint32_t rep) {
    model.drop_cached_prefixes();
    SchedulerOptions so;
    so.max_sequences = n_seq + 1;
    so.prefill_chunk = std::max<uint32_t>(o.n_batch, n_seq * static_cast<uint32_t>(o.n_prompt));
    Scheduler scheduler(model, so);
    GenerationSettings settings;
    settings.max_tokens = o.n_gen;
    settings.ignore_eos = true;
    settings.sampling.temperature = 0;
    const auto prompt_of = [&](uint32_t i) {
        std::mt19937 rng(o.seed + i * 7919u + rep * 104729u);
        std::uniform_int_distribution<TokenId> pick(0, model.tokenizer().n_vocab() - 1);
        std::vector<TokenId> p(static_cast<size_t>(o.n_prompt));
        for (TokenId& id : p) id = pick(rng);
        return p;
    };
    std::optional<Error> failed;
    std::map<uint64_t, GenerationStats> done;
    const auto on_done = [&](uint64_t id, Result<GenerationResult> r) {
        if (!r) failed = r.error();
        else done[id] = r->stats;
    };
    for (uint32_t i = 0; i < n_seq; ++i) PH_TRY(scheduler.submit(i, prompt_of(i), settings, {}, on_done));
    ParallelSample s;
    const uint64_t late = n_seq;
    bool late_started = false;
    for (uint64_t step = 0; !scheduler.idle(); ++step) {
        const bool with_late = late_started && done.count(late) == 0;
        const auto start = Clock::now();
        PH_TRY(scheduler.step());
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        if (failed) return *failed;
        const SchedulerStats st = scheduler.stats();
        s.peak_kv_blocks = std::max<uint64_t>(s.peak_kv_blocks, st.kv.total_blocks - st.kv.free_blocks - st.kv.cached_blocks);
        if (step == 0) {
            s.prefill_seconds = seconds;
        } else if (!with_late && st.running == n_seq) {
            s.decode_seconds += seconds;
            s.decode_tokens += n_seq;
        }
        if (!late_started && step + 1 == static_cast<uint64_t>(o.n_gen) / 2) {
            GenerationSettings one = settings;
            one.max_tokens = 1;
            PH_TRY(scheduler.submit(late, prompt_of(1000 + n_seq), one, {}, on_done));
            late_started = true;
        }
    }
    if (done.count(late) != 0) s.ttft_under_load = done[late].time_to_first_token;
    return s;
}

}  // namespace

int run_parallel_bench(Model& model, const ParallelBenchOptions& o) {
    nlohmann::ordered_json results = nlohmann::ordered_json::array();
    std::vector<std::vector<std::string>> rows;
    const KvStats kv = model.kv_stats();
    const double bytes_per_position = kv.block_size > 0 ? static_cast<double>(kv.block_bytes) / kv.block_size : 0.0;
    for (uint32_t n_seq : o.parallel) {
        if (n_seq + 1 > model.max_sequences()) {
            return report_error(make_error(
                ErrorCode::invalid_argument,
                fmt::format("--parallel {} needs {} sequences (one more arrives under load); this model on these "
                            "devices runs {} at once",
                            n_seq, n_seq + 1, model.max_sequences())));
        }
        if (Result<ParallelSample> warm = run_parallel_once(model, n_seq, o, 0); !warm) return report_error(warm.error());
        std::vector<double> tg, ttft_batch, ttft_load, pp;
        uint64_t peak_blocks = 0;
        for (int r = 0; r < o.repetitions; ++r) {
            Result<ParallelSample> s = run_parallel_once(model, n_seq, o, static_cast<uint32_t>(r + 1));
            if (!s) return report_error(s.error());
            tg.push_back(s->decode_seconds > 0 ? static_cast<double>(s->decode_tokens) / s->decode_seconds : 0.0);
            ttft_batch.push_back(s->prefill_seconds * 1e3);
            pp.push_back(static_cast<double>(n_seq) * o.n_prompt / s->prefill_seconds);
            ttft_load.push_back(s->ttft_under_load * 1e3);
            peak_blocks = std::max(peak_blocks, s->peak_kv_blocks);
        }
        const uint64_t held_positions = uint64_t{n_seq + 1} * static_cast<uint64_t>(o.n_prompt + o.n_gen);
        const uint64_t peak_bytes = peak_blocks * kv.block_bytes;
        results.push_back({{"sequences", n_seq},
                           {"tg_tokens_per_second", {{"mean", mean_of(tg)}, {"stddev", stddev_of(tg)}}},
                           {"pp_tokens_per_second", {{"mean", mean_of(pp)}, {"stddev", stddev_of(pp)}}},
                           {"ttft_batch_ms", {{"mean", mean_of(ttft_batch)}, {"stddev", stddev_of(ttft_batch)}}},
                           {"ttft_under_load_ms", {{"mean", mean_of(ttft_load)}, {"stddev", stddev_of(ttft_load)}}},
                           {"peak_kv_blocks", peak_blocks},
                           {"peak_kv_bytes", peak_bytes},
                           {"positions_held_at_most", held_positions},
                           {"kv_bytes_per_position", bytes_per_position}});
        rows.push_back({fmt::format("{}", n_seq), fmt::format("{:.2f} ± {:.2f}", mean_of(tg), stddev_of(tg)),
                        fmt::format("{:.2f} ± {:.2f}", mean_of(pp), stddev_of(pp)),
                        fmt::format("{:.1f} ± {:.1f}", mean_of(ttft_batch), stddev_of(ttft_batch)),
                        fmt::format("{:.1f} ± {:.1f}", mean_of(ttft_load), stddev_of(ttft_load)),
                        fmt::format("{} ({} of {} positions)", format_bytes(peak_bytes), peak_blocks * kv.block_size,
                                    held_positions)});
    }
    if (o.json) {
        o.json_out["parallel"] = results;
        return 0;
    }
    std::printf("\nseveral sequences at once: each reads a prompt of %d tokens (all in the first step), then "
                "generates %d;\nhalfway, one more request with a prompt of its own arrives (ttft under load)\n",
                o.n_prompt, o.n_gen);
    std::fputs(format_table({"sequences", "tg t/s (all)", "pp t/s (all)", "ttft ms (all start)", "ttft ms (under load)",
                             "KV in use (peak)"},
                            rows)
                   .c_str(),
               stdout);
    std::printf("KV cache: blocks of %u positions, %s each (%.0f bytes a position); the pool holds %u blocks\n",
                kv.block_size, format_bytes(kv.block_bytes).c_str(), bytes_per_position, kv.total_blocks);
    return 0;
}

}  // namespace powerhouse::cli
