// Chat templates: the Jinja programs, shipped in a model's GGUF metadata as
// `tokenizer.chat_template`, that turn a conversation into the exact prompt text the model
// was trained on. Powerhouse renders them with its own interpreter for the Jinja subset
// real templates use, matching Python jinja2 as Hugging Face transformers configures it
// (trim_blocks, lstrip_blocks, loop controls, a non-ASCII-preserving `tojson`,
// `raise_exception` and `strftime_now`) byte for byte.
//
// Templates come from downloaded files and are untrusted: they see nothing but the
// context passed in (no attributes starting with '_', no Python objects), and every render
// runs under TemplateLimits (time, nesting, call depth, loop iterations, output and
// allocation sizes). A template that breaks a limit, uses syntax outside the subset or calls
// raise_exception fails with an Error whose message starts with "LINE:COLUMN: ". Text inside
// the context (a message containing "{{ 7*7 }}") is data and is never evaluated.
//
// When a model has no template, or one that does not parse, callers fall back to a
// built-in template for the model's family (ChatML, Llama 3, Mistral, Gemma), guessed from
// its metadata: resolve_chat_template() does both.
//
// render_prompt() also says which bytes of the prompt came from the context's data (message
// contents, roles, tool schemas) and which from the template: the tokenizer recognises
// special tokens only in the template's part, so text a user types can never become a
// control token. Data is followed exactly through concatenation and printing; a string
// computed from data by a filter or method is data as a whole.
//
// Thread-safety: ChatTemplate is immutable once parsed; render() is const and may run on
// several threads at once. The free functions are pure, except read_model_template_info,
// which reads a file.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "powerhouse/result.h"
#include "powerhouse/tokenizer.h"

namespace powerhouse {

struct TemplateLimits {
    // Wall-clock time for one render. Real templates take microseconds to milliseconds.
    std::chrono::milliseconds max_time{500};
    // Nesting of expressions and blocks (parentheses, filters, if/for inside if/for...):
    // bounds the parser's and the interpreter's recursion, hence their stack use.
    uint32_t max_nesting = 128;
    // Macro calls active at once (self-recursive macros stop here).
    uint32_t max_call_depth = 64;
    // Loop iterations in one render, all loops together.
    uint64_t max_loop_iterations = 1'000'000;
    // The rendered text, and any single string built on the way.
    uint64_t max_output_bytes = 32ull << 20;
    // Bytes of all strings, lists and dicts built in one render, added up (freed ones
    // included): bounds memory and work even for templates that discard what they build.
    uint64_t max_allocated_bytes = 512ull << 20;
    // Items in any single list or dict (a conversation has thousands at most).
    uint64_t max_list_items = 1u << 20;
    // Largest range(): jinja2's sandbox refuses more than 100000 items as well.
    uint64_t max_range = 100'000;
    // Largest template source accepted by parse().
    uint64_t max_source_bytes = 1ull << 20;
};

struct RenderOptions {
    TemplateLimits limits;
    // The moment strftime_now() formats, as local wall-clock time; unset: the current local
    // time. Set it for reproducible output (tests, fixtures).
    std::optional<std::chrono::local_seconds> now;
    // render_prompt(): the top-level context variables that hold template text rather than
    // data (special tokens in them are recognised). Everything else in the context is data.
    std::vector<std::string> trusted_variables{"bos_token", "eos_token", "pad_token", "unk_token"};
};

// A rendered prompt and where its bytes came from.
struct RenderedPrompt {
    std::string text;
    // Byte ranges [begin, end) of `text` that came from the context's data: sorted,
    // disjoint, never touching.
    std::vector<std::pair<size_t, size_t>> data_ranges;

    // `text` cut into segments for Tokenizer::tokenize(): template text may hold special
    // tokens, data may not. The segments point into `text`.
    std::vector<TextSegment> segments() const;
};

class ChatTemplate {
public:
    // Parses once; syntax errors, unknown filters/tests and unsupported tags fail here.
    static Result<ChatTemplate> parse(std::string_view source, const TemplateLimits& limits = {});

