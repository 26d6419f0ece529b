// Tool calls in the model's own words: which format a chat template teaches its model,
// reading the calls (and the reasoning) back out of an answer, whole or as it
// streams, and a grammar that makes the model write exactly one call.
//
// The formats (ToolCallFormat):
//   generic  templates that never mention tools (SmolLM2's): Powerhouse describes the
//            tools in the system message itself (add_tool_instructions) and asks for
//            <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, Hermes' format.
//   hermes   Qwen2.5, Qwen3, Hermes 2/3: the same <tool_call> blocks, taught by the template.
//   llama3   Llama 3.1/3.2/3.3 custom tools: the answer is a bare JSON object
//            {"name": ..., "parameters": {...}}, maybe after <|python_tag|>; several calls
//            are separated by ';' or whitespace.
//   mistral  [TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}, ...] (Mistral 7B
//            v0.3, Mistral-Nemo) or [TOOL_CALLS]name[ARGS]{...} (newer tokenizers; also
//            with [CALL_ID]id before [ARGS]). A bare array of calls at the very start counts
//            too: that is what is left when the [TOOL_CALLS] token is hidden.
//   harmony  gpt-oss: messages on channels, <|channel|>analysis (reasoning), final (the
//            answer), commentary to=functions.NAME <|constrain|>json<|message|>{...} (a call;
//            to=... may also stand before <|channel|>).
//   qwen3_coder  Qwen3-Coder (also Qwen3.5, Nemotron Nano 3): XML blocks, a value per
//            parameter, <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n
//            ...</function>\n</tool_call>.
//   seed_oss ByteDance Seed-OSS: the same inner XML in <seed:tool_call>...</seed:tool_call>
//            (values written without the newlines around them); its <seed:think>...
//            </seed:think> blocks are reasoning, never calls.
//   glm45    GLM-4.5, 4.6 and 4.7: <tool_call>NAME\n<arg_key>ARG</arg_key>\n<arg_value>VALUE
//            </arg_value>\n...</tool_call>; <think>...</think> blocks are reasoning.
//   none     the template renders tools in a format Powerhouse does not know (GLM-4-0414's,
//            which writes calls as an assistant turn's "metadata"): answers stay text,
//            unchanged.
//
// In the XML formats (qwen3_coder, seed_oss, glm45) a value is text; its type comes from the
// parameter's schema in `tools`: a parameter that may only be a string keeps the text as it
// is; any other is read as JSON, else as a Python literal (the templates write True, None
// and {'a': 1} with Python's str()), else kept as text, and one that may be a string or
// something else takes the value only when it is of one of the other types. Without a
// schema (no tools given, an unknown function or parameter) a value that is JSON other than
// a string is that JSON, anything else text. qwen3_coder drops one newline at each end of
// a value (its template writes them). A string cannot hold its own closing tag
// (</parameter>, </arg_value>); a JSON object or array can, when the tag follows its
// brackets. A block that does not read as a whole (a missing closing tag, an empty name)
// is content, its opening tag included.
//
// Control tokens (<|python_tag|>, [TOOL_CALLS], <|channel|>, ...) are hidden from the text
// unless GenerationSettings::render_special is set, and the parsers need them: generate with
// render_special when tools are on. The format's own control tokens never reach the
// content; Qwen's <tool_call> is an ordinary token and is always in the text.
//
// Reasoning: an answer in a marker format that opens with a think block (<think>...</think>;
// Seed-OSS's <seed:think>; Magistral's [THINK]...[/THINK]) keeps it apart from the content,
// and so does an answer whose prompt opened the block (prompt_opens_reasoning: DeepSeek-R1's
// distills, Qwen3.5). Seed-OSS's and GLM's blocks count anywhere in the answer (they think
// between calls); the other formats' later <think> tags are text. gpt-oss reasons on its
// analysis channel.
//
// Content is the text outside the calls (and outside reasoning blocks) with its ends
// trimmed; gpt-oss's final and commentary messages are trimmed one by one and joined by a
// blank line, and so are reasoning blocks (a block cut off at the end of the answer runs to
// its end). A call that does not parse (broken JSON, no name, arguments that are not an
// object) stays in the content: nothing here throws or drops text the model wrote, except
// the format's control tokens.
//
// Ids: a model's own id is kept (Mistral's); otherwise each call gets one derived from the
// answer itself (a hash of `id_salt`, the call's index, name and arguments), so a whole
// answer and the same answer streamed get the same ids. Pass a per-request salt (the
// request id) so that the same call in two answers gets two ids. The Mistral format's ids
// are 9 letters and digits, the only ids its template accepts back; others are
// "call_" + 16 letters and digits.
//
// Thread-safety: free functions are pure; a ToolCallStream is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/chat_template.h"
#include "powerhouse/generation.h"
#include "powerhouse/result.h"

