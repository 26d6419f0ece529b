#include "answer_printer.h"

#include <nlohmann/json.hpp>

#include "format.h"

namespace powerhouse::cli {

void AnswerPrinter::reasoning(std::string_view piece) {
    if (piece.empty()) return;
    if (!thinking_) {
        write(text_open_ ? "\n<think>\n" : "<think>\n");
        thinking_ = true;
        text_open_ = false;
    }
    write(piece);
}

void AnswerPrinter::text(std::string_view piece) {
    if (piece.empty()) return;  // an empty piece must not close the think block
    if (thinking_) {
        write("\n</think>\n\n");
        thinking_ = false;
    }
    write(piece);
    text_open_ = true;
}

void AnswerPrinter::end() {
    if (thinking_) write("\n</think>\n");
    if (text_open_) write("\n");
    thinking_ = text_open_ = false;
}

void AnswerPrinter::tool_calls(const std::vector<ToolCall>& calls) {
    if (calls.empty()) return;
    end();
    for (const ToolCall& call : calls) {
        nlohmann::ordered_json shown = {{"name", call.name}};
        // Arguments that are no JSON (a model's slip) are shown as the text they are.
        nlohmann::ordered_json arguments = nlohmann::ordered_json::parse(call.arguments, nullptr, false);
        shown["arguments"] = arguments.is_discarded() ? nlohmann::ordered_json(call.arguments) : std::move(arguments);
        if (!call.id.empty()) shown["id"] = call.id;
        write("<tool_call>\n" + json_text(shown) + "\n</tool_call>\n");
    }
}

void AnswerPrinter::write(std::string_view bytes) {
    std::fwrite(bytes.data(), 1, bytes.size(), out_);
    std::fflush(out_);
}

void say_cut_while_reasoning(bool in_chat) {
    std::fprintf(stderr,
                 "(the answer reached its token limit while the model was still reasoning: no answer came%s; allow "
                 "more tokens with -n)\n",
                 in_chat ? ", and your message is taken back" : "");
}

void say_token_limit_in_chat(bool while_reasoning) {
    if (while_reasoning) {
        say_cut_while_reasoning(true);
    } else {
        std::fputs("(the answer reached its token limit)\n", stderr);
    }
}

}  // namespace powerhouse::cli
