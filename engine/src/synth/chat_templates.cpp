// Raw string literals keep each template byte for byte as written, newlines included.
#include "synth/chat_templates.h"

namespace powerhouse::synth {
namespace {

// Llama 3.1 Instruct, as published (also in ../shared/testdata/templates).
constexpr std::string_view kLlama3 = R"TPL({{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)TPL";

// Llama 2 Chat, as published.
constexpr std::string_view kLlama2 =
    R"TPL({% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %})TPL";

// Mistral 7B Instruct v0.1/v0.2, as published.
constexpr std::string_view kMistral =
    R"TPL({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})TPL";

// TinyLlama 1.1B Chat v1.0 (the Zephyr format), as published.
constexpr std::string_view kZephyr = R"TPL({% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>
'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %})TPL";

// SmolLM2 Instruct, as published.
constexpr std::string_view kSmolLM2 =
    R"TPL({% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system
You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
' }}{% endif %}{{'<|im_start|>' + message['role'] + '
' + message['content'] + '<|im_end|>' + '
'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant
' }}{% endif %})TPL";

// Qwen2.5 Instruct, as published (also in ../shared/testdata/templates).
constexpr std::string_view kQwen25 = R"TPL({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)TPL";

// Qwen3: ChatML with the optional empty thinking block that disables reasoning. A short
// form of the published template, which also renders tool calls and strips earlier
// reasoning from the history.
constexpr std::string_view kQwen3 = R"TPL({%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message['role'] == 'user' or (message['role'] == 'system' and not loop.first) %}
        {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
    {%- elif message['role'] == 'assistant' %}
        {{- '<|im_start|>assistant\n' + message['content'] + '<|im_end|>\n' }}
    {%- elif message['role'] == 'tool' %}
        {{- '<|im_start|>user\n<tool_response>\n' + message['content'] + '\n</tool_response><|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %})TPL";

// Gemma 3 IT: the system prompt joins the first user turn; the assistant is "model". A
// short form of the published template, which also accepts image parts.
constexpr std::string_view kGemma3 = R"TPL({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if message['role'] == 'assistant' -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {{- message['content'] | trim }}
    {{- '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{ '<start_of_turn>model\n' }}
{%- endif -%})TPL";

// gpt-oss: a placeholder of synth's own in the shape of a harmony conversation (turns
// <|start|>role<|message|>text<|end|>), not OpenAI's harmony template, which is not
// copied here.
constexpr std::string_view kGptOssPlaceholder = R"TPL({#- Placeholder written by powerhouse synth: not the real harmony chat template of gpt-oss. -#}
{%- for message in messages -%}
    {{- '<|start|>' + message['role'] + '<|message|>' + message['content'] + '<|end|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|start|>assistant' -}}
{%- endif -%})TPL";

// Phi-3 / Phi-3.5 mini instruct, as published (../shared/testdata/templates).
constexpr std::string_view kPhi3 =
    R"TPL({% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'user' %}{{'<|user|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>
' + message['content'] + '<|end|>
'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>
' }}{% else %}{{ eos_token }}{% endif %})TPL";

// SmolLM3: ChatML turns under a system turn with SmolLM3's metadata header; "/no_think" in
// the system prompt (or enable_thinking false) gives the assistant an empty
// <think>\n\n</think>. A short form of the published template, its default system
// instructions included: the tool sections are left out, the turn format is the same.
constexpr std::string_view kSmolLM3 =
    R"TPL({%- set reasoning_mode = "/think" if enable_thinking is not defined or enable_thinking else "/no_think" -%}
{%- set ns = namespace(system="") -%}
{%- if messages[0]['role'] == 'system' -%}
    {%- set system_message = messages[0]['content'] -%}
    {%- if "/no_think" in system_message -%}{%- set reasoning_mode = "/no_think" -%}{%- elif "/think" in system_message -%}{%- set reasoning_mode = "/think" -%}{%- endif -%}
    {%- set ns.system = system_message.replace("/no_think", "").replace("/think", "").rstrip() -%}
{%- endif -%}
{{- "<|im_start|>system\n" -}}
{{- "## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: " + reasoning_mode + "\n\n" -}}
{{- "## Custom Instructions\n\n" -}}
{%- if ns.system -%}
    {{- ns.system + "\n\n" -}}
{%- elif reasoning_mode == "/think" -%}
    {{- "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves thoroughly exploring questions through a systematic thinking process before providing the final precise and accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, reassessment, reflection, backtracking, and iteration to develop well-considered thinking process. Please structure your response into two main sections: Thought and Solution using the specified format: <think> Thought section </think> Solution section. In the Thought section, detail your reasoning process in steps. Each step should include detailed considerations such as analysing questions, summarizing relevant findings, brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, and revisiting previous steps. In the Solution section, based on various attempts, explorations, and reflections from the Thought section, systematically present the final solution that you deem correct. The Solution section should be logical, accurate, and concise and detail necessary steps needed to reach the conclusion.\n\n" -}}
{%- else -%}
    {{- "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n" -}}
{%- endif -%}
{{- "<|im_end|>\n" -}}
{%- for message in messages -%}
    {%- if message['role'] == 'user' -%}
        {{ "<|im_start|>user\n" + message['content'] + "<|im_end|>\n" }}
    {%- elif message['role'] == 'assistant' -%}
        {%- if reasoning_mode == "/think" -%}
            {{ "<|im_start|>assistant\n" + message['content'].lstrip("\n") + "<|im_end|>\n" }}
        {%- else -%}
            {{ "<|im_start|>assistant\n<think>\n\n</think>\n" + message['content'].lstrip("\n") + "<|im_end|>\n" }}
        {%- endif -%}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{ "<|im_start|>assistant\n" if reasoning_mode == "/think" else "<|im_start|>assistant\n<think>\n\n</think>\n" }}
{%- endif -%})TPL";

// Seed-OSS: turns <seed:bos>role\ncontent<seed:eos>, the assistant's reasoning in
// <seed:think>...</seed:think>. A short form of the published template (no tool or
// thinking-budget sections).
constexpr std::string_view kSeedOss = R"TPL({%- for message in messages -%}
{%- if message['role'] == 'assistant' -%}
{{ '<seed:bos>assistant' }}
{%- if message.reasoning_content is defined and message.reasoning_content is string and message.reasoning_content | trim | length > 0 -%}
{{ '\n<seed:think>' + message.reasoning_content | trim + '</seed:think>' }}
{%- endif -%}
{{ '\n' + message['content'] | trim + '<seed:eos>' }}
{%- else -%}
{{ '<seed:bos>' + message['role'] + '\n' + message['content'] + '<seed:eos>' }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{ '<seed:bos>assistant\n' }}
{%- endif -%})TPL";

// GLM-4-0414: [gMASK]<sop>, then <|role|>\ncontent turns; the generation prompt is
// <|assistant|>. A short form of the published template (no tool section).
constexpr std::string_view kGlm4 = R"TPL([gMASK]<sop>
{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
<|system|>
{{ message['content'] }}
{%- elif message['role'] == 'user' -%}
<|user|>
{{ message['content'] }}
{%- elif message['role'] == 'assistant' -%}
<|assistant|>
{{ message['content'] }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|assistant|>
{%- endif -%})TPL";

// GLM-4.5 / 4.6: as GLM-4 with thinking: past assistant turns carry an empty (or their)
// <think></think>, enable_thinking false appends /nothink to the user's turn and closes the
// generation prompt's thinking at once. A short form of the published template (no tool
// sections).
constexpr std::string_view kGlm45 = R"TPL([gMASK]<sop>
{%- for m in messages -%}
{%- if m.role == 'system' -%}
<|system|>
{{ m.content }}
{%- elif m.role == 'user' -%}
<|user|>
{{ m.content }}
{{- '/nothink' if (enable_thinking is defined and not enable_thinking and not m.content.endswith("/nothink")) else '' -}}
{%- elif m.role == 'assistant' -%}
<|assistant|>
{%- set content = m.content -%}
{%- set reasoning = m.reasoning_content if m.reasoning_content is string else '' -%}
{%- if '</think>' in content -%}
{%- set reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') -%}
{%- set content = content.split('</think>')[-1].lstrip('\n') -%}
{%- endif -%}
{{ '\n<think>' + reasoning.strip() + '</think>' }}
{%- if content.strip() -%}
{{ '\n' + content.strip() }}
{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|assistant|>
{{- '\n<think></think>' if (enable_thinking is defined and not enable_thinking) else '' -}}
{%- endif -%})TPL";

// Ministral 3 Instruct: <s>[SYSTEM_PROMPT]...[/SYSTEM_PROMPT][INST]user[/INST]answer</s>.
// A short form of the published template (no default system prompt, tools or images).
constexpr std::string_view kMinistral3 = R"TPL({{- bos_token }}
{%- if messages[0]['role'] == 'system' -%}
{{- '[SYSTEM_PROMPT]' + messages[0]['content'] + '[/SYSTEM_PROMPT]' -}}
{%- set loop_messages = messages[1:] -%}
{%- else -%}
{%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
{%- if message['role'] == 'user' -%}
{{- '[INST]' + message['content'] + '[/INST]' -}}
{%- elif message['role'] == 'assistant' -%}
{{- message['content'] + eos_token -}}
{%- endif -%}
{%- endfor -%})TPL";

// Granite 3.x Instruct: <|start_of_role|>role<|end_of_role|>content<|end_of_text|>\n, with
// Granite's default system turn when none is given. A short form of the published
// template (no tools, documents or controls; a fixed date).
constexpr std::string_view kGranite3 = R"TPL({%- if messages[0]['role'] == 'system' -%}
{%- set system_message = messages[0]['content'] -%}
{%- set loop_messages = messages[1:] -%}
{%- else -%}
{%- set system_message = "Knowledge Cutoff Date: April 2024. Today's Date: April 16, 2025. You are Granite, developed by IBM. You are a helpful AI assistant." -%}
{%- set loop_messages = messages -%}
{%- endif -%}
{{- '<|start_of_role|>system<|end_of_role|>' + system_message + '<|end_of_text|>\n' -}}
{%- for message in loop_messages -%}
{{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|start_of_role|>assistant<|end_of_role|>' -}}
{%- endif -%})TPL";

}  // namespace

std::string_view chat_template(ChatTemplateId id) {
    switch (id) {
        case ChatTemplateId::llama3:
            return kLlama3;
        case ChatTemplateId::llama2:
            return kLlama2;
        case ChatTemplateId::mistral:
            return kMistral;
        case ChatTemplateId::zephyr:
            return kZephyr;
        case ChatTemplateId::smollm2:
            return kSmolLM2;
        case ChatTemplateId::qwen25:
            return kQwen25;
        case ChatTemplateId::qwen3:
            return kQwen3;
        case ChatTemplateId::gemma3:
            return kGemma3;
        case ChatTemplateId::gpt_oss_placeholder:
            return kGptOssPlaceholder;
        case ChatTemplateId::phi3:
            return kPhi3;
        case ChatTemplateId::smollm3:
            return kSmolLM3;
        case ChatTemplateId::seed_oss:
            return kSeedOss;
        case ChatTemplateId::glm4:
            return kGlm4;
        case ChatTemplateId::glm45:
            return kGlm45;
        case ChatTemplateId::ministral3:
            return kMinistral3;
        case ChatTemplateId::granite3:
            return kGranite3;
        case ChatTemplateId::none:
            return {};
    }
    return kLlama3;
}

}  // namespace powerhouse::synth
