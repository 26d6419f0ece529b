#include "requests.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <span>

#include "powerhouse/grammar.h"

namespace powerhouse::server {

std::string to_text(const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

json error_body(const ApiError& e) {
    return {{"error",
             {{"message", e.message},
              {"type", e.type},
              {"param", e.param ? json(*e.param) : json(nullptr)},
              {"code", e.code ? json(*e.code) : json(nullptr)}}}};
}

ApiError bad(std::string param, std::string message) {
    return ApiError{400, std::move(message), "invalid_request_error",
                    param.empty() ? std::nullopt : std::optional<std::string>(std::move(param)), std::nullopt};
}

ApiError engine_error(const Error& e) {
    switch (e.code) {
        case ErrorCode::invalid_argument:
        case ErrorCode::context_full:
        case ErrorCode::out_of_memory:
            return ApiError{400, e.message, "invalid_request_error", std::nullopt,
                            e.code == ErrorCode::context_full ? std::optional<std::string>("context_length_exceeded")
                                                              : std::nullopt};
        case ErrorCode::unsupported:
            // The request asks what the model cannot do (text of an embedding model).
            return ApiError{400, e.message, "invalid_request_error", std::nullopt, std::string("model_not_supported")};
        case ErrorCode::device_failed:
            // The server's trouble, not the request's: 503, which a client may try again later.
            return ApiError{503, e.message, "server_error", std::nullopt, std::string("device_failed")};
        default:
            return ApiError{500, e.message, "server_error", std::nullopt, std::nullopt};
    }
}

const char* finish_reason(StopReason reason) {
    switch (reason) {
        case StopReason::length:
        case StopReason::context:
            return "length";
        default:
            return "stop";
    }
}

json logprobs_content(std::span<const TokenLogprob> logprobs) {
    const auto entry = [](const TokenChoice& c) {
        json bytes = json::array();
        for (char ch : c.bytes) bytes.push_back(static_cast<int>(static_cast<unsigned char>(ch)));
        // A token that is part of a UTF-8 character shows U+FFFD for the broken bytes once
        // dumped (to_text), as OpenAI does; its bytes say exactly what it is.
        return json{{"token", c.bytes},
                    {"logprob", std::max(c.logprob, -9999.0f)},  // -inf is not JSON
                    {"bytes", std::move(bytes)}};
    };
    json content = json::array();
    for (const TokenLogprob& lp : logprobs) {
        json e = entry(lp.chosen);
        json top = json::array();
        for (const TokenChoice& t : lp.top) top.push_back(entry(t));
        e["top_logprobs"] = std::move(top);
        content.push_back(std::move(e));
    }
    return content;
}

bool json_depth_within(std::string_view text, int max_depth) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') {
                ++i;  // the escaped character, whatever it is
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) return false;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return true;
}

