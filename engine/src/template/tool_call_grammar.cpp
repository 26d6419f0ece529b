// tool_call_grammar(): one call in the model's format as grammar text (powerhouse/grammar.h),
// the arguments from each function's JSON schema.
//
// Under a grammar the model can only write tokens that spell text, never control tokens
// (GrammarMatcher skips them), so the grammar avoids them where the parser can do without:
// Mistral's call is the bare [{"name": ..., "arguments": ...}] array that parse_answer()
// reads as a call when [TOOL_CALLS] is hidden, and Llama 3's the bare object. Harmony has
// no way around its <|channel|> and <|message|> tokens: the grammar spells them as text,
// which the parser reads the same but the model has to write out of ordinary tokens.
#include <fmt/format.h>

#include <cctype>

#include "powerhouse/grammar.h"
#include "powerhouse/tool_calls.h"

namespace powerhouse {

namespace {

// A JSON string literal (what the parser reads back as the name).
std::string json_string(const std::string& text) {
    return nlohmann::ordered_json(text).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

struct Function {
    std::string name;
    nlohmann::ordered_json parameters;
};

Result<std::vector<Function>> functions_of(const nlohmann::ordered_json& tools, std::string_view only) {
    std::vector<Function> functions;
    std::string names;
    for (size_t i = 0; i < tools.size(); ++i) {
        const nlohmann::ordered_json& tool = tools[i];
        const nlohmann::ordered_json* function = &tool;
        if (tool.is_object() && tool.contains("function")) function = &tool["function"];
        if (!function->is_object() || !function->contains("name") || !(*function)["name"].is_string() ||
            (*function)["name"].get_ref<const std::string&>().empty()) {
            return make_error(ErrorCode::invalid_argument, fmt::format("tools[{}] has no function name", i));
        }
        Function f;
        f.name = (*function)["name"].get<std::string>();
        names += (names.empty() ? "" : ", ") + f.name;
        if (!only.empty() && f.name != only) continue;
        f.parameters = function->contains("parameters") ? (*function)["parameters"] : nlohmann::ordered_json();
        if (f.parameters.is_null())
            f.parameters = {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}};
        if (!f.parameters.is_object() ||
            (f.parameters.contains("type") && f.parameters["type"] != nlohmann::ordered_json("object"))) {
            return make_error(ErrorCode::invalid_argument,
                              fmt::format("the parameters of function {} must be a schema of an object", f.name));
        }
        functions.push_back(std::move(f));
    }
    if (functions.empty()) {
        return make_error(ErrorCode::invalid_argument,
                          only.empty() ? std::string("there are no tools to call")
                                       : fmt::format("no tool is named {}; the tools are: {}", only, names));
    }
    return functions;
}

bool harmony_name(std::string_view name) {
    for (const char c : name) {
        if (std::isspace(static_cast<unsigned char>(c)) != 0 || c == '<') return false;
    }
    return true;
}

}  // namespace

Result<std::string> tool_call_grammar(ToolCallFormat format, const nlohmann::ordered_json& tools,
                                      std::string_view only_function) {
    if (format == ToolCallFormat::none) {
        return make_error(ErrorCode::unsupported,
                          "this model's chat template writes tool calls in a format Powerhouse does not know");
    }
    if (!has_tools(tools)) return make_error(ErrorCode::invalid_argument, "there are no tools to call");
    Result<std::vector<Function>> functions = functions_of(tools, only_function);
    if (!functions) return functions.error();

    std::string rules;
    std::string calls;
    for (size_t i = 0; i < functions->size(); ++i) {
        const Function& f = (*functions)[i];
        const std::string rule = fmt::format("fn{}", i);
        Result<std::string> arguments = json_schema_to_grammar(f.parameters, rule, rule + "-");
        if (!arguments) {
            return make_error(arguments.error().code,
                              fmt::format("the parameters of function {}: {}", f.name, arguments.error().message));
        }
        rules += *arguments;
        rules += "\n";
        std::string call;
        switch (format) {
            case ToolCallFormat::generic:
            case ToolCallFormat::hermes:
                call = grammar_literal("<tool_call>\n{\"name\": " + json_string(f.name) + ", \"arguments\": ") + " " +
                       rule + " " + grammar_literal("}\n</tool_call>");
                break;
            case ToolCallFormat::llama3:
                call = grammar_literal("{\"name\": " + json_string(f.name) + ", \"parameters\": ") + " " + rule + " " +
                       grammar_literal("}");
                break;
            case ToolCallFormat::mistral:
                call = grammar_literal("[{\"name\": " + json_string(f.name) + ", \"arguments\": ") + " " + rule + " " +
                       grammar_literal("}]");
                break;
            case ToolCallFormat::harmony:
                if (!harmony_name(f.name)) {
                    return make_error(
                        ErrorCode::invalid_argument,
                        fmt::format("function name {} cannot stand in a harmony header", json_string(f.name)));
                }
                call = grammar_literal("<|channel|>commentary to=functions." + f.name) +
                       " (\" \"? \"<|constrain|>json\")? " + grammar_literal("<|message|>") + " " + rule;
                break;
            case ToolCallFormat::none:
                break;
        }
        calls += (calls.empty() ? "" : " | ") + ("(" + call + ")");
    }
    std::string root = "root ::= ";
    if (format == ToolCallFormat::harmony) {
        // gpt-oss reasons before it acts: one analysis message may come first.
        root +=
            "(\"<|channel|>analysis<|message|>\" harmony-analysis \"<|end|><|start|>assistant\")? (" + calls + ")\n";
        root += "harmony-analysis ::= ([^<] | \"<\" [^|<])*\n";
    } else {
        root += calls + "\n";
    }
    return root + rules;
}

}  // namespace powerhouse
