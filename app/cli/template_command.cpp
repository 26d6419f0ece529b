// powerhouse-cli template (-m MODEL | --template-file FILE | --builtin FAMILY)
//                         --context CONTEXT.json [--no-fallback] [--now TIME]
//
// Renders a chat template with the variables in CONTEXT.json (messages, tools,
// add_generation_prompt, bos_token, eos_token, anything else) and prints exactly the
// rendered text, with no newline added.
//
// -m MODEL: the model's tokenizer.chat_template; bos_token and eos_token default to the
//   model's own token strings unless CONTEXT.json sets them. When the model has no
//   template, or one that does not parse, the built-in template of the model's family
//   (ChatML when unknown) is used, as the app does, with a note on stderr; --no-fallback
//   makes that an error instead.
// --template-file FILE: that template (with -m too: the file's template, the model's tokens).
// --builtin FAMILY: a built-in template (chatml, llama3, mistral, gemma, harmony).
// --now "YYYY-MM-DD[THH:MM:SS]": the moment strftime_now() formats (default: now).
// --tokens (with -m): prints instead one JSON line {"ids": [...], "data_ranges": [[b, e], ...]}:
//   the prompt's token ids as the engine will feed them (special tokens recognised only in
//   the template's own text, no BOS added beyond what the template writes) and the byte
//   ranges of the rendered text that came from the context's data.
//
// A template that fails (a syntax error, raise_exception, a sandbox limit) is reported
// on stderr as "error: LINE:COLUMN: message" with exit status 1.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "format.h"
#include "powerhouse/chat_template.h"
#include "powerhouse/tokenizer.h"