namespace {

// A member that should be a string, or "" when it is missing or of another type.
std::string string_field(const json& object, const char* name) {
    if (!object.is_object()) return {};
    const auto it = object.find(name);
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The text of a message's content: a string, or an array of {"type": "text", "text": ...}.
std::optional<std::string> content_text(const json& content) {
    if (content.is_string()) return content.get<std::string>();
    if (content.is_null()) return std::string();
    if (!content.is_array()) return std::nullopt;
    std::string text;
    for (const json& part : content) {
        if (!part.is_object() || string_field(part, "type") != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
            return std::nullopt;
        }
        text += part["text"].get<std::string>();
    }
    return text;
}

// A number field within [lo, hi], or the default when absent or null.
std::optional<ApiError> read_number(const json& body, const char* name, double lo, double hi, float& out) {
    if (!body.contains(name) || body[name].is_null()) return std::nullopt;
    if (!body[name].is_number()) return bad(name, fmt::format("'{}' must be a number", name));
    const double v = body[name].get<double>();
    if (!(v >= lo && v <= hi)) return bad(name, fmt::format("'{}' must be between {} and {}", name, lo, hi));
    out = static_cast<float>(v);
    return std::nullopt;
}

std::optional<ApiError> check_model(const json& body, const std::string& model_id) {
    if (!body.is_object()) return bad("", "the body must be a JSON object");
    if (!body.contains("model") || !body["model"].is_string()) return bad("model", "'model' must be a string");
    if (body["model"].get<std::string>() != model_id) {
        return ApiError{404,
                        fmt::format("the model '{}' does not exist; this server serves '{}'",
                                    body["model"].get<std::string>(), model_id),
                        "invalid_request_error", std::string("model"), std::string("model_not_found")};
    }
    return std::nullopt;
}

bool present(const json& body, const char* name) {
    return body.contains(name) && !body[name].is_null();
}

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}].
std::optional<ApiError> read_tool_calls(const json& calls, const std::string& where, ChatMessage& m) {
    if (!calls.is_array()) return bad(where, where + " must be an array");
    for (size_t k = 0; k < calls.size(); ++k) {
        const json& c = calls[k];
        const std::string at = fmt::format("{}[{}]", where, k);
        if (!c.is_object() || !present(c, "function") || !c["function"].is_object()) {
            return bad(at, at + " must be an object with a 'function'");
        }
        const json& f = c["function"];
        if (!present(f, "name") || !f["name"].is_string())
            return bad(at + ".function.name", "a tool call needs a name");
        ToolCall call;
        call.name = f["name"].get<std::string>();
        call.id = present(c, "id") && c["id"].is_string() ? c["id"].get<std::string>() : std::string();
        // OpenAI sends the arguments as a JSON text; some clients send the object itself.
        const json args = present(f, "arguments") ? f["arguments"] : json::object();
        if (args.is_string()) {
            const std::string& text = args.get_ref<const std::string&>();
            if (!json_depth_within(text, kMaxJsonDepth)) {
                return bad(at + ".function.arguments",
                           fmt::format("{}.function.arguments nests deeper than {} levels", at, kMaxJsonDepth));
            }
            const json parsed = json::parse(text, nullptr, false);
            if (parsed.is_discarded() || !parsed.is_object()) {
                return bad(at + ".function.arguments", at + ".function.arguments must be a JSON object (as text)");
            }
            call.arguments = parsed.dump();
        } else if (args.is_object()) {
            call.arguments = args.dump();
        } else {
            return bad(at + ".function.arguments", at + ".function.arguments must be a JSON object (as text)");
        }
        m.tool_calls.push_back(std::move(call));
    }
    return std::nullopt;
}

std::optional<ApiError> read_messages(const json& body, GenRequest& r) {
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
        return bad("messages", "'messages' must be a non-empty array");
    }
    for (size_t i = 0; i < body["messages"].size(); ++i) {
        const json& m = body["messages"][i];
        const std::string where = fmt::format("messages[{}]", i);
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
            return bad(where, fmt::format("{} must be an object with a 'role'", where));
        }
        const std::string role = m["role"].get<std::string>();
        if (role != "system" && role != "user" && role != "assistant" && role != "developer" && role != "tool") {
            return bad(where + ".role", fmt::format("{}: the role '{}' is not supported here (system, developer, user, "
                                                    "assistant, tool)",
                                                    where, role));
        }
        const std::optional<std::string> text = content_text(m.contains("content") ? m["content"] : json(nullptr));
        if (!text) return bad(where + ".content", where + ".content must be a string or an array of text parts");
        ChatMessage message{role == "developer" ? "system" : role, *text};
        if (role == "assistant" && present(m, "tool_calls")) {
            if (auto e = read_tool_calls(m["tool_calls"], where + ".tool_calls", message)) return e;
        }
        if (role == "tool") {
            if (!present(m, "tool_call_id") || !m["tool_call_id"].is_string()) {
                return bad(where + ".tool_call_id", where + ": a tool message needs the 'tool_call_id' it answers");
            }
            message.tool_call_id = m["tool_call_id"].get<std::string>();
        }
        if (present(m, "name") && m["name"].is_string()) message.name = m["name"].get<std::string>();
        r.messages.push_back(std::move(message));
    }
    return std::nullopt;
}

// Whether a client's JSON schema becomes a grammar that parses: json_schema_to_grammar
// accepts a $ref that leads back to itself before anything is written, which no grammar can
// follow (left recursion). A 400 about `param` when it does not.
std::optional<ApiError> check_schema(const json& schema, const std::string& param) {
    Result<std::string> text = json_schema_to_grammar(schema);
    if (!text) return bad(param, "the schema cannot be enforced: " + text.error().message);
    if (Result<Grammar> grammar = Grammar::parse(*text); !grammar) {
        return bad(param, fmt::format("the schema cannot be enforced: {} (a $ref that leads back to itself "
                                      "before anything is written loops forever: put a value in between)",
                                      grammar.error().message));
    }
    return std::nullopt;
}

