// Suggested models: the list read, each planned on the machine's devices.
#include "catalog/suggestions.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "powerhouse/synth.h"

namespace powerhouse::catalog {

namespace {

using nlohmann::json;

Result<std::string> text_field(const json& entry, const char* field, const std::string& where, bool required) {
    const auto it = entry.find(field);
    if (it == entry.end() || it->is_null()) {
        if (!required) return std::string();
        return make_error(ErrorCode::format, fmt::format("{}: \"{}\" is missing", where, field));
    }
    if (!it->is_string()) return make_error(ErrorCode::format, fmt::format("{}.{} is not a string", where, field));
    std::string text = it->get<std::string>();
    if (required && text.empty()) return make_error(ErrorCode::format, fmt::format("{}.{} is empty", where, field));
    return text;
}

bool is_sha256(const std::string& text) {
    return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

std::string gpu_name(const std::vector<DeviceDesc>& gpus, uint32_t index) {
    return index < gpus.size() && !gpus[index].name.empty() ? fmt::format("GPU {} ({})", index, gpus[index].name)
                                                            : fmt::format("GPU {}", index);
}

}  // namespace

Result<std::vector<SuggestedModel>> parse_suggested_models(std::string_view text) {
    json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded()) return make_error(ErrorCode::format, "the list of suggested models is not valid JSON");
    if (!doc.is_object() || !doc.contains("models") || !doc["models"].is_array()) {
        return make_error(ErrorCode::format, "the list of suggested models has no \"models\" array");
    }
    if (doc.contains("version") && (!doc["version"].is_number_integer() || doc["version"].get<int64_t>() != 1)) {
        return make_error(ErrorCode::format, "the list of suggested models is not version 1, the one this program reads");
    }
    std::vector<SuggestedModel> out;
    const json& models = doc["models"];
    for (size_t i = 0; i < models.size(); ++i) {
        const std::string where = fmt::format("models[{}]", i);
        const json& entry = models[i];
        if (!entry.is_object()) return make_error(ErrorCode::format, fmt::format("{} is not an object", where));
        SuggestedModel m;
        struct Field {
            const char* name;
            std::string* to;
            bool required;
        };
        for (const Field& f : {Field{"name", &m.name, true}, Field{"summary", &m.summary, false},
                               Field{"repo", &m.repo, true}, Field{"quantization", &m.quantization, true},
                               Field{"like", &m.like, true}, Field{"type", &m.type, true}}) {
            Result<std::string> value = text_field(entry, f.name, where, f.required);
            if (!value) return std::move(value).error();
            *f.to = std::move(*value);
        }
        if (m.repo.find('/') == std::string::npos) {
            return make_error(ErrorCode::format, fmt::format("{}.repo \"{}\" is not ORG/NAME", where, m.repo));
        }
        const auto files = entry.find("files");
        if (files == entry.end() || !files->is_array() || files->empty()) {
            return make_error(ErrorCode::format, fmt::format("{}.files must list the model's files", where));
        }
        for (size_t j = 0; j < files->size(); ++j) {
            const std::string at = fmt::format("{}.files[{}]", where, j);
            const json& f = (*files)[j];
            if (!f.is_object()) return make_error(ErrorCode::format, fmt::format("{} is not an object", at));
            SuggestedFile file;
            Result<std::string> path = text_field(f, "path", at, true);
            if (!path) return std::move(path).error();
            file.path = std::move(*path);
            if (file.path.size() < 5 || file.path.substr(file.path.size() - 5) != ".gguf") {
                return make_error(ErrorCode::format, fmt::format("{}.path \"{}\" is not a .gguf file", at, file.path));
            }
            if (const auto size = f.find("size"); size != f.end() && !size->is_null()) {
                if (!size->is_number_unsigned() || size->get<uint64_t>() == 0) {
                    return make_error(ErrorCode::format, fmt::format("{}.size is not a positive number of bytes", at));
                }
                file.size = size->get<uint64_t>();
            }
            Result<std::string> sha = text_field(f, "sha256", at, false);
            if (!sha) return std::move(sha).error();
            if (!sha->empty() && !is_sha256(*sha)) {
                return make_error(ErrorCode::format, fmt::format("{}.sha256 is not 64 lower-case hex digits", at));
            }
            file.sha256 = std::move(*sha);
            m.files.push_back(std::move(file));
        }
        out.push_back(std::move(m));
    }
    return out;
}

std::vector<Result<ModelShape>> suggested_model_shapes(const std::vector<SuggestedModel>& models) {
    std::vector<Result<ModelShape>> shapes;
    for (const SuggestedModel& model : models) {
        SynthOptions synth;
        synth.preset = model.like;
        synth.type = model.type;
        // From the tensors alone: laying out the tokenizers too held about 45 MB for a moment.
        shapes.push_back(synth_model_shape(synth));
    }
    return shapes;
}

std::vector<Suggestion> suggest_models(const std::vector<SuggestedModel>& models, const std::vector<DeviceDesc>& gpus,
                                       const std::optional<DeviceDesc>& cpu, const PlanOptions& options,
                                       size_t max_recommended) {
    return suggest_models(models, suggested_model_shapes(models), gpus, cpu, options, max_recommended);
}

std::vector<Suggestion> suggest_models(const std::vector<SuggestedModel>& models,
                                       const std::vector<Result<ModelShape>>& shapes,
                                       const std::vector<DeviceDesc>& gpus, const std::optional<DeviceDesc>& cpu,
                                       const PlanOptions& options, size_t max_recommended) {
    std::vector<Suggestion> out;
    for (size_t i = 0; i < models.size(); ++i) {
        const SuggestedModel& model = models[i];
        Suggestion s;
        s.model = model;
        const Result<ModelShape>* shape = i < shapes.size() ? &shapes[i] : nullptr;
        if (shape == nullptr || !*shape) {
            s.where = fmt::format("cannot be planned: {}",
                                  shape != nullptr ? shape->error().message : std::string("no shape was made"));
            out.push_back(std::move(s));
            continue;
        }
        const bool sizes_known = std::all_of(model.files.begin(), model.files.end(),
                                             [](const SuggestedFile& f) { return f.size.has_value(); });
        s.size_bytes = (*shape)->weight_bytes();
        if (sizes_known) {
            s.size_bytes = 0;
            for (const SuggestedFile& f : model.files) s.size_bytes += *f.size;
        }
        std::string gpu_problem;
        if (!gpus.empty()) {
            Result<DevicePlan> plan = plan_devices(**shape, gpus, options);
            if (plan) {
                s.tokens_per_second = plan->tokens_per_second;
                if (plan->experts_in_ram_layers > 0) {
                    s.placement = SuggestedPlacement::gpu_and_ram;
                    s.where = fmt::format("fits with the experts of {} layer{} in RAM", plan->experts_in_ram_layers,
                                          plan->experts_in_ram_layers == 1 ? "" : "s");
                } else if (plan->devices.size() == 1) {
                    s.placement = SuggestedPlacement::gpu;
                    s.where = fmt::format("fits on {}", gpu_name(gpus, plan->devices.front().device));
                } else {
                    s.placement = SuggestedPlacement::split;
                    s.where = fmt::format("split over {} GPUs", plan->devices.size());
                }
            } else {
                gpu_problem = plan.error().message;
            }
        }
        if (s.placement == SuggestedPlacement::does_not_fit && cpu) {
            PlanOptions single = options;
            single.mode = SplitMode::single;
            single.use.clear();
            single.ratios.clear();
            single.main_device = 0;
            Result<DevicePlan> plan = plan_devices(**shape, {*cpu}, single);
            if (plan) {
                s.placement = SuggestedPlacement::cpu;
                s.tokens_per_second = plan->tokens_per_second;
                s.where = gpus.empty() ? "runs on the CPU" : "too big for the GPUs: runs on the CPU";
            } else if (gpu_problem.empty()) {
                gpu_problem = plan.error().message;
            }
        }
        if (s.placement == SuggestedPlacement::does_not_fit) {
            s.where = gpu_problem.empty() ? "no device to plan it on" : fmt::format("does not fit: {}", gpu_problem);
        }
        out.push_back(std::move(s));
    }
    // Recommend what runs wholly on GPUs first (on one or several), then with experts in RAM,
    // then on the CPU; the list's order (most capable first) within each.
    const auto tier = [](SuggestedPlacement p) {
        switch (p) {
            case SuggestedPlacement::gpu:
            case SuggestedPlacement::split: return 0;
            case SuggestedPlacement::gpu_and_ram: return 1;
            case SuggestedPlacement::cpu: return 2;
            case SuggestedPlacement::does_not_fit: break;
        }
        return 3;
    };
    size_t recommended = 0;
    for (int t = 0; t < 3; ++t) {
        for (Suggestion& s : out) {
            if (recommended < max_recommended && tier(s.placement) == t &&
                s.tokens_per_second >= kRecommendedTokensPerSecond) {
                s.recommended = true;
                ++recommended;
            }
        }
    }
    return out;
}

}  // namespace powerhouse::catalog