namespace powerhouse::cli {
namespace {

struct TemplateOptions {
    std::string model;
    std::string template_file;
    std::string builtin;
    std::string context_file;
    std::string now;
    bool no_fallback = false;
    bool tokens = false;
};

Result<nlohmann::ordered_json> read_context(const std::string& path) {
    Result<std::string> text = read_file_text(path);
    if (!text) return text.error();
    nlohmann::ordered_json context = nlohmann::ordered_json::parse(*text, nullptr, false);
    if (context.is_discarded()) return make_error(ErrorCode::format, fmt::format("'{}' is not valid JSON", path));
    if (!context.is_object()) {
        return make_error(ErrorCode::format, fmt::format("'{}' must hold a JSON object of template variables", path));
    }
    return context;
}

// "2024-07-26" or "2024-07-26T14:05:09" (also with a space).
Result<std::chrono::local_seconds> parse_now(const std::string& text) {
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
    char sep = 0;
    const int n = std::sscanf(text.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d", &y, &mo, &d, &sep, &h, &mi, &s);
    using namespace std::chrono;
    const year_month_day date{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
    const bool time_ok = n == 3 || (n == 7 && (sep == 'T' || sep == ' ') && h < 24 && mi < 60 && s < 61);
    if (n < 3 || !date.ok() || !time_ok) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("--now '{}' is not YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS", text));
    }
    return local_days{date} + hours{h} + minutes{mi} + seconds{s};
}

Result<TemplateFamily> parse_family(const std::string& name) {
    for (TemplateFamily family : {TemplateFamily::chatml, TemplateFamily::llama3, TemplateFamily::mistral,
                                  TemplateFamily::gemma, TemplateFamily::harmony}) {
        if (template_family_name(family) == name) return family;
    }
    return make_error(ErrorCode::invalid_argument, fmt::format("unknown template family '{}'", name));
}

int run_template(const TemplateOptions& options) {
    Result<nlohmann::ordered_json> context = read_context(options.context_file);
    if (!context) return report_error(context.error());
    RenderOptions render_options;
    if (!options.now.empty()) {
        Result<std::chrono::local_seconds> now = parse_now(options.now);
        if (!now) return report_error(now.error());
        render_options.now = *now;
    }

    std::optional<ChatTemplate> chat_template;
    std::string origin;  // for parse errors: which template
    // For render errors, which come with a line and a column only: which template they are in.
    std::string where;
    if (!options.model.empty()) {
        where = fmt::format("the chat template of '{}': ", options.model);
        Result<ModelTemplateInfo> info = read_model_template_info(options.model);
        if (!info) return report_error(info.error());
        add_default_tokens(*context, *info);
        if (options.template_file.empty()) {
            if (options.no_fallback) {
                if (!info->chat_template) {
                    return report_error(
                        make_error(ErrorCode::unsupported,
                                   fmt::format("'{}' has no chat template (tokenizer.chat_template)", options.model)));
                }
                Result<ChatTemplate> own = ChatTemplate::parse(*info->chat_template);
                if (!own) {
                    return report_error(make_error(own.error().code, fmt::format("the chat template of '{}': {}",
                                                                                 options.model, own.error().message)));
                }
                chat_template = std::move(own).value();
            } else {
                ResolvedTemplate resolved = resolve_chat_template(*info);
                if (resolved.is_fallback) {
                    std::fprintf(stderr, "note: %s\n", resolved.note.c_str());
                    where = fmt::format("the built-in template standing in for that of '{}': ", options.model);
                }
                chat_template = std::move(resolved.chat_template);
            }
        }
    }
    if (!options.template_file.empty()) {
        Result<std::string> source = read_file_text(options.template_file);
        if (!source) return report_error(source.error());
        origin = options.template_file;
        where = origin + ":";
        Result<ChatTemplate> parsed = ChatTemplate::parse(*source);
        if (!parsed) {
            return report_error(make_error(parsed.error().code, fmt::format("{}:{}", origin, parsed.error().message)));
        }
        chat_template = std::move(parsed).value();
    }
    if (!options.builtin.empty()) {
        Result<TemplateFamily> family = parse_family(options.builtin);
        if (!family) return report_error(family.error());
        Result<ChatTemplate> parsed = ChatTemplate::parse(builtin_template(*family));
        if (!parsed) return report_error(parsed.error());
        chat_template = std::move(parsed).value();
        where = fmt::format("the built-in {} template: ", options.builtin);
    }
    const auto render_error = [&](const Error& error) {
        return report_error(make_error(error.code, where + error.message));
    };

    if (options.tokens) {
        Result<Tokenizer> tokenizer = Tokenizer::load(options.model);
        if (!tokenizer) return report_error(tokenizer.error());
        Result<RenderedPrompt> prompt = chat_template->render_prompt(*context, render_options);
        if (!prompt) return render_error(prompt.error());
        const nlohmann::ordered_json line = {{"ids", tokenizer->tokenize(prompt->segments(), false)},
                                             {"data_ranges", prompt->data_ranges}};
        std::fputs((json_text(line) + "\n").c_str(), stdout);
        return std::fflush(stdout) == 0 ? 0 : 1;
    }
    Result<std::string> rendered = chat_template->render(*context, render_options);
    if (!rendered) return render_error(rendered.error());
    std::fwrite(rendered->data(), 1, rendered->size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

Command add_template_command(CLI::App& app) {
    auto options = std::make_shared<TemplateOptions>();
    CLI::App* sub = app.add_subcommand("template", "Render a chat template with the variables in a JSON file");
    sub->footer(
        "Prints exactly the rendered text (no newline added). With -m, a model without a usable template gets the "
        "built-in template of its family and a note on stderr (--no-fallback: an error instead); bos_token and "
        "eos_token default to the model's tokens unless the context sets them.");
    auto* model = sub->add_option("-m,--model", options->model, "Model file (.gguf): its tokenizer.chat_template");
    auto* file = sub->add_option("--template-file", options->template_file,
                                 "Template file (with -m: this template, the model's tokens)");
    auto* builtin = sub->add_option("--builtin", options->builtin, "A built-in template")
                        ->check(CLI::IsMember({"chatml", "llama3", "mistral", "gemma", "harmony"}));
    builtin->excludes(model)->excludes(file);
    sub->add_option("--context", options->context_file,
                    "JSON object with the template variables (messages, tools, add_generation_prompt, ...); - for "
                    "stdin")
        ->required();
    sub->add_flag("--no-fallback", options->no_fallback,
                  "With -m: fail when the model's template is missing or broken instead of using a built-in one");
    sub->add_flag("--tokens", options->tokens,
                  "With -m: print the prompt's token ids and the byte ranges that came from the context, as JSON")
        ->needs(model);
    sub->add_option("--now", options->now, "The time strftime_now() sees: YYYY-MM-DD[THH:MM:SS] (default: now)");
    sub->callback([sub, options] {
        if (options->model.empty() && options->template_file.empty() && options->builtin.empty()) {
            throw CLI::RequiredError(sub->get_name() + ": one of -m, --template-file or --builtin");
        }
    });
    return {sub, [options] { return run_template(*options); }};
}

}  // namespace powerhouse::cli
