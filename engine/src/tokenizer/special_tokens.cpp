#include "tokenizer/special_tokens.h"

#include <algorithm>
#include <initializer_list>
#include <string>

namespace powerhouse {
namespace {

using IdSlot = std::optional<TokenId> Vocab::*;

struct IdKey {
    std::string_view key;
    IdSlot slot;
};

// Later entries win when a file has both the current and the deprecated FIM keys, as in
// the reference, which reads them in this order.
constexpr IdKey kIdKeys[] = {
    {"tokenizer.ggml.bos_token_id", &Vocab::bos},         {"tokenizer.ggml.eos_token_id", &Vocab::eos},
    {"tokenizer.ggml.eot_token_id", &Vocab::eot},         {"tokenizer.ggml.eom_token_id", &Vocab::eom},
    {"tokenizer.ggml.unknown_token_id", &Vocab::unk},     {"tokenizer.ggml.padding_token_id", &Vocab::pad},
    {"tokenizer.ggml.fim_pre_token_id", &Vocab::fim_pre}, {"tokenizer.ggml.fim_suf_token_id", &Vocab::fim_suf},
    {"tokenizer.ggml.fim_mid_token_id", &Vocab::fim_mid}, {"tokenizer.ggml.fim_pad_token_id", &Vocab::fim_pad},
    {"tokenizer.ggml.fim_rep_token_id", &Vocab::fim_rep}, {"tokenizer.ggml.fim_sep_token_id", &Vocab::fim_sep},
    {"tokenizer.ggml.prefix_token_id", &Vocab::fim_pre},  {"tokenizer.ggml.suffix_token_id", &Vocab::fim_suf},
    {"tokenizer.ggml.middle_token_id", &Vocab::fim_mid},
};

// Texts by which a missing id is recognised; the first text present in the vocabulary wins.
struct TextRule {
    IdSlot slot;
    std::initializer_list<std::string_view> texts;
};

const TextRule kTextRules[] = {
    {&Vocab::eot,
     {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
      "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}},
    {&Vocab::eom, {"<|eom_id|>"}},
    {&Vocab::fim_pre,
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
      "<|prefix|>"}},
    {&Vocab::fim_suf,
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>",
      "<|suffix|>"}},
    {&Vocab::fim_mid,
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
      "<|middle|>"}},
    {&Vocab::fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
    {&Vocab::fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
    {&Vocab::fim_sep, {"<|file_sep|>"}},
};

// Tokens that end generation wherever they appear in a vocabulary.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
};

void make_control(Vocab& v, TokenId id) {
    v.attrs[static_cast<size_t>(id)] |= token_attr::control;
}

void read_ids(const GgufMetadata& m, Vocab& v) {
    if (v.is_spm) {  // SentencePiece's conventional ids, unless the file says otherwise
        v.bos = 1;
        v.eos = 2;
        v.unk = 0;
    }
    for (IdSlot slot : {&Vocab::bos, &Vocab::eos, &Vocab::unk}) {
        if ((v.*slot) && !v.valid(*(v.*slot))) v.*slot = std::nullopt;
    }
    for (const IdKey& k : kIdKeys) {
        const std::optional<uint64_t> id = m.get_uint(k.key);
        if (id && *id < static_cast<uint64_t>(v.n_tokens)) v.*(k.slot) = static_cast<TokenId>(*id);
    }
    if (const auto add = m.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos = *add;
    if (const auto add = m.get_bool("tokenizer.ggml.add_eos_token")) v.add_eos = *add;
}

void recognise_by_text(Vocab& v) {
    for (const TextRule& rule : kTextRules) {
        if (v.*(rule.slot)) continue;
        for (std::string_view text : rule.texts) {
            if (const auto id = v.find(text)) {
                v.*(rule.slot) = *id;
                make_control(v, *id);
                break;
            }
        }
    }
    // Control tokens named "unused" are placeholders (Gemma's "<unused0>", ...).
    for (TokenId id = 0; id < v.n_tokens; ++id) {
        if (v.has_attr(id, token_attr::control) && v.text(id).find("unused") != std::string_view::npos) {
            v.attrs[static_cast<size_t>(id)] |= token_attr::unused;
        }
    }
}

void build_end_of_generation(Vocab& v) {
    for (IdSlot slot : {&Vocab::fim_pad, &Vocab::fim_rep, &Vocab::fim_sep}) {
        if (v.*slot) v.eog.insert(*(v.*slot));
    }
    for (std::string_view text : kEndOfGenerationTexts) {
        if (const auto id = v.find(text)) {
            v.eog.insert(*id);
            make_control(v, *id);
        }
    }
    // gpt-oss: these structure tokens are always rendered.
    for (std::string_view text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
        if (const auto id = v.find(text)) v.attrs[static_cast<size_t>(*id)] = token_attr::user_defined;
    }
    for (IdSlot slot : {&Vocab::eos, &Vocab::eot, &Vocab::eom}) {
        if (v.*slot) v.eog.insert(*(v.*slot));
    }
    const auto eog_id = [&](std::string_view text) -> std::optional<TokenId> {
        const auto id = v.find(text);
        return id && v.eog.count(*id) ? id : std::nullopt;
    };
    // o200k_harmony and solar-open end a message with "<|end|>" but a turn with "<|return|>"
    // or "<|call|>"/"<|calls|>": there "<|end|>" must not stop generation.
    const auto end = eog_id("<|end|>");
    const bool has_call = eog_id("<|call|>") || eog_id("<|calls|>");
    if (end && has_call && (eog_id("<|return|>") || eog_id("<|flush|>"))) {
        v.eog.erase(*end);
        v.attrs[static_cast<size_t>(*end)] = token_attr::user_defined;
    }
    // Gemma 4 and PLaMo use "</s>" as an ordinary token.
    const auto s = eog_id("</s>");
    if (s && (eog_id("<|tool_response>") || eog_id("<|plamo:eos|>"))) {
        v.eog.erase(*s);
        v.attrs[static_cast<size_t>(*s)] = token_attr::normal;
    }
}

// Phi-3's special tokens swallow the white space after them (its HF tokenizer strips it).
void apply_strip_rules(const GgufMetadata& m, Vocab& v) {
    std::string name(m.get_string("general.name").value_or(""));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); });
    if (name.find("phi-3") == std::string::npos && name.find("phi3") == std::string::npos) return;
    constexpr uint16_t kSpecial = token_attr::control | token_attr::user_defined | token_attr::unknown;
    for (TokenId id = 0; id < v.n_tokens; ++id) {
        if (v.has_attr(id, kSpecial)) v.attrs[static_cast<size_t>(id)] |= token_attr::rstrip;
    }
    if (const auto id = v.find("</s>")) v.attrs[static_cast<size_t>(*id)] |= token_attr::rstrip;
    for (std::string_view text : {"<unk>", "<s>", "<|endoftext|>"}) {
        if (const auto id = v.find(text))
            v.attrs[static_cast<size_t>(*id)] &= static_cast<uint16_t>(~token_attr::rstrip);
    }
}

}  // namespace

void resolve_special_tokens(const GgufMetadata& metadata, Vocab& vocab) {
    read_ids(metadata, vocab);
    recognise_by_text(vocab);
    build_end_of_generation(vocab);
    apply_strip_rules(metadata, vocab);
}

}  // namespace powerhouse
