// powerhouse-cli info MODEL [--ctx N] [--kv-type f16|q8_0|f32] [--json]
//
// Reads the file's header only, never its weights: the shapes, the tensor types, the memory at
// a context, and what the chat template that chat, generate and serve would use says (the
// model's own, or the built-in one standing in for it): how it writes tool calls, and whether
// it reads the switches --no-think (enable_thinking) and --reasoning-effort turn.
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "format.h"
#include "powerhouse/chat_template.h"
#include "powerhouse/model_info.h"
#include "powerhouse/tool_calls.h"

namespace powerhouse::cli {
namespace {

struct InfoOptions {
    std::string model;
    uint32_t n_ctx = 0;  // 0: the model's training context, capped at 8192
    std::string kv_type = "f16";
    bool json = false;
};

// What a loaded model's ModelSummary says of its template (tool_format, has_thinking_switch,
// has_reasoning_effort), read from the file's metadata as the load reads it.
struct TemplateFacts {
    std::string note;  // why a built-in template stands in for the model's own; empty when it does not
    std::string_view tool_format;
    bool thinking_switch = false;
    bool reasoning_effort = false;
};

Result<TemplateFacts> template_facts(const std::filesystem::path& model) {
    Result<ModelTemplateInfo> info = read_model_template_info(model);
    if (!info) return info.error();
    const ResolvedTemplate resolved = resolve_chat_template(*info);
    const std::string& source = resolved.chat_template.source();
    return TemplateFacts{resolved.note, tool_call_format_name(detect_tool_call_format(source)),
                         template_uses_variable(source, "enable_thinking"),
                         template_uses_variable(source, "reasoning_effort")};
}

nlohmann::json to_json(const ModelInfo& info, const TemplateFacts& facts, const MemoryEstimate& memory) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : info.files) files.push_back(f.string());
    nlohmann::json types = nlohmann::json::array();
    for (const TensorTypeUsage& u : info.tensor_types) {
        types.push_back({{"type", u.type}, {"tensors", u.tensors}, {"elements", u.elements}, {"bytes", u.bytes}});
    }
    return {
        {"path", info.path.string()},
        {"files", files},
        {"file_size", info.file_size},
        {"gguf_version", info.gguf_version},
        {"name", info.name},
        {"architecture", info.architecture},
        {"file_type", info.file_type},
        {"n_params", info.n_params},
        {"n_tensors", info.n_tensors},
        {"n_layer", info.n_layer},
        {"n_head", info.n_head},
        {"n_head_kv", info.n_head_kv},
        {"n_embd", info.n_embd},
        {"n_ff", info.n_ff},
        {"head_dim_k", info.head_dim_k},
        {"head_dim_v", info.head_dim_v},
        {"n_ctx_train", info.n_ctx_train},
        {"n_vocab", info.n_vocab},
        {"tokenizer_model", info.tokenizer_model},
        {"tokenizer_pre", info.tokenizer_pre},
        {"has_chat_template", info.has_chat_template},
        {"embedding_only", info.embedding_only},
        {"pooling", info.pooling},
        {"chat_template_note", facts.note},
        {"tool_call_format", facts.tool_format},
        {"has_thinking_switch", facts.thinking_switch},
        {"has_reasoning_effort", facts.reasoning_effort},
        {"tensor_types", types},
        {"memory",
         {{"n_ctx", memory.n_ctx},
          {"kv_type", kv_cache_type_name(memory.kv_type)},
          {"weight_bytes", memory.weight_bytes},
          {"kv_cache_bytes", memory.kv_cache_bytes},
          {"total_bytes", memory.total_bytes()}}},
    };
}