    // Renders with the variables in `context` (a JSON object: messages, tools,
    // add_generation_prompt, bos_token, eos_token, ...). ordered_json because the order of
    // keys is visible in the output (tojson of tool schemas), as with Python dicts.
    Result<std::string> render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;
    // The same text, with the provenance of its bytes (see RenderedPrompt).
    Result<RenderedPrompt> render_prompt(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

    // The template text after newline normalization (what line:column in errors refer to).
    const std::string& source() const;

    ChatTemplate(const ChatTemplate&) = default;
    ChatTemplate& operator=(const ChatTemplate&) = default;
    ChatTemplate(ChatTemplate&&) noexcept = default;
    ChatTemplate& operator=(ChatTemplate&&) noexcept = default;
    ~ChatTemplate();

    struct Impl;

private:
    explicit ChatTemplate(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
    // Runs a render step, turning what the interpreter throws into an Error.
    template <class F>
    auto run(F&& body) const -> decltype(body(std::declval<const Impl&>()));
    std::shared_ptr<const Impl> impl_;  // immutable, so copies share it
};

// Whether the template's source uses a variable of this name (a whole identifier, not part
// of a longer one): what a caller may pass it beside the conversation.
bool template_uses_variable(std::string_view template_source, std::string_view name);

// Parse and render in one step.
Result<std::string> render_template(std::string_view source, const nlohmann::ordered_json& context,
                                    const RenderOptions& options = {});

// Families with a built-in template, used when a model's own template is missing or broken.
enum class TemplateFamily { chatml, llama3, mistral, gemma, harmony };  // harmony: gpt-oss

std::string_view template_family_name(TemplateFamily family);  // "chatml", "llama3", ...
// The built-in template's source (it uses bos_token/eos_token, messages and
// add_generation_prompt like the models' own templates).
std::string_view builtin_template(TemplateFamily family);

// Guesses the family from GGUF metadata: general.architecture, tokenizer.ggml.pre and the
// vocabulary (special tokens such as "<|im_start|>", "<start_of_turn>" or harmony's
// "<|start|>" with "<|channel|>" decide first).
// nullopt when nothing points to a family; callers then use ChatML, the most common format.
std::optional<TemplateFamily> guess_template_family(std::string_view architecture, std::string_view tokenizer_pre,
                                                    std::span<const std::string_view> tokens);

// The format in which a template teaches its model to write tool calls (and reasoning):
// powerhouse/tool_calls.h describes each and reads them.
enum class ToolCallFormat { none, generic, hermes, llama3, mistral, harmony, qwen3_coder, seed_oss, glm45 };

std::string_view tool_call_format_name(ToolCallFormat format);  // "none", "generic", "hermes", ...

// What a model file says about its chat template.
struct ModelTemplateInfo {
    std::optional<std::string> chat_template;  // tokenizer.chat_template; nullopt when absent
    std::string bos_token;                     // tokenizer.ggml.tokens[bos_token_id]; empty if unknown
    std::string eos_token;                     // tokenizer.ggml.tokens[eos_token_id]; empty if unknown
    std::string architecture;                  // general.architecture
    std::string tokenizer_pre;                 // tokenizer.ggml.pre
    std::optional<TemplateFamily> family;      // guess_template_family() on the above
};

// Reads the GGUF metadata only (no weights); fails when the file is not a valid GGUF model.
Result<ModelTemplateInfo> read_model_template_info(const std::filesystem::path& model_path);

// The template to chat with: the model's own when it parses, else the family's built-in
// one (ChatML when the family is unknown), with `note` saying why the fallback was taken.
struct ResolvedTemplate {
    ChatTemplate chat_template;
    bool is_fallback = false;
    TemplateFamily fallback_family = TemplateFamily::chatml;  // meaningful when is_fallback
    std::string note;                                         // why the model's own is not used; empty when it is
};
ResolvedTemplate resolve_chat_template(const ModelTemplateInfo& info, const TemplateLimits& limits = {});

// A template given by the user instead of the model's own (`--chat-template FILE`): used
// when it parses and renders one plain message with the model's tokens, else an error
// saying why (no fallback: the user asked for this one). The note says it replaces the
// model's own.
Result<ResolvedTemplate> resolve_given_template(std::string_view source, const ModelTemplateInfo& info,
                                                const TemplateLimits& limits = {});

// A context with the model's tokens: sets bos_token and eos_token unless already present.
void add_default_tokens(nlohmann::ordered_json& context, const ModelTemplateInfo& info);

}  // namespace powerhouse