// tools and tool_choice. The tools go to the template; with "required" or a named function
// the answer is constrained to a call in the model's format.
std::optional<ApiError> read_tools(const json& body, const ServedModel& model, GenRequest& r) {
    if (present(body, "tools")) {
        const json& tools = body["tools"];
        if (!tools.is_array()) return bad("tools", "'tools' must be an array");
        for (size_t i = 0; i < tools.size(); ++i) {
            const json& t = tools[i];
            const std::string where = fmt::format("tools[{}]", i);
            if (!t.is_object() || string_field(t, "type") != "function" || !present(t, "function") ||
                !t["function"].is_object()) {
                return bad(where, where + " must be {\"type\": \"function\", \"function\": {...}}");
            }
            const json& f = t["function"];
            if (!present(f, "name") || !f["name"].is_string() || f["name"].get<std::string>().empty()) {
                return bad(where + ".function.name", where + ".function.name must be a non-empty string");
            }
            if (present(f, "parameters") && !f["parameters"].is_object()) {
                return bad(where + ".function.parameters", where + ".function.parameters must be a JSON schema object");
            }
        }
        r.tools = tools;
    }
    r.tool_choice = r.tools.empty() ? ToolChoice::none : ToolChoice::automatic;
    if (present(body, "tool_choice")) {
        const json& c = body["tool_choice"];
        if (c.is_string()) {
            const std::string s = c.get<std::string>();
            if (s == "none") {
                r.tool_choice = ToolChoice::none;
            } else if (s == "auto") {
                r.tool_choice = r.tools.empty() ? ToolChoice::none : ToolChoice::automatic;
            } else if (s == "required") {
                r.tool_choice = ToolChoice::required;
            } else {
                return bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or a function");
            }
        } else if (c.is_object() && string_field(c, "type") == "function" && present(c, "function") &&
                   c["function"].is_object() && present(c["function"], "name") && c["function"]["name"].is_string()) {
            r.tool_choice = ToolChoice::named;
            r.tool_name = c["function"]["name"].get<std::string>();
        } else {
            return bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or a function");
        }
    }
    if ((r.tool_choice == ToolChoice::required || r.tool_choice == ToolChoice::named) && r.tools.empty()) {
        return bad("tool_choice", "tool_choice asks for a tool call, but the request has no tools");
    }
    if (r.tool_choice == ToolChoice::named && std::none_of(r.tools.begin(), r.tools.end(), [&](const json& t) {
            return t["function"]["name"].get<std::string>() == r.tool_name;
        })) {
        return bad("tool_choice", fmt::format("tool_choice names '{}', which is not among the tools", r.tool_name));
    }
    if (r.tool_choice == ToolChoice::required || r.tool_choice == ToolChoice::named) {
        // Each function's parameters on their own first: a schema that compiles into no valid
        // grammar is the client's to fix (400 naming it), so that a failure of the whole
        // call grammar below is the server's own.
        for (size_t i = 0; i < r.tools.size(); ++i) {
            const json& f = r.tools[i]["function"];
            if (!present(f, "parameters")) continue;
            if (auto e = check_schema(f["parameters"], fmt::format("tools[{}].function.parameters", i))) return e;
        }
        Result<std::string> text = tool_call_grammar(model.tool_format, r.tools,
                                                     r.tool_choice == ToolChoice::named ? r.tool_name : std::string());
        if (!text) return bad("tools", "the tools cannot be turned into a constraint: " + text.error().message);
        Result<Grammar> grammar = Grammar::parse(*text);
        if (!grammar)
            return ApiError{500, "the tool-call grammar is wrong: " + grammar.error().message, "server_error", {}, {}};
        r.settings.grammar = std::move(grammar).value();
    }
    return std::nullopt;
}

