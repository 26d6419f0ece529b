// powerhouse-cli synth [--arch A] [--like PRESET] [--type T] -o FILE [--layers N] [--ctx N]
//                      [--seed S] [--threads T] [--force] [--dry-run] | --list
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "format.h"
#include "powerhouse/synth.h"

namespace powerhouse::cli {
namespace {

struct SynthCliOptions {
    SynthOptions synth;
    bool list = false;
    bool dry_run = false;
};

std::vector<std::string> preset_names() {
    std::vector<std::string> names;
    for (const SynthPreset& p : synth_presets()) names.push_back(p.name);
    return names;
}

std::vector<std::string> type_names() {
    std::vector<std::string> names;
    for (const SynthType& t : synth_types()) names.push_back(t.name);
    return names;
}

std::vector<std::string> architecture_names() {
    std::vector<std::string> names;
    for (const SynthPreset& p : synth_presets()) {
        if (p.is_default) names.push_back(p.architecture);
    }
    return names;
}

void print_list() {
    std::vector<std::vector<std::string>> rows;
    for (const SynthPreset& p : synth_presets()) {
        rows.push_back({p.name + (p.is_default ? " *" : ""), p.architecture, p.model_name, fmt::format("{}", p.n_layer),
                        fmt::format("{}", p.n_embd), fmt::format("{}", p.n_ff),
                        fmt::format("{}/{}x{}", p.n_head, p.n_head_kv, p.head_dim),
                        p.n_expert > 0 ? fmt::format("{}/{}x{}", p.n_expert, p.n_expert_used, p.n_ff_expert) : "-",
                        fmt::format("{}", p.n_vocab), fmt::format("{}", p.n_ctx_train),
                        p.tokenizer_model + "/" + p.tokenizer_pre});
    }
    std::printf("presets (--like; * = the default for --arch)\n");
    std::fputs(format_table({"preset", "arch", "model", "layers", "embd", "ffn", "heads/kv x dim", "experts/used x ffn",
                             "vocab", "context", "tokenizer"},
                            rows)
                   .c_str(),
               stdout);
    rows.clear();
    for (const SynthType& t : synth_types()) rows.push_back({t.name, fmt::format("{}", t.file_type), t.description});
    std::printf("\ntypes (--type; norms and biases are always F32)\n");
    std::fputs(format_table({"type", "file_type", "tensors"}, rows).c_str(), stdout);
    std::printf(
        "\nexperts (as llama.cpp's quantizer): the router ffn_gate_inp is always F32; ffn_{gate,up,down}_exps follow "
        "ffn_{gate,up,down};\nwith exactly 8 experts (Mixtral) attn_v and attn_k are Q8_0, and attn_output Q5_K in "
        "q2_k, q3_k_m, q4_k_s and q4_k_m\n");
}

// One status line on stderr, redrawn in place on a terminal and a few times in all
// otherwise (logs).
class ProgressLine {
public:
    ProgressLine() : tty_(::isatty(STDERR_FILENO) != 0) {}

