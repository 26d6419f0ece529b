// How long it takes to open a model and read its tensor index (mmap, validation, no copy
// of weights). Models: $POWERHOUSE_BENCH_MODELS (colon-separated paths), else the test
// model. scripts/bench-gguf-index synthesizes a Llama-3-8B-shaped Q4_K_M file and runs
// this on it.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_model.h"
#include "powerhouse/model_info.h"

namespace {

using namespace powerhouse;

std::vector<std::string> bench_models() {
    std::vector<std::string> paths;
    if (const char* env = std::getenv("POWERHOUSE_BENCH_MODELS"); env && *env) {
        std::stringstream list(env);
        for (std::string p; std::getline(list, p, ':');) {
            if (!p.empty()) paths.push_back(p);
        }
        return paths;
    }
    const char* home = std::getenv("HOME");
    paths.push_back(std::string(home ? home : "/tmp") +
                    "/.cache/powerhouse/test-models/SmolLM2-135M-Instruct.Q4_1.gguf");
    return paths;
}

void open_model(benchmark::State& state, const std::string& path) {
    uint64_t tensors = 0;
    uint64_t bytes = 0;
    for (auto _ : state) {
        Result<GgufModel> model = GgufModel::open(path);
        if (!model.ok()) {
            state.SkipWithError(model.error().message.c_str());
            return;
        }
        tensors = model->tensors().size();
        bytes = model->total_file_size();
        benchmark::DoNotOptimize(model->tensors().back().data);
    }
    state.counters["tensors"] = static_cast<double>(tensors);
    state.counters["file_GiB"] = static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
}

void inspect(benchmark::State& state, const std::string& path) {
    for (auto _ : state) {
        Result<ModelInfo> info = inspect_model(path);
        if (!info.ok()) {
            state.SkipWithError(info.error().message.c_str());
            return;
        }
        benchmark::DoNotOptimize(info->n_params);
    }
}

}  // namespace

int main(int argc, char** argv) {
    for (const std::string& path : bench_models()) {
        const std::string name = std::filesystem::path(path).filename().string();
        benchmark::RegisterBenchmark(("open_index/" + name).c_str(), open_model, path)->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("inspect_model/" + name).c_str(), inspect, path)->Unit(benchmark::kMillisecond);
    }
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
