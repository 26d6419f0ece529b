// tool_call_grammar(): one call in the model's format as grammar text (powerhouse/grammar.h),
// the arguments from each function's JSON schema.
//
// Under a grammar the model can only write tokens that spell text, never control tokens
// (GrammarMatcher skips them), so the grammar avoids them where the parser can do without:
// Mistral's call is the bare [{"name": ..., "arguments": ...}] array that parse_answer()
// reads as a call when [TOOL_CALLS] is hidden, and Llama 3's the bare object. Harmony has
// no way around its <|channel|> and <|message|> tokens: the grammar spells them as text,
// which the parser reads the same but the model has to write out of ordinary tokens; so
// has Seed-OSS with its <seed:tool_call> and <seed:think>.
//
// The XML formats write a value per parameter: JSON from the parameter's schema where it
// cannot be a string, else text up to the closing tag, as rules of a small automaton
// (text_without).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "powerhouse/grammar.h"
#include "powerhouse/tool_calls.h"
#include "template/tool_call_reading.h"

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

// Rules `name`, `name`-1, ... for any text that does not contain `stop` (whose first
// character does not come back in it): state k has just read the first k characters of
// `stop`, and never reads the last one.
std::string text_without(const std::string& name, std::string_view stop) {
    auto not_in = [](std::string_view chars) {
        std::string out = "[^";
        for (const char c : chars) out += fmt::format("\\x{:02X}", static_cast<unsigned char>(c));
        return out + "]";
    };
    auto state = [&](size_t k) { return k == 0 ? name : fmt::format("{}-{}", name, k); };
    const std::string first(1, stop[0]);
    const std::string restart = grammar_literal(first) + " " + state(1);
    std::string rules = name + " ::= (" + not_in(first) + " " + name + " | " + restart + ")?\n";
    for (size_t k = 1; k < stop.size(); ++k) {
        std::string alternatives;
        if (k + 1 < stop.size()) alternatives = grammar_literal(stop.substr(k, 1)) + " " + state(k + 1) + " | ";
        alternatives += restart + " | " + not_in(std::string{stop[k], stop[0]}) + " " + name;
        rules += state(k) + " ::= (" + alternatives + ")?\n";
    }
    return rules;
}

// A name the XML formats can write between their tags.
bool xml_name(std::string_view name) {
    return !name.empty() && name.find_first_of("<>\n\r") == std::string_view::npos;
}

// The value of one parameter in an XML format: rules named `rule`.
Result<std::string> xml_value(const nlohmann::ordered_json& schema, const std::string& rule, std::string_view stop) {
    const unsigned string_bit = tool_reading::kind_bit(tool_reading::JsonKind::string);
    const unsigned kinds = tool_reading::schema_kinds(schema);
    if (kinds != 0 && (kinds & string_bit) == 0) return json_schema_to_grammar(schema, rule, rule + "-");
    if (kinds == string_bit && schema.is_object()) {
        // A choice of strings: exactly one of them.
        std::vector<nlohmann::ordered_json> choices;
        if (auto values = schema.find("enum"); values != schema.end() && values->is_array()) {
            choices.assign(values->begin(), values->end());
        } else if (auto value = schema.find("const"); value != schema.end()) {
            choices.push_back(*value);
        }
        std::string alternatives;
        for (const nlohmann::ordered_json& choice : choices) {
            if (!choice.is_string()) continue;
            alternatives += (alternatives.empty() ? "" : " | ") + grammar_literal(choice.get<std::string>());
        }
        if (!alternatives.empty()) return rule + " ::= " + alternatives + "\n";
    }
    return text_without(rule, stop);
}

// One call to `f` in an XML format, its rules added to `rules`.
Result<std::string> xml_call(ToolCallFormat format, const Function& f, const std::string& rule, std::string& rules) {
    if (!xml_name(f.name) ||
        (format == ToolCallFormat::glm45 && f.name.find_first_of(" \t{}\"") != std::string::npos)) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("function name {} cannot be written in the {} format", json_string(f.name),
                                      tool_call_format_name(format)));
    }
    const std::string_view stop = format == ToolCallFormat::glm45 ? "</arg_value>" : "</parameter>";
    std::string params;
    const auto properties = f.parameters.find("properties");
    if (properties != f.parameters.end() && properties->is_object()) {
        const auto required = f.parameters.find("required");
        size_t i = 0;
        for (const auto& [key, schema] : properties->items()) {
            if (!xml_name(key)) {
                return make_error(ErrorCode::invalid_argument,
                                  fmt::format("parameter {} of function {} cannot be written in the {} format",
                                              json_string(key), f.name, tool_call_format_name(format)));
            }
            const std::string value_rule = fmt::format("{}-p{}", rule, i++);
            Result<std::string> value = xml_value(schema, value_rule, stop);
            if (!value) {
                return make_error(value.error().code,
                                  fmt::format("parameter {} of function {}: {}", key, f.name, value.error().message));
            }
            rules += *value;
            std::string param;
            switch (format) {
                case ToolCallFormat::qwen3_coder:
                    param = grammar_literal("<parameter=" + key + ">\n") + " " + value_rule + " " +
                            grammar_literal("\n</parameter>\n");
                    break;
                case ToolCallFormat::seed_oss:
                    param = grammar_literal("<parameter=" + key + ">") + " " + value_rule + " " +
                            grammar_literal("</parameter>\n");
                    break;
                default:
                    param = grammar_literal("<arg_key>" + key + "</arg_key>\n<arg_value>") + " " + value_rule + " " +
                            grammar_literal("</arg_value>\n");
                    break;
            }
            const bool is_required = required != f.parameters.end() && required->is_array() &&
                                     std::find(required->begin(), required->end(), key) != required->end();
            params += is_required ? " " + param : " (" + param + ")?";
        }
    }
    switch (format) {
        case ToolCallFormat::qwen3_coder:
            return grammar_literal("<tool_call>\n<function=" + f.name + ">\n") + params + " " +
                   grammar_literal("</function>\n</tool_call>");
        case ToolCallFormat::seed_oss:
            return grammar_literal("<seed:tool_call>\n<function=" + f.name + ">\n") + params + " " +
                   grammar_literal("</function>\n</seed:tool_call>");
        default:
            return grammar_literal("<tool_call>" + f.name + "\n") + params + " " + grammar_literal("</tool_call>");
    }
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
        if (tool_reading::is_xml_format(format)) {
            Result<std::string> call = xml_call(format, f, rule, rules);
            if (!call) return call.error();
            calls += (calls.empty() ? "" : " | ") + ("(" + *call + ")");
            continue;
        }
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
            case ToolCallFormat::qwen3_coder:
            case ToolCallFormat::seed_oss:
            case ToolCallFormat::glm45:
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
    } else if (const tool_reading::TagPair think = tool_reading::think_tags(format); !think.open.empty()) {
        // Seed-OSS and GLM think first (GLM's answer opens with a line break).
        root += std::string(format == ToolCallFormat::glm45 ? "\"\\n\"? " : "") + "(" + grammar_literal(think.open) +
                " xml-think " + grammar_literal(think.close) + " \"\\n\"?)? (" + calls + ")\n";
        root += text_without("xml-think", think.close);
    } else {
        root += calls + "\n";
    }
    return root + rules;
}

}  // namespace powerhouse