void print_text(const ModelInfo& info, const TemplateFacts& facts, const MemoryEstimate& memory) {
    auto row = [](const char* label, const std::string& value) { std::printf("%-18s %s\n", label, value.c_str()); };
    row("file", info.path.string());
    if (info.files.size() > 1) row("parts", fmt::format("{} files", info.files.size()));
    row("size", format_bytes(info.file_size));
    row("name", info.name.empty() ? "(not set)" : info.name);
    row("architecture", info.architecture.empty() ? "(not set)" : info.architecture);
    row("parameters", fmt::format("{} ({})", format_count(info.n_params), info.n_params));
    row("quantization", info.file_type);
    row("layers", fmt::format("{}", info.n_layer));
    row("attention heads", fmt::format("{} (KV heads: {}, head size: {})", info.n_head, info.n_head_kv,
                                       info.head_dim_k));
    row("embedding", fmt::format("{}", info.n_embd));
    row("feed-forward", fmt::format("{}", info.n_ff));
    row("context (trained)", fmt::format("{}", info.n_ctx_train));
    row("vocabulary", fmt::format("{} tokens, tokenizer {}{}", info.n_vocab,
                                  info.tokenizer_model.empty() ? "(none)" : info.tokenizer_model,
                                  info.tokenizer_pre.empty() ? "" : " / " + info.tokenizer_pre));
    if (info.embedding_only) {
        // An encoder has no chat: what a template would say does not apply.
        row("use", fmt::format("embeddings only (pooling: {}): `embed`, or POST /v1/embeddings on `serve`; it "
                               "writes no text",
                               info.pooling.empty() ? "mean" : info.pooling));
    } else {
        const char* has_template = info.has_chat_template ? "yes" : "no";
        row("chat template", facts.note.empty() ? has_template : fmt::format("{} ({})", has_template, facts.note));
        row("tool calls", std::string(facts.tool_format));
        row("thinking switch", facts.thinking_switch ? "yes (enable_thinking: --no-think turns thinking off)" : "no");
        row("reasoning effort",
            facts.reasoning_effort ? "yes (reasoning_effort: --reasoning-effort low|medium|high)" : "no");
    }
    row("memory", fmt::format("{} at context {} = weights {} + KV cache {} ({})", format_bytes(memory.total_bytes()),
                              memory.n_ctx, format_bytes(memory.weight_bytes), format_bytes(memory.kv_cache_bytes),
                              kv_cache_type_name(memory.kv_type)));
    std::vector<std::vector<std::string>> rows;
    for (const TensorTypeUsage& u : info.tensor_types) {
        rows.push_back({u.type, fmt::format("{}", u.tensors), format_count(u.elements), format_bytes(u.bytes)});
    }
    std::printf("\ntensor types (%llu tensors)\n", static_cast<unsigned long long>(info.n_tensors));
    std::fputs(format_table({"type", "tensors", "elements", "bytes"}, rows).c_str(), stdout);
}

int run_info(const InfoOptions& options) {
    static const std::map<std::string, KvCacheType> kv_types = {
        {"f16", KvCacheType::f16}, {"q8_0", KvCacheType::q8_0}, {"f32", KvCacheType::f32}};
    Result<ModelInfo> info = inspect_model(options.model);
    if (!info) return report_error(info.error());
    Result<TemplateFacts> facts = template_facts(info->path);
    if (!facts) return report_error(facts.error());
    uint32_t n_ctx = options.n_ctx;
    if (n_ctx == 0) n_ctx = info->n_ctx_train > 0 ? std::min<uint32_t>(info->n_ctx_train, 8192) : 4096;
    const MemoryEstimate memory = estimate_memory(*info, n_ctx, kv_types.at(options.kv_type));
    if (options.json) {
        std::printf("%s\n", json_text(to_json(*info, *facts, memory), 2).c_str());
    } else {
        print_text(*info, *facts, memory);
    }
    return 0;
}

}  // namespace

Command add_info_command(CLI::App& app) {
    auto options = std::make_shared<InfoOptions>();
    CLI::App* sub = app.add_subcommand("info", "Describe a GGUF model file without loading it");
    sub->add_option("model", options->model, "Model file (.gguf; any part of a split model)")->required();
    sub->add_option("--ctx", options->n_ctx, "Context length for the memory estimate (default: min(trained, 8192))")
        ->check(CLI::Range(1u, 1u << 24));
    sub->add_option("--kv-type", options->kv_type, "KV cache type for the memory estimate")
        ->check(CLI::IsMember({"f16", "q8_0", "f32"}));
    sub->add_flag("--json", options->json, "Print JSON instead of text");
    return {sub, [options] { return run_info(*options); }};
}

}  // namespace powerhouse::cli
