// The per-conversation settings: the system prompt (kept in its own column of the store)
// and the sampling settings, kept as JSON in the conversation's settings_json. A field
// that is missing takes the app's default; a field out of range is refused with the
// sampler's message.
//
// JSON keys: temperature, top_k, top_p, min_p, repeat_penalty, presence_penalty,
// frequency_penalty, max_tokens, seed (absent: a new random seed for every answer, so that
// Regenerate gives a new answer; present: the same seed every time, for repeatable answers),
// enable_thinking (only false is written: the model answers without thinking; absent: the
// model's own default) and reasoning_effort ("low", "medium" or "high"; absent: the model's
// own default). Those two are the chat template's switches (GenerateCommand::
// template_variables), kept whatever model answers: a template that does not read them
// ignores them, and the next model that does reads them again.
//
// Thread-safety: pure functions.
#pragma once

#include <QString>
#include <QVariantMap>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "powerhouse/generation.h"
#include "powerhouse/result.h"

struct ConversationSettings {
    powerhouse::GenerationSettings generation;
    std::optional<uint64_t> seed;  // none: random per answer
    bool thinking = true;          // false: {"enable_thinking": false}
    std::string reasoning_effort;  // "", "low", "medium", "high"; "": nothing sent
};

// The variables for the model's chat template that `settings` ask for (null: none), as
// GenerateCommand::template_variables takes them.
nlohmann::ordered_json conversation_template_variables(const ConversationSettings& settings);

// Reads settings_json over `defaults`; unreadable JSON or wrong types give the defaults for
// those fields (an old or hand-edited file never stops a chat).
ConversationSettings parse_conversation_settings(const std::string& json, const ConversationSettings& defaults);
std::string conversation_settings_json(const ConversationSettings& settings);

// For QML: {temperature, topK, topP, minP, repeatPenalty, presencePenalty, frequencyPenalty,
// maxTokens, seed (-1: random), thinking (bool), reasoningEffort ("" for the model's default)},
// and back. from_variant validates: an error names the field.
QVariantMap conversation_settings_variant(const ConversationSettings& settings);
powerhouse::Result<ConversationSettings> conversation_settings_from_variant(const QVariantMap& map,
                                                                            const ConversationSettings& defaults);
// The refusal of `map` as the settings dialog shows it, beside the field at fault:
// {field: its QML key, message: why}, the first field (in the dialog's order) refused on its
// own; field "" if none is refused alone. Empty when conversation_settings_from_variant
// takes the map.
QVariantMap conversation_settings_problem(const QVariantMap& map, const ConversationSettings& defaults);