namespace powerhouse {

// ToolCallFormat and tool_call_format_name() are in powerhouse/chat_template.h.

// Whether the template's source uses a variable named `tools` (not tool_calls,
// builtin_tools, ...): a template that does not would drop the tool definitions.
bool template_mentions_tools(std::string_view template_source);

// The format a template's model answers in: generic when the template never mentions
// tools, else by the markers it writes (harmony's channels, [TOOL_CALLS], <seed:tool_call>,
// <tool_call> with <function=/<parameter= or with <arg_key>, <tool_call> alone, Llama 3's
// headers), else none.
ToolCallFormat detect_tool_call_format(std::string_view template_source);
// The same for the template chat_prompt() uses with this model (resolve_chat_template: the
// model's own, or its family's built-in one).
ToolCallFormat detect_tool_call_format(const ModelTemplateInfo& info);

// Whether a prompt ending in `prompt_end` (its last tokens, control tokens written out)
// leaves the model inside a reasoning block of the format: it ends with the block's opening
// tag, whitespace aside.
bool prompt_opens_reasoning(ToolCallFormat format, std::string_view prompt_end);

// Whether `tools` holds any tool (a non-empty array).
bool has_tools(const nlohmann::ordered_json& tools);

// The system-message text that describes `tools` and the generic answer format.
std::string tool_instructions(const nlohmann::ordered_json& tools);

// The conversation for a template that never mentions tools: tool_instructions() appended
// to the system message (one is created when there is none), the assistant's earlier calls
// written into its content as <tool_call> blocks, and tool answers turned into user
// messages of <tool_response> blocks (consecutive answers merged into one), so that
// templates that only know system/user/assistant render them.
std::vector<ChatMessage> add_tool_instructions(std::span<const ChatMessage> messages,
                                               const nlohmann::ordered_json& tools);

struct ParsedAnswer {
    std::string content;    // the text to show (trimmed)
    std::string reasoning;  // think blocks, gpt-oss's analysis channel (see Reasoning above)
    std::vector<ToolCall> tool_calls;
};

// How an answer is read.
struct AnswerOptions {
    std::string id_salt;           // see Ids above
    nlohmann::ordered_json tools;  // the request's (as for tool_call_grammar): types the XML formats' values
    // Read tool calls. Without (no tools were offered) a call's tag is text like any other and
    // the control tokens that open calls are dropped, as they are when hidden; gpt-oss's
    // messages to tools are read all the same (they are no text).
    bool calls = true;
    // The prompt opened a reasoning block (prompt_opens_reasoning): the answer begins in it.
    bool in_reasoning = false;
};

// Reads a whole answer (generated with render_special). Never fails: what does not parse
// is content.
ParsedAnswer parse_answer(ToolCallFormat format, std::string_view text, const AnswerOptions& options);
ParsedAnswer parse_answer(ToolCallFormat format, std::string_view text, std::string_view id_salt = {},
                          const nlohmann::ordered_json& tools = {});

// The same, as the answer streams: feed() returns the content that is certain now, and
// take_reasoning() the reasoning. Each holds back what may still change: the start of a
// possible tool call (a partial "<tool_c", an answer opening with '{' for Llama 3) and
// everything after a call's marker, a possible partial closing tag of a reasoning block,
// an answer's first characters while they may open a reasoning block, and trailing
// whitespace (both are trimmed). finish() reads the rest: its content and reasoning are
// what feed() and take_reasoning() have not returned yet, so the pieces returned followed by
// finish()'s are parse_answer(text)'s content and reasoning; its tool_calls are
// parse_answer's. Call finish() once, after the last feed.
class ToolCallStream {
public:
    ToolCallStream(ToolCallFormat format, AnswerOptions options);
    explicit ToolCallStream(ToolCallFormat format, std::string id_salt = {}, nlohmann::ordered_json tools = {});
    ~ToolCallStream();
    ToolCallStream(ToolCallStream&&) noexcept;
    ToolCallStream& operator=(ToolCallStream&&) noexcept;

    std::string feed(std::string_view text);
    std::string take_reasoning();
    ParsedAnswer finish();

    struct State;

private:
    std::unique_ptr<State> state_;
};

// Grammar text (powerhouse/grammar.h's notation, start rule `root`) that makes the answer
// exactly one call in the format, to one of `tools` or to `only_function` when it is not
// empty (tool_choice "required" or a named function). Each function's arguments follow
// its "parameters" schema (json_schema_to_grammar); parse_answer() reads any text the
// grammar accepts as that one call. gpt-oss may reason on the analysis channel first,
// Seed-OSS and GLM in a think block. In the XML formats each parameter's value follows its
// own schema (properties in the schema's order, optional ones may be left out); a
// parameter that may be a string is free text (up to its closing tag; of string
// constraints only enum and const are kept). Fails for ToolCallFormat::none, without
// tools, for an unknown only_function, for schemas json_schema_to_grammar cannot express,
// and for names the XML formats cannot write (with '>', '<' or a line break).
Result<std::string> tool_call_grammar(ToolCallFormat format, const nlohmann::ordered_json& tools,
                                      std::string_view only_function = {});

}  // namespace powerhouse