// response_format: {"type": "text"}, {"type": "json_object"} or {"type": "json_schema",
// "json_schema": {"name", "schema", "strict"}}: the answer is constrained to parse.
std::optional<ApiError> read_response_format(const json& body, GenRequest& r) {
    if (!present(body, "response_format")) return std::nullopt;
    const json& f = body["response_format"];
    if (!f.is_object() || !present(f, "type") || !f["type"].is_string()) {
        return bad("response_format", "'response_format' must be an object with a 'type'");
    }
    r.response_format = f["type"].get<std::string>();
    Result<std::string> text = std::string();
    if (r.response_format == "text") {
        return std::nullopt;
    } else if (r.response_format == "json_object") {
        text = json_object_grammar();
    } else if (r.response_format == "json_schema") {
        if (!present(f, "json_schema") || !f["json_schema"].is_object() || !present(f["json_schema"], "schema") ||
            !f["json_schema"]["schema"].is_object()) {
            return bad("response_format.json_schema",
                       "response_format json_schema needs {\"json_schema\": {\"name\": ..., \"schema\": {...}}}");
        }
        if (auto e = check_schema(f["json_schema"]["schema"], "response_format.json_schema.schema")) return e;
        text = json_schema_to_grammar(f["json_schema"]["schema"]);
    } else {
        return bad("response_format.type", "response_format's type must be text, json_object or json_schema");
    }
    if (r.settings.grammar) {
        return bad("response_format", "response_format cannot be combined with a required tool call");
    }
    Result<Grammar> grammar = Grammar::parse(*text);
    if (!grammar) {
        return ApiError{
            500, "the response_format grammar is wrong: " + grammar.error().message, "server_error", {}, {}};
    }
    r.settings.grammar = std::move(grammar).value();
    return std::nullopt;
}

// grammar: a grammar in GBNF (llama.cpp's server takes the same field) that the answer must
// follow; one constraint per request.
std::optional<ApiError> read_grammar(const json& body, GenRequest& r) {
    if (!present(body, "grammar")) return std::nullopt;
    if (!body["grammar"].is_string()) return bad("grammar", "'grammar' must be a string (a grammar in GBNF)");
    if (r.settings.grammar) {
        return bad("grammar", "'grammar' cannot be combined with response_format or a required tool call");
    }
    Result<Grammar> grammar = Grammar::parse(body["grammar"].get<std::string>());
    if (!grammar) return bad("grammar", "the grammar is wrong: " + grammar.error().message);
    r.settings.grammar = std::move(grammar).value();
    return std::nullopt;
}

// chat_template_kwargs: {"enable_thinking": false, ...} for the template; reasoning_effort:
// OpenAI's low/medium/high, which gpt-oss's template reads (it wins over a kwarg of the name).
std::optional<ApiError> read_template_variables(const json& body, GenRequest& r) {
    if (present(body, "chat_template_kwargs")) {
        const json& kwargs = body["chat_template_kwargs"];
        if (!kwargs.is_object()) {
            return bad("chat_template_kwargs",
                       "'chat_template_kwargs' must be an object, such as {\"enable_thinking\": false}");
        }
        r.template_variables = kwargs;
    }
    if (present(body, "reasoning_effort")) {
        const json& effort = body["reasoning_effort"];
        if (!effort.is_string() || (effort != "low" && effort != "medium" && effort != "high")) {
            return bad("reasoning_effort", "'reasoning_effort' must be \"low\", \"medium\" or \"high\"");
        }
        r.template_variables["reasoning_effort"] = effort;
    }
    if (Result<void> checked = check_template_variables(r.template_variables); !checked) {
        return bad("chat_template_kwargs", checked.error().message);
    }
    return std::nullopt;
}

// The sampling, length, stop and stream fields both endpoints share.
// logit_bias: {"token id": bias in [-100, 100]}, added to those tokens' logits before
// sampling (-100 all but bans a token, 100 all but forces it).
std::optional<ApiError> read_logit_bias(const json& body, uint32_t n_vocab, SamplingParams& p) {
    if (!present(body, "logit_bias")) return std::nullopt;
    const json& biases = body["logit_bias"];
    if (!biases.is_object()) {
        return bad("logit_bias", "'logit_bias' must be an object from token ids to biases, e.g. {\"1234\": -100}");
    }
    for (const auto& [key, value] : biases.items()) {
        TokenId id = -1;
        const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
        if (ec != std::errc() || end != key.data() + key.size() || key.empty() || id < 0) {
            return bad("logit_bias", "logit_bias's keys must be token ids: whole numbers >= 0, written as strings");
        }
        if (n_vocab > 0 && static_cast<uint32_t>(id) >= n_vocab) {
            return bad(
                "logit_bias",
                fmt::format("logit_bias names token {}, but this model's token ids go from 0 to {}", id, n_vocab - 1));
        }
        if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0)) {
            return bad("logit_bias",
                       fmt::format("logit_bias's bias for token {} must be a number between -100 and 100", id));
        }
        p.logit_bias.push_back(LogitBias{id, static_cast<float>(value.get<double>())});
    }
    return std::nullopt;
}

