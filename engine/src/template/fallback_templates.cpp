#include "template/fallback_templates.h"

namespace powerhouse::jinja {

// Message content may be missing or null (assistant turns that only call tools): such
// turns print as empty text rather than failing.

// <|im_start|>role\ncontent<|im_end|>\n — Qwen, SmolLM, Hermes, Yi, ...
const std::string_view kChatmlTemplate =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

// Llama 3 / 3.1 / 3.2 headers; content trimmed as Meta's template does.
const std::string_view kLlama3Template =
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + (message['content'] or '') | trim"
    " + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

// Mistral / Mixtral [INST] turns; a system prompt goes before the next user message.
const std::string_view kMistralTemplate =
    "{{- bos_token }}"
    "{%- set ns = namespace(system='') %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' %}"
    "{%- set ns.system = (message['content'] or '') + '\\n\\n' %}"
    "{%- elif message['role'] == 'user' %}"
    "{{- '[INST] ' + ns.system + (message['content'] or '') + ' [/INST]' }}"
    "{%- set ns.system = '' %}"
    "{%- elif message['role'] == 'assistant' %}"
    "{{- (message['content'] or '') + eos_token }}"
    "{%- endif %}"
    "{%- endfor %}";

// Gemma turns ("model" for the assistant); Gemma has no system role, so a system prompt
// goes at the start of the next user turn.
const std::string_view kGemmaTemplate =
    "{{- bos_token }}"
    "{%- set ns = namespace(system='') %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' %}"
    "{%- set ns.system = (message['content'] or '') | trim + '\\n\\n' %}"
    "{%- else %}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{- '<start_of_turn>' + role + '\\n' + ns.system + (message['content'] or '') | trim + '<end_of_turn>\\n' }}"
    "{%- set ns.system = '' %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<start_of_turn>model\\n' }}{%- endif %}";

// gpt-oss's harmony format: a system message (identity, knowledge cutoff, date, reasoning
// effort, channels), the first system or developer message as developer instructions,
// final-channel answers, and tool calls and results on the commentary channel, as the
// model's own template renders them (without its tool definitions, built-in tools and
// checks). An assistant's analysis is kept before its tool call until a final answer
// follows, and on the last turn when there is no generation prompt (training data).
const std::string_view kHarmonyTemplate =
    "{{- '<|start|>system<|message|>' + (model_identity if model_identity is defined"
    " else 'You are ChatGPT, a large language model trained by OpenAI.') + '\\n' }}"
    "{{- 'Knowledge cutoff: 2024-06\\nCurrent date: ' + strftime_now('%Y-%m-%d') + '\\n\\n' }}"
    "{{- 'Reasoning: ' + (reasoning_effort if reasoning_effort is defined else 'medium') + '\\n\\n' }}"
    "{{- '# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>' }}"
    "{%- set ns = namespace(tool='', final_after=false) %}"
    "{%- for message in messages %}"
    "{%- set content = message['content'] or '' %}"
    "{%- if message['role'] in ['system', 'developer'] %}"
    "{%- if loop.first and content %}"
    "{{- '<|start|>developer<|message|># Instructions\\n\\n' + content + '\\n\\n<|end|>' }}"
    "{%- endif %}"
    "{%- elif message['role'] == 'user' %}"
    "{{- '<|start|>user<|message|>' + content + '<|end|>' }}"
    "{%- elif message['role'] == 'assistant' and message['tool_calls'] %}"
    "{%- set ns.final_after = false %}"
    "{%- for later in messages[loop.index:] %}"
    "{%- if later['role'] == 'assistant' and not later['tool_calls'] %}{%- set ns.final_after = true %}{%- endif %}"
    "{%- endfor %}"
    "{%- set analysis = content or message['thinking'] or '' %}"
    "{%- if analysis and not ns.final_after %}"
    "{{- '<|start|>assistant<|channel|>analysis<|message|>' + analysis + '<|end|>' }}"
    "{%- endif %}"
    "{%- set call = message['tool_calls'][0] %}"
    "{%- set call = call['function'] if call['function'] is defined else call %}"
    "{%- set ns.tool = call['name'] %}"
    "{{- '<|start|>assistant to=functions.' + ns.tool + '<|channel|>commentary json<|message|>'"
    " + call['arguments'] | tojson + '<|call|>' }}"
    "{%- elif message['role'] == 'assistant' %}"
    "{%- if loop.last and not add_generation_prompt %}"
    "{%- if message['thinking'] %}"
    "{{- '<|start|>assistant<|channel|>analysis<|message|>' + message['thinking'] + '<|end|>' }}"
    "{%- endif %}"
    "{{- '<|start|>assistant<|channel|>final<|message|>' + content + '<|return|>' }}"
    "{%- else %}"
    "{{- '<|start|>assistant<|channel|>final<|message|>' + content + '<|end|>' }}"
    "{%- endif %}"
    "{%- elif message['role'] == 'tool' %}"
    "{{- '<|start|>functions.' + ns.tool + ' to=assistant<|channel|>commentary<|message|>'"
    " + message['content'] | tojson + '<|end|>' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start|>assistant' }}{%- endif %}";

}  // namespace powerhouse::jinja
