#include "powerhouse/model_info.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "arch/architecture.h"
#include "arch/hparams.h"
#include "gguf/gguf_model.h"
#include "model/model_info_internal.h"

namespace powerhouse {
namespace {

// A hyper-parameter that may be a scalar or a per-layer array (some models vary the FFN
// size or KV heads by layer); the largest value is what sizes buffers.
uint32_t uint_or_max(const GgufMetadata& meta, const std::string& key) {
    if (auto v = meta.get_uint(key)) return static_cast<uint32_t>(std::min<uint64_t>(*v, UINT32_MAX));
    const GgufArray* array = meta.get_array(key);
    if (array == nullptr) return 0;
    uint64_t best = 0;
    for (uint64_t i = 0; i < array->count; ++i) {
        switch (array->element_type) {
            case GgufValueType::u32: best = std::max<uint64_t>(best, array->at<uint32_t>(i)); break;
            case GgufValueType::i32: best = std::max<uint64_t>(best, std::max(0, array->at<int32_t>(i))); break;
            case GgufValueType::u64: best = std::max<uint64_t>(best, array->at<uint64_t>(i)); break;
            default: return 0;
        }
    }
    return static_cast<uint32_t>(std::min<uint64_t>(best, UINT32_MAX));
}

}  // namespace

const char* kv_cache_type_name(KvCacheType type) {
    switch (type) {
        case KvCacheType::f16: return "f16";
        case KvCacheType::q8_0: return "q8_0";
        case KvCacheType::f32: return "f32";
    }
    return "f16";
}

std::string file_type_name(uint32_t file_type) {
    static const std::map<uint32_t, const char*> names = {
        {0, "F32"},      {1, "F16"},     {2, "Q4_0"},     {3, "Q4_1"},    {7, "Q8_0"},    {8, "Q5_0"},
        {9, "Q5_1"},     {10, "Q2_K"},   {11, "Q3_K_S"},  {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"},
        {15, "Q4_K_M"},  {16, "Q5_K_S"}, {17, "Q5_K_M"},  {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},
        {21, "Q2_K_S"},  {22, "IQ3_XS"}, {23, "IQ3_XXS"}, {24, "IQ1_S"},  {25, "IQ4_NL"}, {26, "IQ3_S"},
        {27, "IQ3_M"},   {28, "IQ2_S"},  {29, "IQ2_M"},   {30, "IQ4_XS"}, {31, "IQ1_M"},  {32, "BF16"},
        {36, "TQ1_0"},   {37, "TQ2_0"},  {38, "MXFP4_MOE"},
    };
    auto it = names.find(file_type);
    return it != names.end() ? it->second : fmt::format("type {}", file_type);
}

Result<ModelInfo> inspect_model(const std::filesystem::path& path) {
    Result<GgufModel> opened = GgufModel::open(path);
    if (!opened) return std::move(opened).error();
    return inspect_gguf(*opened, path);
}

Result<ModelInfo> inspect_gguf(const GgufModel& model, const std::filesystem::path& path) {
    const GgufMetadata& meta = model.metadata();

    ModelInfo info;
    info.path = path;
    for (const GgufFile& part : model.parts()) {
        info.files.push_back(part.path().empty() ? std::filesystem::path(part.name()) : part.path());
    }
    info.file_size = model.total_file_size();
    info.gguf_version = model.parts().front().version();
    info.name = std::string(meta.get_string("general.name").value_or(""));
    info.architecture = std::string(meta.get_string("general.architecture").value_or(""));
    info.basename = std::string(meta.get_string("general.basename").value_or(""));
    info.size_label = std::string(meta.get_string("general.size_label").value_or(""));
    info.finetune = std::string(meta.get_string("general.finetune").value_or(""));

    const std::string a = info.architecture;
    info.n_layer = uint_or_max(meta, a + ".block_count");
    // A file with too many is described as it is; loading it fails with the reason.
    if (const Result<uint32_t> nextn = arch::prediction_blocks(meta, a, info.n_layer); nextn) {
        info.n_layer_nextn = *nextn;
        info.n_layer -= *nextn;
    }
    info.n_head = uint_or_max(meta, a + ".attention.head_count");
    info.n_head_kv = uint_or_max(meta, a + ".attention.head_count_kv");
    if (info.n_head_kv == 0) info.n_head_kv = info.n_head;  // absent means no grouping
    info.n_embd = uint_or_max(meta, a + ".embedding_length");
    info.n_ff = uint_or_max(meta, a + ".feed_forward_length");
    info.n_ctx_train = uint_or_max(meta, a + ".context_length");
    // llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last, 4 rank.
    if (const std::optional<uint64_t> pooling = meta.get_uint(a + ".pooling_type")) {
        info.pooling = *pooling == 1 ? "mean" : *pooling == 2 ? "cls" : *pooling == 3 ? "last" : "";
    }
    if (const arch::Architecture* known = arch::find_architecture(a)) info.embedding_only = known->embedding_only;
    info.head_dim_k = uint_or_max(meta, a + ".attention.key_length");
    info.head_dim_v = uint_or_max(meta, a + ".attention.value_length");
    if (info.head_dim_k == 0 && info.n_head > 0) info.head_dim_k = info.n_embd / info.n_head;
    if (info.head_dim_v == 0) info.head_dim_v = info.head_dim_k;
    info.n_expert = uint_or_max(meta, a + ".expert_count");
    info.n_expert_used = uint_or_max(meta, a + ".expert_used_count");
    info.n_ff_expert = uint_or_max(meta, a + ".expert_feed_forward_length");
    if (info.n_ff_expert == 0 && info.n_expert > 0) info.n_ff_expert = info.n_ff;

    info.tokenizer_model = std::string(meta.get_string("tokenizer.ggml.model").value_or(""));
    info.tokenizer_pre = std::string(meta.get_string("tokenizer.ggml.pre").value_or(""));
    if (const GgufArray* tokens = meta.get_array("tokenizer.ggml.tokens")) {
        info.n_vocab = static_cast<uint32_t>(std::min<uint64_t>(tokens->count, UINT32_MAX));
    } else {
        info.n_vocab = uint_or_max(meta, a + ".vocab_size");
    }
    info.has_chat_template = meta.get_string("tokenizer.chat_template").has_value();

    std::map<GgmlType, TensorTypeUsage> usage;
    for (const GgufTensorInfo& t : model.tensors()) {
        TensorTypeUsage& u = usage[t.type];
        u.type = std::string(type_traits(t.type).name);
        u.tensors += 1;
        u.elements += static_cast<uint64_t>(t.n_elements);
        u.bytes += t.n_bytes;
        info.n_params += static_cast<uint64_t>(t.n_elements);
        info.weight_bytes += t.n_bytes;
    }
    info.n_tensors = model.tensors().size();
    for (auto& [type, u] : usage) info.tensor_types.push_back(u);
    std::sort(info.tensor_types.begin(), info.tensor_types.end(),
              [](const TensorTypeUsage& x, const TensorTypeUsage& y) { return x.bytes > y.bytes; });

    if (auto ft = meta.get_uint("general.file_type")) {
        info.file_type = file_type_name(static_cast<uint32_t>(*ft));
    } else if (!info.tensor_types.empty()) {
        info.file_type = info.tensor_types.front().type;
    }
    return info;
}

MemoryEstimate estimate_memory(const ModelInfo& info, uint32_t n_ctx, KvCacheType kv_type) {
    MemoryEstimate e;
    e.n_ctx = n_ctx;
    e.kv_type = kv_type;
    e.weight_bytes = info.weight_bytes;
    const uint64_t elements_per_position =
        static_cast<uint64_t>(info.n_head_kv) * (info.head_dim_k + info.head_dim_v) * info.n_layer;
    const uint64_t elements = elements_per_position * n_ctx;
    switch (kv_type) {
        case KvCacheType::f16: e.kv_cache_bytes = elements * 2; break;
        case KvCacheType::f32: e.kv_cache_bytes = elements * 4; break;
        case KvCacheType::q8_0: e.kv_cache_bytes = elements / 32 * 34; break;
    }
    return e;
}

Result<void> check_runnable(const std::filesystem::path& path) {
    Result<GgufModel> opened = GgufModel::open(path);
    if (!opened) return std::move(opened).error();
    Result<arch::Hparams> hparams = arch::read_hparams(*opened);
    if (!hparams) return std::move(hparams).error();
    return {};
}

}  // namespace powerhouse
