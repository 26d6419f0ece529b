// powerhouse-cli embed [-m MODEL] [-p TEXT]... [-f FILE] [--pooling mean|last|cls]
//                      [--no-normalize] [--similarity] (the model options of generate)
//
// Embeddings of texts (Model::embed, what POST /v1/embeddings answers), for a retrieval
// pipeline or a quick look at how alike some sentences are. The inputs are the -p texts in
// order, then the lines of -f FILE ('-': standard input; blank lines skipped); with neither,
// the lines of standard input. Each is tokenized as the server tokenizes an input (the BOS
// token as the model asks, special tokens left as text) and embedded on a sequence of its
// own: with the model's pooling (its file's pooling_type, else mean) unless --pooling says
// otherwise, and of length 1 unless --no-normalize.
//
// Prints one JSON line per input, {"index": i, "tokens": n, "embedding": [...]}, or with
// --similarity the table of the inputs' cosine similarities instead.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "format.h"
#include "generation.h"
#include "powerhouse/model.h"

namespace powerhouse::cli {
namespace {

struct EmbedOptions {
    ModelChoice model;
    std::vector<std::string> texts;
    std::string file;
    std::string pooling;  // empty: the model's
    bool no_normalize = false;
    bool similarity = false;
};

// The -p texts, then the non-blank lines of the file (or of standard input when neither).
Result<std::vector<std::string>> read_inputs(const EmbedOptions& options) {
    std::vector<std::string> inputs = options.texts;
    const std::string file = !options.file.empty() ? options.file : (inputs.empty() ? "-" : "");
    if (file.empty()) return inputs;
    Result<std::string> text = read_file_text(file);
    if (!text) return text.error();
    std::istringstream lines(*text);
    for (std::string line; std::getline(lines, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") != std::string::npos) inputs.push_back(std::move(line));
    }
    if (inputs.empty()) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("nothing to embed: {} has no text; give texts with -p or one per line in -f FILE",
                                      file == "-" ? "standard input" : file));
    }
    return inputs;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        ab += static_cast<double>(a[i]) * b[i];
        aa += static_cast<double>(a[i]) * a[i];
        bb += static_cast<double>(b[i]) * b[i];
    }
    return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

void print_similarities(const std::vector<std::string>& inputs, const std::vector<std::vector<float>>& vectors) {
    constexpr size_t kShown = 40;  // characters of each input's text
    std::vector<std::string> header = {"#", "input"};
    for (size_t j = 0; j < inputs.size(); ++j) header.push_back(std::to_string(j));
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < inputs.size(); ++i) {
        std::string text = inputs[i];
        if (text.size() > kShown) {
            size_t cut = kShown;  // not inside a character's UTF-8 bytes
            while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
            text = text.substr(0, cut) + "...";
        }
        std::vector<std::string> row = {std::to_string(i), text};
        for (size_t j = 0; j < inputs.size(); ++j) row.push_back(fmt::format("{:.4f}", cosine(vectors[i], vectors[j])));
        rows.push_back(std::move(row));
    }
    const std::string table = format_table(header, rows);
    std::fwrite(table.data(), 1, table.size(), stdout);
}

int run_embed(const EmbedOptions& options) {
    Result<std::vector<std::string>> inputs = read_inputs(options);
    if (!inputs) return report_error(inputs.error());
    Result<ModelToLoad> to_load = resolve_model(options.model);
    if (!to_load) return report_error(to_load.error());
    Result<Model> model = Model::load(to_load->path, to_load->options);
    if (!model) return report_error(model.error());
    EmbeddingPooling pooling = default_pooling(model->summary().info);
    if (options.pooling == "mean") pooling = EmbeddingPooling::mean;
    if (options.pooling == "last") pooling = EmbeddingPooling::last;
    if (options.pooling == "cls") pooling = EmbeddingPooling::cls;

    std::vector<std::vector<float>> vectors;
    for (size_t i = 0; i < inputs->size(); ++i) {
        const std::vector<TokenId> tokens = model->tokenizer().tokenize((*inputs)[i], true, false);
        Result<std::vector<float>> vector = model->embed(tokens, pooling, !options.no_normalize);
        if (!vector) {
            return report_error(make_error(vector.error().code, fmt::format("input {} ({} tokens): {}", i,
                                                                            tokens.size(), vector.error().message)));
        }
        if (!options.similarity) {
            const std::string line =
                json_text(nlohmann::ordered_json{{"index", i}, {"tokens", tokens.size()}, {"embedding", *vector}});
            std::fwrite(line.data(), 1, line.size(), stdout);
            std::fputc('\n', stdout);
        }
        vectors.push_back(std::move(vector).value());
    }
    if (options.similarity) print_similarities(*inputs, vectors);
    return 0;
}

}  // namespace

Command add_embed_command(CLI::App& app) {
    auto options = std::make_shared<EmbedOptions>();
    CLI::App* sub = app.add_subcommand(
        "embed", "Embeddings of texts (what POST /v1/embeddings answers), one JSON line each, or their similarities");
    add_model_options(*sub, options->model);
    sub->add_option("-p,--text", options->texts, "A text to embed (may be given many times)");
    sub->add_option("-f,--file", options->file, "A file of texts to embed, one per line ('-': standard input)");
    sub->add_option("--pooling", options->pooling,
                    "How the rows of an input become one vector: mean, last (the last token's) or cls (the "
                    "first token's); default: the model's own (its file's pooling type, else mean)")
        ->check(CLI::IsMember({"mean", "last", "cls"}));
    sub->add_flag("--no-normalize", options->no_normalize, "Leave the vectors as pooled, not scaled to length 1");
    sub->add_flag("--similarity", options->similarity,
                  "Print the table of the inputs' cosine similarities instead of the vectors");
    return {sub, [options] { return run_embed(*options); }};
}

}  // namespace powerhouse::cli