    bool update(const SynthProgress& p, const std::filesystem::path& output) {
        if (!started_) {
            // The first call comes once the options are checked and the file laid out.
            std::fprintf(stderr, "writing %s: %zu tensors, %s\n", output.c_str(), p.n_tensors,
                         format_bytes(p.bytes_total).c_str());
            started_ = true;
            start_ = std::chrono::steady_clock::now();  // rates and estimates count the writing only
        }
        const auto now = std::chrono::steady_clock::now();
        const double elapsed = std::chrono::duration<double>(now - start_).count();
        const double fraction = p.bytes_total > 0 ? static_cast<double>(p.bytes_done) / p.bytes_total : 1.0;
        const bool finished = p.tensor_index >= p.n_tensors;
        if (tty_) {
            if (!finished && now - last_ < std::chrono::milliseconds(200)) return true;
        } else {
            const int decile = static_cast<int>(fraction * 10);
            if (!finished && decile <= last_decile_) return true;
            last_decile_ = decile;
        }
        last_ = now;
        std::string eta;
        if (fraction > 0.01 && !finished) {
            eta = fmt::format(", {:.0f} s left", elapsed * (1.0 - fraction) / fraction);
        }
        const std::string line = fmt::format(
            "[{:3.0f}%] {} / {}, tensor {}/{} {}{}", fraction * 100, format_bytes(p.bytes_done),
            format_bytes(p.bytes_total), std::min(p.tensor_index + 1, p.n_tensors), p.n_tensors, p.tensor_name, eta);
        if (tty_) {
            std::fprintf(stderr, "\r%-100s%s", line.c_str(), finished ? "\n" : "");
        } else {
            std::fprintf(stderr, "%s\n", line.c_str());
        }
        return true;
    }

private:
    bool tty_;
    bool started_ = false;
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point last_{};
    int last_decile_ = -1;
};

// --dry-run: what the file would be, without writing it (sizing real-size files).
int print_plan(const SynthOptions& options) {
    Result<SynthPlan> planned = plan_synth_model(options);
    if (!planned) return report_error(planned.error());
    const SynthPlan& plan = *planned;
    std::printf("would write %s: %s (%s), %u layer%s, %s, %zu tensors, %s parameters, %s (%llu bytes)\n",
                options.output.empty() ? "(no file)" : options.output.c_str(), plan.preset.name.c_str(),
                plan.preset.model_name.c_str(), plan.preset.n_layer, plan.preset.n_layer == 1 ? "" : "s",
                plan.type.name.c_str(), plan.tensors.size(), format_count(plan.n_params).c_str(),
                format_bytes(plan.file_bytes).c_str(), static_cast<unsigned long long>(plan.file_bytes));
    // Per tensor type, in order of first appearance: where the bytes go.
    std::vector<std::string> types;
    std::vector<uint64_t> counts, bytes;
    for (const SynthTensor& t : plan.tensors) {
        size_t i = 0;
        while (i < types.size() && types[i] != t.type) ++i;
        if (i == types.size()) {
            types.push_back(t.type);
            counts.push_back(0);
            bytes.push_back(0);
        }
        ++counts[i];
        bytes[i] += t.bytes;
    }
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < types.size(); ++i) {
        rows.push_back({types[i], fmt::format("{}", counts[i]), format_bytes(bytes[i])});
    }
    std::fputs(format_table({"type", "tensors", "size"}, rows).c_str(), stdout);
    return 0;
}

int run_synth(const SynthCliOptions& options) {
    if (options.list) {
        print_list();
        return 0;
    }
    if (options.dry_run) return print_plan(options.synth);
    if (options.synth.output.empty()) {
        std::fprintf(stderr,
                     "error: --output is required (or --list, --dry-run)\nRun with --help for more information.\n");
        return 2;
    }
    ProgressLine line;
    Result<SynthResult> result =
        synthesize_model(options.synth, [&](const SynthProgress& p) { return line.update(p, options.synth.output); });
    if (!result) return report_error(result.error());
    const SynthPlan& done = result->plan;
    std::printf("wrote %s: %s (%s), %u layer%s, %s, %zu tensors, %s parameters, %s in %.1f s\n", result->path.c_str(),
                done.preset.name.c_str(), done.preset.model_name.c_str(), done.preset.n_layer,
                done.preset.n_layer == 1 ? "" : "s", done.type.name.c_str(), done.tensors.size(),
                format_count(done.n_params).c_str(), format_bytes(done.file_bytes).c_str(), result->seconds);
    return 0;
}

}  // namespace

Command add_synth_command(CLI::App& app) {
    auto options = std::make_shared<SynthCliOptions>();
    CLI::App* sub = app.add_subcommand("synth", "Write a model with random weights and real shapes");
    sub->add_option("-o,--output", options->synth.output, "Model file to write (.gguf)");
    sub->add_option("--arch", options->synth.architecture, "Architecture; alone, picks its default preset")
        ->check(CLI::IsMember(architecture_names()));
    sub->add_option("--like", options->synth.preset, "Preset: the real model whose shapes to copy (default llama3-8b)")
        ->check(CLI::IsMember(preset_names()));
    sub->add_option("--type", options->synth.type, "File type: the mixture of tensor types")
        ->capture_default_str()
        ->check(CLI::IsMember(type_names()));
    sub->add_option("--layers", options->synth.n_layer, "Number of layers (default: the preset's)")
        ->check(CLI::Range(1u, 4096u));
    sub->add_option("--ctx", options->synth.n_ctx, "Training context length to record (default: the preset's)")
        ->check(CLI::Range(1u, 1u << 24));
    sub->add_option("--seed", options->synth.seed, "Seed of the random weights")->capture_default_str();
    sub->add_option("--threads", options->synth.threads, "Worker threads (default: all cores)")
        ->check(CLI::Range(1u, 1024u));
    sub->add_flag("--force", options->synth.overwrite, "Overwrite an existing file");
    sub->add_flag("--list", options->list, "List the presets and types, then exit");
    sub->add_flag("--dry-run", options->dry_run,
                  "Print the file's size and tensor types without writing it (--output optional)");
    return {sub, [options] { return run_synth(*options); }};
}

}  // namespace powerhouse::cli