// OpenAI's predicted output: {"type": "content", "content": "text" or [{"type": "text",
// "text": ...}, ...]}.
std::optional<ApiError> read_prediction(const json& body, GenRequest& r) {
    if (!present(body, "prediction")) return std::nullopt;
    const json& p = body["prediction"];
    const auto wrong = [] {
        return bad("prediction",
                   "'prediction' must be {\"type\": \"content\", \"content\": TEXT}, the content a string or an "
                   "array of {\"type\": \"text\", \"text\": TEXT} parts");
    };
    if (!p.is_object() || !p.contains("type") || p["type"] != "content" || !p.contains("content")) return wrong();
    const json& content = p["content"];
    if (content.is_string()) {
        r.prediction = content.get<std::string>();
        return std::nullopt;
    }
    if (!content.is_array()) return wrong();
    for (const json& part : content) {
        if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
            return wrong();
        }
        r.prediction += part["text"].get<std::string>();
    }
    return std::nullopt;
}

std::optional<ApiError> parse_options(const json& body, const ServedModel& model, int64_t default_max_tokens,
                                      GenRequest& r) {
    const uint32_t n_ctx = model.n_ctx;
    if (present(body, "n") && body["n"] != 1) return bad("n", "'n' must be 1");
    int64_t max_tokens = default_max_tokens;
    for (const char* name : {"max_tokens", "max_completion_tokens"}) {
        if (!present(body, name)) continue;
        if (!body[name].is_number_integer()) return bad(name, fmt::format("'{}' must be an integer", name));
        max_tokens = body[name].get<int64_t>();
        if (max_tokens < 1 || max_tokens > n_ctx) {
            return bad(name, fmt::format("'{}' must be between 1 and the context length, {}", name, n_ctx));
        }
    }
    r.settings.max_tokens = static_cast<int32_t>(max_tokens);
    SamplingParams& p = r.settings.sampling;
    p.temperature = 1.0f;  // OpenAI's default
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    if (auto e = read_number(body, "temperature", 0.0, 2.0, p.temperature)) return *e;
    if (auto e = read_number(body, "top_p", 0.0, 1.0, p.top_p)) return *e;
    // top_p 0 keeps only the likeliest token (OpenAI accepts it): greedy, which the sampler
    // spells as temperature 0 (its top_p must be above 0).
    if (p.top_p == 0.0f) {
        p.top_p = 1.0f;
        p.temperature = 0.0f;
    }
    if (auto e = read_number(body, "presence_penalty", -2.0, 2.0, p.presence_penalty)) return *e;
    if (auto e = read_number(body, "frequency_penalty", -2.0, 2.0, p.frequency_penalty)) return *e;
    if (auto e = read_logit_bias(body, model.n_vocab, p)) return *e;
    if (present(body, "seed")) {
        if (!body["seed"].is_number_integer()) return bad("seed", "'seed' must be an integer");
        p.seed = body["seed"].is_number_unsigned() ? body["seed"].get<uint64_t>()
                                                   : static_cast<uint64_t>(body["seed"].get<int64_t>());
    }
    if (present(body, "stop")) {
        const json& stop = body["stop"];
        if (stop.is_string()) {
            r.settings.stop.push_back(stop.get<std::string>());
        } else if (stop.is_array() && stop.size() <= 4 &&
                   std::all_of(stop.begin(), stop.end(), [](const json& s) { return s.is_string(); })) {
            for (const json& s : stop) r.settings.stop.push_back(s.get<std::string>());
        } else {
            return bad("stop", "'stop' must be a string or an array of up to 4 strings");
        }
    }
    // Speculative decoding: llama.cpp's server names the most tokens guessed a step so.
    r.settings.lookup = model.lookup;
    if (present(body, "speculative.n_max")) {
        const json& n = body["speculative.n_max"];
        if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > 64) {
            return bad("speculative.n_max", "'speculative.n_max' must be an integer between 0 and 64");
        }
        r.settings.lookup.max_draft = static_cast<uint32_t>(n.get<int64_t>());
    }
    if (auto e = read_prediction(body, r)) return *e;
    if (present(body, "stream")) {
        if (!body["stream"].is_boolean()) return bad("stream", "'stream' must be true or false");
        r.stream = body["stream"].get<bool>();
    }
    if (present(body, "stream_options")) {
        const json& so = body["stream_options"];
        if (!so.is_object()) return bad("stream_options", "'stream_options' must be an object");
        if (so.contains("include_usage")) {
            if (!so["include_usage"].is_boolean()) {
                return bad("stream_options.include_usage", "'include_usage' must be true or false");
            }
            r.include_usage = so["include_usage"].get<bool>();
        }
    }
    return std::nullopt;
}

}  // namespace

