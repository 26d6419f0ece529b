#include "replies.h"

#include <fmt/format.h>

namespace powerhouse::server {

namespace {

json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index) {
    json out = json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
        json c = json::object();
        if (with_index) c["index"] = i;  // streamed deltas say which call they belong to
        c["id"] = calls[i].id;
        c["type"] = "function";
        c["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
        out.push_back(std::move(c));
    }
    return out;
}

}  // namespace

Reply::Reply(bool chat, std::string id, std::string model, int64_t created, const GenRequest& request)
    : chat_(chat),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      include_usage_(request.include_usage),
      logprobs_(request.settings.logprobs) {}

json Reply::usage(const DoneEvent& done) {
    const auto prompt = static_cast<int64_t>(done.prompt_ids.size());
    const auto completion = static_cast<int64_t>(done.generated_ids.size());
    json u = {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
    // Speculative decoding's guesses (a prediction, or lookup): the ones the model wrote too,
    // and the ones it did not, as OpenAI counts a predicted output's tokens.
    if (done.stats.drafted_tokens > 0) {
        u["completion_tokens_details"] = {
            {"accepted_prediction_tokens", done.stats.accepted_tokens},
            {"rejected_prediction_tokens", done.stats.drafted_tokens - done.stats.accepted_tokens}};
    }
    return u;
}

// Chat: {"content": [...]}. Text completions: OpenAI's legacy form, parallel lists.
json Reply::logprobs_of(std::span<const TokenLogprob> logprobs, size_t text_offset) const {
    if (chat_) return {{"content", logprobs_content(logprobs)}};
    json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
    for (const TokenLogprob& lp : logprobs) {
        tokens.push_back(lp.chosen.bytes);
        token_logprobs.push_back(std::max(lp.chosen.logprob, -9999.0f));
        json alternatives = json::object();
        for (const TokenChoice& t : lp.top) alternatives[t.bytes] = std::max(t.logprob, -9999.0f);
        top.push_back(std::move(alternatives));
        offsets.push_back(text_offset);
        text_offset += lp.chosen.bytes.size();
    }
    return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

json Reply::complete(const DoneEvent& done) const {
    json choice = {{"index", 0}};
    std::string reason = finish_reason(done.stats.stop_reason);
    if (chat_) {
        json message = {{"role", "assistant"}};
        message["content"] = done.text.empty() && !done.tool_calls.empty() ? json(nullptr) : json(done.text);
        if (!done.reasoning.empty()) message["reasoning_content"] = done.reasoning;
        if (!done.tool_calls.empty()) {
            message["tool_calls"] = tool_calls_json(done.tool_calls, false);
            if (done.stats.stop_reason == StopReason::eos || done.stats.stop_reason == StopReason::stop) {
                reason = "tool_calls";
            }
        }
        choice["message"] = std::move(message);
    } else {
        choice["text"] = done.text;
    }
    choice["logprobs"] = logprobs_ ? logprobs_of(done.logprobs, 0) : json(nullptr);
    choice["finish_reason"] = reason;
    return {{"id", id_},
            {"object", chat_ ? "chat.completion" : "text_completion"},
            {"created", created_},
            {"model", model_},
            {"choices", json::array({std::move(choice)})},
            {"usage", usage(done)}};
}

std::string Reply::event(json choice, bool with_usage_null) const {
    json c = {{"id", id_},
              {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
              {"created", created_},
              {"model", model_},
              {"choices", json::array({std::move(choice)})}};
    if (include_usage_ && with_usage_null) c["usage"] = nullptr;
    return "data: " + to_text(c) + "\n\n";
}

std::string Reply::stream_start() {
    if (!chat_) return {};
    return event({{"index", 0},
                  {"delta", {{"role", "assistant"}, {"content", ""}}},
                  {"logprobs", nullptr},
                  {"finish_reason", nullptr}});
}

std::string Reply::stream_text(const TokenEvent& token) {
    const std::string& text = token.text;
    // Logprobs go with the text they belong to; held-back text keeps its logprobs for later.
    pending_logprobs_.insert(pending_logprobs_.end(), token.logprobs.begin(), token.logprobs.end());
    std::string out;
    if (chat_ && !token.reasoning.empty()) {
        out += event({{"index", 0},
                      {"delta", {{"reasoning_content", token.reasoning}}},
                      {"logprobs", nullptr},
                      {"finish_reason", nullptr}});
    }
    if (text.empty()) return out;
    json choice = {{"index", 0}};
    if (chat_) {
        choice["delta"] = {{"content", text}};
    } else {
        choice["text"] = text;
    }
    choice["logprobs"] = logprobs_ ? logprobs_of(pending_logprobs_, text_offset_) : json(nullptr);
    choice["finish_reason"] = nullptr;
    text_offset_ += text.size();
    pending_logprobs_.clear();
    return out + event(std::move(choice));
}

std::string Reply::stream_end(const DoneEvent& done) {
    std::string out;
    std::string reason = finish_reason(done.stats.stop_reason);
    const auto unsent = [&] {
        json lp = logprobs_of(pending_logprobs_, text_offset_);
        pending_logprobs_.clear();
        return lp;
    };
    if (chat_ && !done.tool_calls.empty()) {
        out += event({{"index", 0},
                      {"delta", {{"tool_calls", tool_calls_json(done.tool_calls, true)}}},
                      {"logprobs", nullptr},
                      {"finish_reason", nullptr}});
        if (done.stats.stop_reason == StopReason::eos || done.stats.stop_reason == StopReason::stop) {
            reason = "tool_calls";
        }
    }
    json last = {{"index", 0}};
    if (chat_) {
        last["delta"] = json::object();
    } else {
        last["text"] = "";
    }
    last["logprobs"] = logprobs_ && !pending_logprobs_.empty() ? unsent() : json(nullptr);
    last["finish_reason"] = reason;
    out += event(std::move(last));
    if (include_usage_) {
        const json u = {{"id", id_},
                        {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                        {"created", created_},
                        {"model", model_},
                        {"choices", json::array()},
                        {"usage", usage(done)}};
        out += "data: " + to_text(u) + "\n\n";
    }
    out += "data: [DONE]\n\n";
    return out;
}

}  // namespace powerhouse::server
