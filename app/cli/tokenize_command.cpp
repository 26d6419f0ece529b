// powerhouse-cli tokenize -m MODEL [--no-bos] [--special]
//   stdin:  JSON lines {"text": "..."}      stdout: JSON lines {"ids": [...]}
// powerhouse-cli detokenize -m MODEL [--special]
//   stdin:  JSON lines {"ids": [...]}       stdout: JSON lines {"text": "..."}
// One output line per input line (blank lines are skipped). A line that is not what is
// expected stops the command with an error naming the line number (exit status 1).
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "format.h"
#include "powerhouse/tokenizer.h"

namespace powerhouse::cli {
namespace {

struct TokenizeOptions {
    std::string model;
    bool no_bos = false;
    bool special = false;
};

struct DetokenizeCliOptions {
    std::string model;
    bool special = false;
};

bool is_blank(const std::string& line) {
    return line.find_first_not_of(" \t\r") == std::string::npos;
}

int line_error(size_t line_number, const std::string& what) {
    return report_error(make_error(ErrorCode::invalid_argument, fmt::format("stdin line {}: {}", line_number, what)));
}

// Parses one input line as a JSON object; nullopt (and the reason in `why`) otherwise.
std::optional<nlohmann::json> parse_object(const std::string& line, std::string& why) {
    nlohmann::json value = nlohmann::json::parse(line, nullptr, false);
    if (value.is_discarded()) {
        why = "not valid JSON";
        return std::nullopt;
    }
    if (!value.is_object()) {
        why = "expected a JSON object";
        return std::nullopt;
    }
    return value;
}

void write_line(const nlohmann::json& value) {
    const std::string text = json_text(value);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
}

int run_tokenize(const TokenizeOptions& options) {
    Result<Tokenizer> tokenizer = Tokenizer::load(options.model);
    if (!tokenizer) return report_error(tokenizer.error());
    std::string line;
    size_t line_number = 0;
    while (std::getline(std::cin, line)) {
        ++line_number;
        if (is_blank(line)) continue;
        std::string why;
        const std::optional<nlohmann::json> object = parse_object(line, why);
        if (!object) return line_error(line_number, why + R"( (expected {"text": "..."}))");
        const auto text = object->find("text");
        if (text == object->end() || !text->is_string()) {
            return line_error(line_number, R"(expected {"text": "..."} with a string "text")");
        }
        const std::vector<TokenId> ids =
            tokenizer->tokenize(text->get_ref<const std::string&>(), !options.no_bos, options.special);
        write_line(nlohmann::json{{"ids", ids}});
    }
    return 0;
}

int run_detokenize(const DetokenizeCliOptions& options) {
    Result<Tokenizer> tokenizer = Tokenizer::load(options.model);
    if (!tokenizer) return report_error(tokenizer.error());
    std::string line;
    size_t line_number = 0;
    std::vector<TokenId> ids;
    while (std::getline(std::cin, line)) {
        ++line_number;
        if (is_blank(line)) continue;
        std::string why;
        const std::optional<nlohmann::json> object = parse_object(line, why);
        if (!object) return line_error(line_number, why + R"( (expected {"ids": [...]}))");
        const auto list = object->find("ids");
        if (list == object->end() || !list->is_array()) {
            return line_error(line_number, R"(expected {"ids": [...]} with an array "ids")");
        }
        ids.clear();
        for (const auto& id : *list) {
            if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tokenizer->n_vocab()) {
                return line_error(line_number, fmt::format("{} is not a token id (the vocabulary has {} tokens)",
                                                           id.dump(), tokenizer->n_vocab()));
            }
            ids.push_back(static_cast<TokenId>(id.get<int64_t>()));
        }
        write_line(nlohmann::json{{"text", tokenizer->detokenize(ids, options.special)}});
    }
    return 0;
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
    auto options = std::make_shared<TokenizeOptions>();
    CLI::App* sub =
        app.add_subcommand("tokenize", R"(Tokenize JSON lines {"text": ...} from stdin into {"ids": [...]})");
    sub->add_option("-m,--model", options->model, "Model or vocabulary file (.gguf)")->required();
    sub->add_flag("--no-bos", options->no_bos, "Do not add the BOS/EOS tokens the model asks for");
    sub->add_flag("--special", options->special, "Recognise special tokens such as <|im_start|> in the text");
    return {sub, [options] { return run_tokenize(*options); }};
}

Command add_detokenize_command(CLI::App& app) {
    auto options = std::make_shared<DetokenizeCliOptions>();
    CLI::App* sub = app.add_subcommand("detokenize", R"(Turn JSON lines {"ids": [...]} from stdin into {"text": ...})");
    sub->add_option("-m,--model", options->model, "Model or vocabulary file (.gguf)")->required();
    sub->add_flag("--special", options->special, "Show control tokens such as <|im_end|> as text");
    return {sub, [options] { return run_detokenize(*options); }};
}

}  // namespace powerhouse::cli