std::variant<GenRequest, ApiError> parse_chat(const json& body, const ServedModel& model) {
    if (auto e = check_model(body, model.id)) return *e;
    GenRequest r;
    if (auto e = read_messages(body, r)) return *e;
    if (auto e = parse_options(body, model, 512, r)) return *e;
    // The deprecated function-calling fields: ignored, the answer would be text where the
    // client waits for a call.
    if (present(body, "functions")) {
        if (!body["functions"].is_array()) return bad("functions", "'functions' must be an array");
        if (!body["functions"].empty()) {
            return bad("functions",
                       "'functions' is not supported by this server: send them as 'tools' "
                       "({\"type\": \"function\", \"function\": {...}})");
        }
    }
    if (present(body, "function_call") && body["function_call"] != "none" && body["function_call"] != "auto") {
        return bad("function_call", "'function_call' is not supported by this server: use 'tool_choice'");
    }
    if (auto e = read_tools(body, model, r)) return *e;
    if (auto e = read_response_format(body, r)) return *e;
    if (auto e = read_grammar(body, r)) return *e;
    if (auto e = read_template_variables(body, r)) return *e;
    // logprobs: true, with top_logprobs 0..20.
    if (present(body, "logprobs")) {
        if (!body["logprobs"].is_boolean()) return bad("logprobs", "'logprobs' must be true or false");
        r.settings.logprobs = body["logprobs"].get<bool>();
    }
    if (present(body, "top_logprobs")) {
        if (!body["top_logprobs"].is_number_integer() || body["top_logprobs"].get<int64_t>() < 0 ||
            body["top_logprobs"].get<int64_t>() > 20) {
            return bad("top_logprobs", "'top_logprobs' must be an integer between 0 and 20");
        }
        if (!r.settings.logprobs) return bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r.settings.top_logprobs = static_cast<int32_t>(body["top_logprobs"].get<int64_t>());
    }
    return r;
}

