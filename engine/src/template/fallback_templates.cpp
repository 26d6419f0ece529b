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

}  // namespace powerhouse::jinja
