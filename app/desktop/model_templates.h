// A chat template chosen for one model instead of its own (the Models page: "Chat template:
// from a file…"), kept in the store's app settings under "chat_template:" + the model's path
// as JSON {"file": the file it was read from, "text": its Jinja source}. The text is kept,
// not the path: the file may move or change, and the model must go on chatting as it did.
// It is given to the engine as ModelOptions::chat_template whenever that model loads
// (ChatController::loadModel); a template that cannot render a plain message fails the load
// with the engine's word, shown where load errors show.
//
// A draft model chosen for one model (the Models page: "Draft model"), for speculative
// decoding: kept under "draft_model:" + the model's path as the draft's path. It is given to
// the engine as LoadCommand::draft_model whenever that model loads; a draft of another
// vocabulary fails the load with the engine's word (naming a token), shown where load errors
// show, and the user chooses another or none.
//
// Thread-safety: pure functions over the store given (the caller's thread).
#pragma once

#include <QString>

#include <optional>
#include <string>

#include "powerhouse/result.h"
#include "store/store.h"

struct ModelChatTemplate {
    QString file;      // where it was read from (shown; it may have moved since)
    std::string text;  // the Jinja source given to the engine
};

// The template chosen for the model at `path`; none: the model's own. A setting that cannot
// be read as one (hand-edited) counts as none.
powerhouse::Result<std::optional<ModelChatTemplate>> model_chat_template(const powerhouse::store::Store& store,
                                                                         const QString& path);
// Reads `file` (a Jinja chat template, at most 1 MiB, not empty) and keeps it for the model
// at `path`; the error says what is wrong with the file or the store.
powerhouse::Result<void> set_model_chat_template(powerhouse::store::Store& store, const QString& path,
                                                 const QString& file);
// Back to the model's own template.
powerhouse::Result<void> clear_model_chat_template(powerhouse::store::Store& store, const QString& path);

// The draft model chosen for the model at `path`; "" for none.
powerhouse::Result<QString> model_draft_model(const powerhouse::store::Store& store, const QString& path);
// Keeps `draft` (a model's path; "" for none) as the draft model of the model at `path`.
powerhouse::Result<void> set_model_draft_model(powerhouse::store::Store& store, const QString& path,
                                               const QString& draft);
