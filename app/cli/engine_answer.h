// What the commands that run the model on the engine thread (generate, chat, serve) share:
// waiting for the load, one answer's events read until it ends, and a device failure told
// as it happens: each RecoveryEvent's banner ("CPU 1 failed: ... Continuing on CPU, at
// about 40 tokens/s.") on stderr, while the engine loads the model again and the answer
// goes on from its last token (ARCHITECTURE.md section 7).
//
// Thread-safety: each function runs on the calling thread; print_recovery may be called
// from any.
#pragma once

#include <functional>
#include <optional>

#include "answer_printer.h"
#include "powerhouse/engine.h"
#include "powerhouse/result.h"

namespace powerhouse::cli {

// Waits for the model to load, its progress on stderr when `show_progress`. False when the
// load failed (the error reported).
bool wait_loaded(Engine& engine, bool show_progress, ModelSummary& summary);

// A RecoveryEvent's message on stderr, on a line of its own.
void print_recovery(const RecoveryEvent& event);

// What a user asks while an answer runs (polled every 50 ms).
enum class Interrupt { none, cancel, quit };

// How one answer ended: its DoneEvent (cancelled ones too), its error, or a quit asked for.
struct EngineAnswer {
    std::optional<DoneEvent> done;
    std::optional<Error> error;
    bool quit = false;
};

// Submits `command` and reads the engine's events until it ends: its reasoning and text to
// `printer` as they come when there is one (the caller ends it), recovery banners to stderr.
// `interrupted`, when set, may cancel it or end the wait at once (quit).
EngineAnswer answer_on_engine(Engine& engine, GenerateCommand command, AnswerPrinter* printer,
                              const std::function<Interrupt()>& interrupted = {});

// The token limit came while the model was still reasoning (GenerateCommand::read_answer):
// there is no answer to show, only its thinking.
bool cut_while_reasoning(const DoneEvent& done);

}  // namespace powerhouse::cli
