#include "chat_loop.h"

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <iostream>

namespace powerhouse::cli {
namespace {

std::atomic<int> g_interrupts{0};  // Ctrl+C presses while a guard lives (a signal handler's only channel)

extern "C" void on_interrupt(int) {
    g_interrupts.fetch_add(1);
}

}  // namespace

InterruptGuard::InterruptGuard() {
    g_interrupts = 0;
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_);
}

InterruptGuard::~InterruptGuard() {
    sigaction(SIGINT, &previous_, nullptr);
}

int InterruptGuard::presses() {
    return g_interrupts.load();
}

int run_chat_loop(const std::string& system, bool interactive, const ChatAnswerer& answer) {
    std::vector<ChatMessage> messages;
    if (!system.empty()) messages.push_back({"system", system});
    const size_t first_turn = messages.size();
    std::string line;
    uint64_t turn = 0;
    bool failed = false;
    for (;;) {
        if (interactive) std::fputs("\n> ", stdout);
        std::fflush(stdout);
        if (!std::getline(std::cin, line)) break;
        if (line == "/exit" || line == "/quit") break;
        if (line == "/reset") {
            messages.erase(messages.begin() + static_cast<std::ptrdiff_t>(first_turn), messages.end());
            std::fputs("(new conversation)\n", stderr);
            continue;
        }
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        messages.push_back({"user", line});
        ++turn;

        ChatReply reply = answer(messages, turn);
        if (reply.quit) return 130;
        failed = failed || reply.failed;
        if (reply.dropped_messages > 0) {
            messages.erase(messages.begin() + static_cast<std::ptrdiff_t>(first_turn),
                           messages.begin() + static_cast<std::ptrdiff_t>(first_turn + reply.dropped_messages));
        }
        if (reply.answer) {
            messages.push_back({"assistant", std::move(*reply.answer)});
        } else {
            messages.pop_back();  // the user's message that got no answer: the turn is taken back
        }
    }
    return failed && !interactive ? 1 : 0;
}

}  // namespace powerhouse::cli
