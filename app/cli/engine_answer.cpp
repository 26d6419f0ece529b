#include "engine_answer.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "format.h"

namespace powerhouse::cli {

bool wait_loaded(Engine& engine, bool show_progress, ModelSummary& summary) {
    for (;;) {
        std::optional<EngineEvent> event = engine.wait_event(std::chrono::milliseconds(100));
        if (!event) continue;
        if (const auto* progress = std::get_if<LoadProgressEvent>(&*event)) {
            if (show_progress) {
                std::fprintf(stderr, "\rLoading %3.0f%% (%s)\033[K", progress->fraction * 100.0,
                             progress->stage.c_str());
            }
        } else if (const auto* loaded = std::get_if<LoadedEvent>(&*event)) {
            if (show_progress) std::fputs("\r\033[K", stderr);
            summary = loaded->model;
            // A model whose own template is missing or broken still chats, in its family's
            // format: say so once, as the answers may read differently.
            if (!summary.template_note.empty()) std::fprintf(stderr, "note: %s\n", summary.template_note.c_str());
            return true;
        } else if (const auto* error = std::get_if<ErrorEvent>(&*event)) {
            if (show_progress) std::fputs("\r\033[K", stderr);
            report_error(error->error);
            return false;
        }
    }
}

void print_recovery(const RecoveryEvent& event) {
    // On a terminal the answer's text may have stopped mid-line on stdout: the banner starts
    // a line of its own.
    const bool shared_screen = isatty(STDOUT_FILENO) != 0 && isatty(STDERR_FILENO) != 0;
    std::fprintf(stderr, "%s%s\n", shared_screen ? "\n" : "", event.message.c_str());
    std::fflush(stderr);
}

EngineAnswer answer_on_engine(Engine& engine, GenerateCommand command, AnswerPrinter* printer,
                              const std::function<Interrupt()>& interrupted) {
    const uint64_t id = command.request_id;
    engine.submit(std::move(command));
    bool cancelled = false;
    for (;;) {
        if (interrupted) {
            const Interrupt asked = interrupted();
            if (asked == Interrupt::quit) return {std::nullopt, std::nullopt, true};
            if (asked == Interrupt::cancel && !cancelled) {
                engine.submit(CancelCommand{id});
                cancelled = true;
            }
        }
        std::optional<EngineEvent> event = engine.wait_event(std::chrono::milliseconds(50));
        if (!event) continue;
        if (const auto* token = std::get_if<TokenEvent>(&*event)) {
            if (printer != nullptr) {
                // One event may end the reasoning and begin the text: the reasoning came first.
                printer->reasoning(token->reasoning);
                printer->text(token->text);
            }
        } else if (const auto* recovery = std::get_if<RecoveryEvent>(&*event)) {
            print_recovery(*recovery);
        } else if (auto* done = std::get_if<DoneEvent>(&*event)) {
            return {std::move(*done), std::nullopt, false};
        } else if (auto* error = std::get_if<ErrorEvent>(&*event)) {
            return {std::nullopt, std::move(error->error), false};
        }
    }
}

bool cut_while_reasoning(const DoneEvent& done) {
    return done.stats.stop_reason == StopReason::length && done.text.empty() && !done.reasoning.empty();
}

}  // namespace powerhouse::cli
