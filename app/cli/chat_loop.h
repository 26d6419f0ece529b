// The terminal chat's loop that `chat` and `chat --remote` share: one line of standard input
// per user message ("> " first on a terminal); "/exit", "/quit" or the end of input quits,
// "/reset" starts the conversation over (the system prompt stays), blank lines are skipped.
// Answering is the caller's (the engine thread, or a remote server): a callback gets the
// conversation, ending with the user's new message, and says what became of the turn. Both
// count Ctrl+C while an answer runs with InterruptGuard.
//
// Thread-safety: runs on the calling thread, and the callback with it. InterruptGuard
// replaces the process's SIGINT handler while it lives: one at a time.
#pragma once

#include <signal.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "powerhouse/generation.h"

namespace powerhouse::cli {

// What one answer made of its turn.
struct ChatReply {
    // The answer, kept in the conversation; none when there is nothing to keep (a failure before
    // any text, an empty answer): the user's message is then taken back too.
    std::optional<std::string> answer;
    // The oldest messages after the system prompt that the engine dropped to fit its context;
    // they leave the conversation too.
    uint32_t dropped_messages = 0;
    // A second Ctrl+C: the chat ends at once, with exit status 130.
    bool quit = false;
    // The turn failed (reported already), so that a chat whose lines are piped in ends with
    // exit status 1. Whether the turn stays is `answer`'s: a failure before any answer has none
    // and is taken back, while an interrupted remote answer keeps the text that arrived.
    bool failed = false;

    static ChatReply answered(std::string text, uint32_t dropped = 0) { return {std::move(text), dropped, false}; }
    static ChatReply taken_back() { return {std::nullopt, 0, false}; }
    static ChatReply failed_turn() { return {std::nullopt, 0, false, true}; }
    static ChatReply quit_chat() { return {std::nullopt, 0, true}; }
};

// Counts Ctrl+C presses while it lives (an answer runs), from zero; the previous handler
// comes back after, so that Ctrl+C at the prompt quits as usual.
class InterruptGuard {
public:
    InterruptGuard();
    ~InterruptGuard();
    InterruptGuard(const InterruptGuard&) = delete;
    InterruptGuard& operator=(const InterruptGuard&) = delete;

    // The presses counted by the latest guard (also after it ended); any thread.
    static int presses();

private:
    struct sigaction previous_ {};
};

// Answers `messages` (its last message the user's) on turn 1, 2, ... of the chat.
using ChatAnswerer = std::function<ChatReply(const std::vector<ChatMessage>& messages, uint64_t turn)>;

// Runs the chat until it ends; `system` (when not empty) opens every conversation. Returns
// the exit status: 0, 130 when an answer asked to quit, or 1 when the chat was not
// interactive (its lines piped in) and a turn failed, so that a script sees the failure.
int run_chat_loop(const std::string& system, bool interactive, const ChatAnswerer& answer);

}  // namespace powerhouse::cli