std::variant<EmbedRequest, ApiError> parse_embeddings(const json& body, const ServedModel& model) {
    if (auto e = check_model(body, model.id)) return *e;
    if (!body.contains("input")) return bad("input", "'input' is required");
    const json& input = body["input"];
    EmbedRequest r;
    const auto is_ids = [](const json& v) {
        return v.is_array() && !v.empty() &&
               std::all_of(v.begin(), v.end(), [](const json& t) { return t.is_number_integer(); });
    };
    constexpr size_t kMostInputs = 2048;  // OpenAI's limit
    if (input.is_string()) {
        r.texts.push_back(input.get<std::string>());
    } else if (is_ids(input)) {
        r.tokens.push_back({});
        for (const json& t : input) r.tokens.back().push_back(static_cast<TokenId>(t.get<int64_t>()));
    } else if (input.is_array() && !input.empty() && input.size() <= kMostInputs &&
               (std::all_of(input.begin(), input.end(), [](const json& v) { return v.is_string(); }) ||
                std::all_of(input.begin(), input.end(), is_ids))) {
        for (const json& v : input) {
            if (v.is_string()) {
                r.texts.push_back(v.get<std::string>());
                continue;
            }
            r.tokens.push_back({});
            for (const json& t : v) r.tokens.back().push_back(static_cast<TokenId>(t.get<int64_t>()));
        }
    } else {
        return bad("input", fmt::format("'input' must be a string, an array of up to {} strings, an array of token ids "
                                        "or an array of such arrays, none empty",
                                        kMostInputs));
    }
    for (size_t i = 0; i < r.texts.size(); ++i) {
        if (r.texts[i].empty()) return bad("input", fmt::format("input {} is an empty string", i));
    }
    for (const std::vector<TokenId>& ids : r.tokens) {
        for (TokenId t : ids) {
            if (t < 0 || (model.n_vocab != 0 && static_cast<uint32_t>(t) >= model.n_vocab)) {
                return bad("input",
                           fmt::format("token id {} is not in the model's vocabulary of {}", t, model.n_vocab));
            }
        }
    }
    if (present(body, "encoding_format")) {
        const json& f = body["encoding_format"];
        if (f != "float" && f != "base64")
            return bad("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
        r.base64 = f == "base64";
    }
    if (present(body, "dimensions")) {
        return bad("dimensions", "'dimensions' is not supported: the embeddings have the model's own size");
    }
    return r;
}

namespace {

std::string base64_of(std::span<const float> values) {
    static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes(values.size() * sizeof(float), '\0');
    for (size_t i = 0; i < values.size(); ++i) {
        const auto bits = std::bit_cast<uint32_t>(values[i]);
        for (size_t b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((bits >> (8 * b)) & 0xff);  // little-endian
    }
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (size_t i = 0; i < bytes.size(); i += 3) {
        const size_t n = std::min<size_t>(3, bytes.size() - i);
        uint32_t chunk = 0;
        for (size_t k = 0; k < 3; ++k) {
            chunk = (chunk << 8) | (k < n ? static_cast<uint8_t>(bytes[i + k]) : 0u);
        }
        for (size_t k = 0; k < 4; ++k) out += k <= n ? kDigits[(chunk >> (18 - 6 * k)) & 63] : '=';
    }
    return out;
}

}  // namespace

json embeddings_reply(const EmbeddingsEvent& event, const std::string& model_id, bool base64) {
    json data = json::array();
    for (size_t i = 0; i < event.vectors.size(); ++i) {
        data.push_back({{"object", "embedding"},
                        {"index", i},
                        {"embedding", base64 ? json(base64_of(event.vectors[i])) : json(event.vectors[i])}});
    }
    const auto tokens = static_cast<int64_t>(event.prompt_tokens);
    return {{"object", "list"},
            {"data", std::move(data)},
            {"model", model_id},
            {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

std::variant<GenRequest, ApiError> parse_completion(const json& body, const ServedModel& model) {
    if (auto e = check_model(body, model.id)) return *e;
    GenRequest r;
    if (!body.contains("prompt")) return bad("prompt", "'prompt' is required");
    const json& prompt = body["prompt"];
    if (prompt.is_string()) {
        r.prompt = prompt.get<std::string>();
    } else if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) {
        r.prompt = prompt[0].get<std::string>();
    } else {
        return bad("prompt", "'prompt' must be a string (one prompt; token arrays are not supported)");
    }
    if (r.prompt->empty()) return bad("prompt", "'prompt' is empty");
    if (present(body, "echo")) {
        if (!body["echo"].is_boolean()) return bad("echo", "'echo' must be true or false");
        if (body["echo"].get<bool>()) return bad("echo", "echo is not supported by this server");
    }
    if (present(body, "suffix")) return bad("suffix", "suffix (fill in the middle) is not supported by this server");
    if (present(body, "best_of") && body["best_of"] != 1) return bad("best_of", "'best_of' must be 1");
    // logprobs: the number of likeliest tokens to list at each place, 0..5 (OpenAI's legacy form).
    if (present(body, "logprobs")) {
        if (!body["logprobs"].is_number_integer() || body["logprobs"].get<int64_t>() < 0 ||
            body["logprobs"].get<int64_t>() > 5) {
            return bad("logprobs", "'logprobs' must be an integer between 0 and 5");
        }
        r.settings.logprobs = true;
        r.settings.top_logprobs = static_cast<int32_t>(body["logprobs"].get<int64_t>());
    }
    if (auto e = parse_options(body, model, 16, r)) return *e;  // OpenAI's default for completions
    if (auto e = read_grammar(body, r)) return *e;
    return r;
}

}  // namespace powerhouse::server
