// The engine thread on the SmolLM2 test model: events in order, streaming equal to the
// final text and to a direct generation, the prompt cache, cancellation of running and
// queued generations, replacing and unloading models, and the errors a user can cause.
#include "powerhouse/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "support/engine_runs.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using namespace std::chrono_literals;

ModelOptions small_context(uint32_t n_ctx = 512) {
    ModelOptions options;
    options.n_ctx = n_ctx;
    options.n_threads = 2;
    options.n_batch = 32;
    return options;
}

bool is_final(const EngineEvent& e) {
    return std::holds_alternative<LoadedEvent>(e) || std::holds_alternative<UnloadedEvent>(e) ||
           std::holds_alternative<DoneEvent>(e) || std::holds_alternative<ErrorEvent>(e);
}

// The events up to and including the next final one (loaded, unloaded, done, error).
std::vector<EngineEvent> until_final(Engine& engine) {
    return test::events_until(engine, is_final);
}

void load(Engine& engine, ModelOptions options = small_context()) {
    engine.submit(LoadCommand{test::test_model_path(), options});
    const std::vector<EngineEvent> events = until_final(engine);
    ASSERT_FALSE(events.empty());
    if (const auto* error = std::get_if<ErrorEvent>(&events.back())) FAIL() << error->error.message;
    ASSERT_TRUE(std::holds_alternative<LoadedEvent>(events.back()));
}

GenerateCommand ask(uint64_t id, std::vector<ChatMessage> messages, int max_tokens) {
    GenerateCommand c;
    c.request_id = id;
    c.messages = std::move(messages);
    c.settings.max_tokens = max_tokens;
    c.settings.sampling.temperature = 0;  // greedy
    return c;
}

// A generation that only a cancel ends early.
GenerateCommand endless(uint64_t id) {
    GenerateCommand c;
    c.request_id = id;
    c.raw_prompt = "Once upon a time";
    c.settings.max_tokens = 400;
    c.settings.ignore_eos = true;
    return c;
}

// Text of the token events of a request, and its done event.
struct Answer {
    std::string streamed;
    std::string streamed_reasoning;
    // Token events before the first that carried text: the reasoning came while thinking.
    size_t reasoning_events_before_text = 0;
    size_t token_events = 0;
    std::optional<DoneEvent> done;
    std::optional<ErrorEvent> error;
};

Answer answer_of(const std::vector<EngineEvent>& events, uint64_t id) {
    Answer a;
    for (const EngineEvent& e : events) {
        if (const auto* t = std::get_if<TokenEvent>(&e); t && t->request_id == id) {
            if (a.streamed.empty() && !t->reasoning.empty()) ++a.reasoning_events_before_text;
            a.streamed += t->text;
            a.streamed_reasoning += t->reasoning;
            ++a.token_events;
        } else if (const auto* d = std::get_if<DoneEvent>(&e); d && d->request_id == id) {
            a.done = *d;
        } else if (const auto* err = std::get_if<ErrorEvent>(&e); err && err->request_id == id) {
            a.error = *err;
        }
    }
    return a;
}

Answer generate(Engine& engine, GenerateCommand command) {
    const uint64_t id = command.request_id;
    engine.submit(std::move(command));
    return answer_of(until_final(engine), id);
}

// Mappings of the test model's file in this process.
int mappings_of_model() {
    std::ifstream maps("/proc/self/maps");
    const std::string file = std::filesystem::canonical(test::test_model_path()).string();
    int n = 0;
    for (std::string line; std::getline(maps, line);) {
        if (line.find(file) != std::string::npos) ++n;
    }
    return n;
}

TEST(Engine, LoadReportsProgressThenTheModel) {
    Engine engine;
    std::atomic<int> notified{0};
    engine.set_notify([&] { ++notified; });
    engine.submit(LoadCommand{test::test_model_path(), small_context()});
    const std::vector<EngineEvent> events = until_final(engine);
    ASSERT_GE(events.size(), 3u);
    float last = -1;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
        const auto* p = std::get_if<LoadProgressEvent>(&events[i]);
        ASSERT_NE(p, nullptr) << "event " << i << " is not progress";
        EXPECT_GE(p->fraction, last);
        EXPECT_FALSE(p->stage.empty());
        last = p->fraction;
    }
    EXPECT_FLOAT_EQ(last, 1.0f);
    const auto* loaded = std::get_if<LoadedEvent>(&events.back());
    ASSERT_NE(loaded, nullptr);
    const ModelSummary& m = loaded->model;
    EXPECT_EQ(m.architecture, "llama");
    EXPECT_FALSE(m.name.empty());
    EXPECT_EQ(m.n_layer, 30u);
    EXPECT_EQ(m.n_vocab, 49152u);
    EXPECT_EQ(m.n_ctx, 512u);
    EXPECT_EQ(m.n_ctx_train, 8192u);
    EXPECT_TRUE(m.has_chat_template);
    EXPECT_EQ(m.template_note, "");                               // its own template is used
    EXPECT_FALSE(m.has_thinking_switch);                          // SmolLM2 does not think
    EXPECT_FALSE(m.has_reasoning_effort);
    EXPECT_EQ(m.tool_format, ToolCallFormat::generic);            // its template never mentions tools
    EXPECT_EQ(m.kv_cache_bytes, 2ull * 30 * 512 * (3 * 64) * 2);  // K and V, 30 layers, 3 KV heads of 64, F16
    EXPECT_GT(m.weight_bytes, 50'000'000u);
    EXPECT_GT(m.file_bytes, m.weight_bytes);
    EXPECT_EQ(m.device, "CPU (2 threads)");
    // What the file says about itself, as inspect_model reads it, from the load's own header.
    const Result<ModelInfo> inspected = inspect_model(m.path);
    ASSERT_TRUE(inspected);
    EXPECT_EQ(m.info.path, m.path);
    EXPECT_EQ(m.info.basename, inspected->basename);
    EXPECT_EQ(m.info.size_label, inspected->size_label);
    EXPECT_EQ(m.info.file_type, inspected->file_type);
    EXPECT_EQ(m.info.n_params, inspected->n_params);
    // The hook runs just after each event is queued: the last call may trail the event.
    for (int i = 0; i < 500 && notified.load() < static_cast<int>(events.size()); ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(notified.load(), static_cast<int>(events.size()));
}

// The template is resolved once, at load: a model without one chats in its family's built-in
// template, and its summary says so (the CLI prints it).
TEST(Engine, AModelWithoutATemplateUsesABuiltInOneAndSaysSo) {
    Result<Model> model = Model::load(test::data_dir() / "arch" / "qwen2-f32.gguf", small_context(64));
    ASSERT_TRUE(model) << model.error().message;
    EXPECT_FALSE(model->summary().has_chat_template);
    EXPECT_TRUE(model->chat_template().is_fallback);
    EXPECT_EQ(model->summary().template_note, resolve_chat_template(model->template_info()).note);
    EXPECT_EQ(model->summary().template_note.rfind("the model has no chat template: using the built-in ", 0), 0u)
        << model->summary().template_note;
    const std::vector<ChatMessage> conversation = {{"user", "Hello"}};
    Result<std::vector<TokenId>> prompt = chat_prompt(*model, conversation);
    ASSERT_TRUE(prompt) << prompt.error().message;
    nlohmann::ordered_json context = {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                                      {"add_generation_prompt", true}};
    add_default_tokens(context, model->template_info());
    Result<std::string> expected = model->chat_template().chat_template.render(context);
    ASSERT_TRUE(expected) << expected.error().message;
    EXPECT_EQ(model->tokenizer().detokenize(*prompt, true), *expected);
}

TEST(Engine, AGivenChatTemplateReplacesTheModelsOwnOrFailsTheLoad) {
    ModelOptions options = small_context(64);
    options.chat_template =
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\nAnswer briefly. {% endif %}";
    Result<Model> model = Model::load(test::test_model_path(), options);
    ASSERT_TRUE(model) << model.error().message;
    EXPECT_FALSE(model->chat_template().is_fallback);
    EXPECT_EQ(model->summary().template_note, "using the chat template given instead of the model's own");
    Result<std::vector<TokenId>> prompt = chat_prompt(*model, std::vector<ChatMessage>{{"user", "Hi"}});
    ASSERT_TRUE(prompt) << prompt.error().message;
    EXPECT_TRUE(model->tokenizer().detokenize(*prompt, true).ends_with("<|im_start|>assistant\nAnswer briefly. "));

    // One that cannot render a plain message is refused, with the template's own error.
    options.chat_template = "{{ messages | no_such_filter }}";
    Result<Model> refused = Model::load(test::test_model_path(), options);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().message.rfind("the chat template given cannot be used: ", 0), 0u)
        << refused.error().message;
    EXPECT_NE(refused.error().message.find("no_such_filter"), std::string::npos) << refused.error().message;
    // A model without a template takes one too.
    options.chat_template = "{{ messages[0].content }}";
    Result<Model> bare = Model::load(test::data_dir() / "arch" / "qwen2-f32.gguf", options);
    ASSERT_TRUE(bare) << bare.error().message;
    EXPECT_EQ(bare->summary().template_note, "using the chat template given (the model has none)");
}

TEST(Engine, StreamsTheSameAnswerAsADirectGeneration) {
    const std::vector<ChatMessage> conversation = {{"user", "What is the capital of France?"}};
    Engine engine;
    load(engine);
    const Answer a = generate(engine, ask(1, conversation, 6));
    ASSERT_FALSE(a.error) << a.error->error.message;
    ASSERT_TRUE(a.done);
    EXPECT_EQ(a.streamed, a.done->text);
    EXPECT_GT(a.token_events, 0u);
    EXPECT_FALSE(a.done->text.empty());
    EXPECT_EQ(a.done->stats.generated_tokens, a.done->generated_ids.size());
    EXPECT_EQ(a.done->stats.prompt_tokens, a.done->prompt_ids.size());
    EXPECT_EQ(a.done->stats.reused_tokens, 0u);
    EXPECT_GT(a.done->stats.time_to_first_token, 0.0);

    Result<Model> model = Model::load(test::test_model_path(), small_context());
    ASSERT_TRUE(model) << model.error().message;
    Result<std::vector<TokenId>> prompt = chat_prompt(*model, conversation);
    ASSERT_TRUE(prompt);
    EXPECT_EQ(*prompt, a.done->prompt_ids);
    GenerationSettings settings;
    settings.max_tokens = 6;
    settings.sampling.temperature = 0;
    Result<GenerationResult> direct = powerhouse::generate(*model, *prompt, settings);
    ASSERT_TRUE(direct) << direct.error().message;
    EXPECT_EQ(direct->ids, a.done->generated_ids);
    EXPECT_EQ(direct->text, a.done->text);
    EXPECT_EQ(a.done->stats.stop_reason, direct->stats.stop_reason);
}

// An answer forced by a grammar, so that the test model writes what a reasoning model would.
GenerateCommand forced(uint64_t id, const std::string& answer, bool read_answer) {
    GenerateCommand c = ask(id, {{"user", "What is the capital of France?"}}, 80);
    nlohmann::ordered_json literal = answer;
    Result<Grammar> grammar = Grammar::parse("root ::= " + literal.dump());
    EXPECT_TRUE(grammar) << grammar.error().message;
    if (grammar) c.settings.grammar = std::move(grammar).value();
    c.read_answer = read_answer;
    return c;
}

TEST(Engine, ReadingTheAnswerStreamsTheReasoningApartFromTheText) {
    const std::string answer = "<think>The user asks for a capital. France's is Paris.</think>\n\nParis.";
    Engine engine;
    load(engine);
    const Answer read = generate(engine, forced(1, answer, true));
    ASSERT_FALSE(read.error) << read.error->error.message;
    ASSERT_TRUE(read.done);
    EXPECT_EQ(read.done->text, "Paris.");
    EXPECT_EQ(read.done->reasoning, "The user asks for a capital. France's is Paris.");
    EXPECT_TRUE(read.done->tool_calls.empty());
    // The events add up to the whole, and the reasoning came as it was written, token by
    // token, not at the end.
    EXPECT_EQ(read.streamed, read.done->text);
    EXPECT_EQ(read.streamed_reasoning, read.done->reasoning);
    EXPECT_GT(read.reasoning_events_before_text, 5u);

    // Not asked: the text as the model wrote it.
    const Answer raw = generate(engine, forced(2, answer, false));
    ASSERT_TRUE(raw.done);
    EXPECT_EQ(raw.done->text, answer);
    EXPECT_EQ(raw.streamed, answer);
    EXPECT_TRUE(raw.done->reasoning.empty());
    EXPECT_EQ(raw.done->generated_ids, read.done->generated_ids);
}

TEST(Engine, ReadingTheAnswerTakesOutTheCallsOnlyWhenToolsWereOffered) {
    const std::string call =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function":
        {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
    Engine engine;
    load(engine);
    GenerateCommand with_tools = forced(1, call, true);
    with_tools.tools = tools;
    const Answer called = generate(engine, with_tools);
    ASSERT_TRUE(called.done);
    ASSERT_EQ(called.done->tool_calls.size(), 1u);
    EXPECT_EQ(called.done->tool_calls[0].name, "get_weather");
    EXPECT_EQ(called.done->tool_calls[0].arguments, R"({"city":"Paris"})");
    EXPECT_FALSE(called.done->tool_calls[0].id.empty());
    EXPECT_EQ(called.done->text, "");
    EXPECT_EQ(called.streamed, "");

    // No tools: the model's markup is its text.
    const Answer text = generate(engine, forced(2, call, true));
    ASSERT_TRUE(text.done);
    EXPECT_TRUE(text.done->tool_calls.empty());
    EXPECT_EQ(text.done->text, call);
    EXPECT_EQ(text.streamed, call);
}

TEST(Engine, TheNextTurnReusesThePromptCache) {
    std::vector<ChatMessage> conversation = {{"system", "You are a helpful assistant."},
                                             {"user", "Name a colour."}};
    Engine engine;
    load(engine);
    const Answer first = generate(engine, ask(1, conversation, 4));
    ASSERT_TRUE(first.done);
    conversation.push_back({"assistant", first.done->text});
    conversation.push_back({"user", "And another one?"});
    const Answer second = generate(engine, ask(2, conversation, 4));
    ASSERT_TRUE(second.done);
    // Everything up to the end of the first prompt is kept (the answer too, unless the
    // template renders it differently from how it was generated).
    EXPECT_GE(second.done->stats.reused_tokens, first.done->stats.prompt_tokens);
    EXPECT_LT(second.done->stats.reused_tokens, second.done->stats.prompt_tokens);

    // The same answer as without the cache.
    Engine fresh;
    load(fresh);
    const Answer uncached = generate(fresh, ask(2, conversation, 4));
    ASSERT_TRUE(uncached.done);
    EXPECT_EQ(uncached.done->stats.reused_tokens, 0u);
    EXPECT_EQ(uncached.done->generated_ids, second.done->generated_ids);
}

TEST(Engine, RawPromptAndIgnoreEos) {
    Engine engine;
    load(engine);
    GenerateCommand c = endless(5);
    c.settings.max_tokens = 6;
    c.settings.sampling.temperature = 0;
    const Answer a = generate(engine, c);
    ASSERT_TRUE(a.done);
    EXPECT_EQ(a.done->stats.stop_reason, StopReason::length);
    EXPECT_EQ(a.done->generated_ids.size(), 6u);
    EXPECT_EQ(a.done->prompt_ids.front(), a.done->prompt_ids.front());
}

TEST(Engine, CancelStopsARunningGenerationWithinAStep) {
    Engine engine;
    load(engine);
    engine.submit(endless(3));
    // Wait for the first token, then cancel.
    std::vector<EngineEvent> events;
    while (true) {
        std::optional<EngineEvent> e = engine.wait_event(100ms);
        if (!e) continue;
        const bool token = std::holds_alternative<TokenEvent>(*e);
        events.push_back(std::move(*e));
        if (token || is_final(events.back())) break;
    }
    engine.submit(CancelCommand{3});
    for (EngineEvent& e : until_final(engine)) events.push_back(std::move(e));
    const Answer a = answer_of(events, 3);
    ASSERT_TRUE(a.done);
    EXPECT_EQ(a.done->stats.stop_reason, StopReason::cancelled);
    EXPECT_EQ(a.streamed, a.done->text);
    // Hundreds of steps were left; a cancel that waited for the end would show 400.
    EXPECT_LT(a.done->stats.generated_tokens, 100u);

    // The engine goes on serving.
    const Answer next = generate(engine, ask(4, {{"user", "Hi"}}, 3));
    ASSERT_TRUE(next.done);
    EXPECT_NE(next.done->stats.stop_reason, StopReason::cancelled);
}

// The ids of the next n requests to end, in order, each of them cancelled early.
std::vector<uint64_t> cancelled_ids(Engine& engine, int n) {
    std::vector<uint64_t> ids;
    for (int i = 0; i < n; ++i) {
        const std::vector<EngineEvent> events = until_final(engine);
        const auto* done = std::get_if<DoneEvent>(&events.back());
        EXPECT_NE(done, nullptr);
        if (done == nullptr) break;
        EXPECT_EQ(done->stats.stop_reason, StopReason::cancelled);
        EXPECT_LT(done->stats.generated_tokens, 100u);
        ids.push_back(done->request_id);
    }
    return ids;
}

TEST(Engine, CancelAllEndsQueuedGenerationsInOrder) {
    Engine engine;
    load(engine);
    for (uint64_t id = 1; id <= 3; ++id) engine.submit(endless(id));
    engine.submit(CancelCommand{0});
    EXPECT_EQ(cancelled_ids(engine, 3), (std::vector<uint64_t>{1, 2, 3}));
}

// The same while the first is already generating: the later requests and the cancel reach
// the engine thread together while it is busy with the first, and the first still ends first.
TEST(Engine, CancelAllWhileOneGeneratesEndsThemInOrder) {
    Engine engine;
    load(engine);
    engine.submit(endless(1));
    while (true) {
        std::optional<EngineEvent> e = engine.wait_event(100ms);
        if (e && std::holds_alternative<TokenEvent>(*e)) break;
        ASSERT_FALSE(e && is_final(*e));
    }
    engine.submit(endless(2));
    engine.submit(endless(3));
    engine.submit(CancelCommand{0});
    EXPECT_EQ(cancelled_ids(engine, 3), (std::vector<uint64_t>{1, 2, 3}));
}

TEST(Engine, CancelOfAQueuedRequestSkipsIt) {
    Engine engine;
    load(engine);
    engine.submit(ask(1, {{"user", "Hi"}}, 2));
    engine.submit(endless(2));
    engine.submit(CancelCommand{2});
    // The two run together: their final events may come in either order.
    std::vector<EngineEvent> events = until_final(engine);
    std::vector<EngineEvent> more = until_final(engine);
    events.insert(events.end(), more.begin(), more.end());
    const Answer first = answer_of(events, 1);
    ASSERT_TRUE(first.done);
    EXPECT_NE(first.done->stats.stop_reason, StopReason::cancelled);
    const Answer second = answer_of(events, 2);
    ASSERT_TRUE(second.done);
    EXPECT_EQ(second.done->stats.stop_reason, StopReason::cancelled);
    EXPECT_LT(second.done->stats.generated_tokens, 100u);
}

// Two conversations at once: the second starts while the first generates, both stream,
// and each answer is the one it gives alone.
TEST(Engine, GenerationsRunTogetherAndEachGivesItsOwnAnswer) {
    Engine engine;
    load(engine);
    GenerateCommand a = ask(1, {{"user", "Name three rivers."}}, 24);
    GenerateCommand b = ask(2, {{"user", "What is the speed of light?"}}, 24);
    a.settings.ignore_eos = b.settings.ignore_eos = true;
    const std::string alone_a = answer_of(until_final((engine.submit(a), engine)), 1).streamed;
    const std::string alone_b = answer_of(until_final((engine.submit(b), engine)), 2).streamed;
    engine.submit(a);
    engine.submit(b);
    std::vector<EngineEvent> events = until_final(engine);
    std::vector<EngineEvent> more = until_final(engine);
    events.insert(events.end(), more.begin(), more.end());
    // Tokens of the two came in turns: some of b's before a's last one.
    size_t last_a = 0, first_b = events.size();
    uint32_t most_running = 0;
    for (size_t i = 0; i < events.size(); ++i) {
        if (const auto* t = std::get_if<TokenEvent>(&events[i])) {
            if (t->request_id == 1) last_a = i;
            if (t->request_id == 2) first_b = std::min(first_b, i);
        }
        if (const auto* s = std::get_if<SchedulerEvent>(&events[i])) most_running = std::max(most_running, s->stats.running);
    }
    EXPECT_LT(first_b, last_a) << "the second generation started before the first ended";
    EXPECT_EQ(most_running, 2u);
    const Answer ra = answer_of(events, 1), rb = answer_of(events, 2);
    ASSERT_TRUE(ra.done && rb.done);
    EXPECT_EQ(ra.streamed, alone_a);
    EXPECT_EQ(rb.streamed, alone_b);
    EXPECT_EQ(ra.done->text, alone_a);
    EXPECT_GT(ra.done->stats.reused_tokens, 0u) << "the same conversation again: its prompt was cached";
}

TEST(Engine, LoadingReplacesTheModelAndUnloadFreesIt) {
    Engine engine;
    load(engine);
    const int mapped = mappings_of_model();
    EXPECT_GT(mapped, 0);
    load(engine);
    EXPECT_EQ(mappings_of_model(), mapped);  // the first copy is gone
    engine.submit(UnloadCommand{});
    const std::vector<EngineEvent> events = until_final(engine);
    EXPECT_TRUE(std::holds_alternative<UnloadedEvent>(events.back()));
    EXPECT_EQ(mappings_of_model(), 0);

    const Answer a = generate(engine, ask(9, {{"user", "Hi"}}, 2));
    ASSERT_TRUE(a.error);
    EXPECT_EQ(a.error->request_id, 9u);
    EXPECT_NE(a.error->error.message.find("no model is loaded"), std::string::npos);
}

TEST(Engine, AFailedLoadSaysWhatAndWhere) {
    test::TempDir dir;
    test::write_file(dir / "broken.gguf", "GGUF but not really");
    Engine engine;
    for (const std::filesystem::path& path : {dir / "missing.gguf", dir / "broken.gguf"}) {
        engine.submit(LoadCommand{path, small_context()});
        const std::vector<EngineEvent> events = until_final(engine);
        const auto* error = std::get_if<ErrorEvent>(&events.back());
        ASSERT_NE(error, nullptr);
        EXPECT_EQ(error->request_id, 0u);
        EXPECT_NE(error->error.message.find(path.filename().string()), std::string::npos) << error->error.message;
    }
    const Answer a = generate(engine, ask(1, {{"user", "Hi"}}, 2));
    EXPECT_TRUE(a.error);
}

TEST(Engine, AConversationTooLongForTheContext) {
    Engine engine;
    load(engine, small_context(160));
    std::vector<ChatMessage> conversation;
    const std::string long_text = "Tell me about the history of the city of Paris and its river, the Seine.";
    for (int i = 0; i < 5; ++i) {
        conversation.push_back({"user", long_text});
        conversation.push_back({"assistant", "Paris grew on the banks of the Seine over two thousand years."});
    }
    conversation.push_back({"user", "Thanks. And Lyon?"});

    GenerateCommand refuse = ask(1, conversation, 16);
    const Answer refused = generate(engine, refuse);
    ASSERT_TRUE(refused.error);
    EXPECT_EQ(refused.error->error.code, ErrorCode::context_full);
    EXPECT_NE(refused.error->error.message.find("the context holds 160"), std::string::npos)
        << refused.error->error.message;
    // What the caller can change: not "allow dropping the oldest messages", which an API client
    // or `generate` has no way to ask for.
    EXPECT_NE(refused.error->error.message.find("send fewer or shorter messages, ask for a shorter answer"),
              std::string::npos)
        << refused.error->error.message;

    GenerateCommand drop = ask(2, conversation, 16);
    drop.overflow = ContextOverflow::drop_oldest;
    const Answer dropped = generate(engine, drop);
    ASSERT_TRUE(dropped.done) << (dropped.error ? dropped.error->error.message : "");
    EXPECT_GT(dropped.done->stats.dropped_messages, 0u);
    EXPECT_EQ(dropped.done->stats.dropped_messages % 2, 0u);  // whole exchanges
    EXPECT_LE(dropped.done->prompt_ids.size() + 16, 160u);

    std::string huge;
    for (int i = 0; i < 12; ++i) huge += long_text + " ";
    GenerateCommand alone = ask(3, {{"user", huge}}, 16);
    alone.overflow = ContextOverflow::drop_oldest;
    const Answer too_long = generate(engine, alone);
    ASSERT_TRUE(too_long.error);
    EXPECT_EQ(too_long.error->error.code, ErrorCode::context_full);
    EXPECT_NE(too_long.error->error.message.find("the last message alone"), std::string::npos);
    EXPECT_NE(too_long.error->error.message.find("trained for up to 8192"), std::string::npos);
}

TEST(Engine, BadRequestsAreErrorsNotCrashes) {
    Engine engine;
    load(engine);
    const Answer empty = generate(engine, ask(1, {}, 4));
    ASSERT_TRUE(empty.error);
    EXPECT_EQ(empty.error->error.code, ErrorCode::invalid_argument);
    GenerateCommand bad = ask(2, {{"user", "Hi"}}, 4);
    bad.settings.sampling.temperature = -1;
    bad.settings.sampling.top_p = 7;
    const Answer invalid = generate(engine, bad);
    ASSERT_TRUE(invalid.error);
    EXPECT_EQ(invalid.error->error.code, ErrorCode::invalid_argument);
}

TEST(Engine, DestroyingTheEngineStopsARunningGeneration) {
    auto engine = std::make_unique<Engine>();
    load(*engine);
    engine->submit(endless(1));
    while (true) {
        std::optional<EngineEvent> e = engine->wait_event(100ms);
        if (e && std::holds_alternative<TokenEvent>(*e)) break;
    }
    engine.reset();  // must return after at most one more step, not after 400 tokens
    SUCCEED();
}

// A draft model named in the LoadCommand (speculative decoding): loaded beside the model and
// reported; the answers are the model's alone, in fewer steps (the model's twin guesses every
// greedy token right). A draft whose vocabulary differs fails the load, naming a token.
TEST(Engine, ADraftModelGuessesAndTheAnswerIsTheModels) {
    Engine engine;
    load(engine);
    engine.submit(ask(1, {{"user", "Count from one to twenty."}}, 30));
    const std::vector<EngineEvent> alone = until_final(engine);
    const auto* plain = std::get_if<DoneEvent>(&alone.back());
    ASSERT_NE(plain, nullptr);
    EXPECT_EQ(plain->stats.drafted_tokens, 0u);

    LoadCommand with_draft{test::test_model_path(), small_context()};
    with_draft.draft_model = test::test_model_path();
    with_draft.draft_tokens = 4;
    // Always: a draft as slow as the model seldom pays, and by default is seldom asked.
    with_draft.guesses = GuessPolicy::always;
    engine.submit(with_draft);
    const std::vector<EngineEvent> loading = until_final(engine);
    const auto* loaded = std::get_if<LoadedEvent>(&loading.back());
    ASSERT_NE(loaded, nullptr);
    ASSERT_TRUE(loaded->draft.has_value());
    EXPECT_EQ(loaded->draft->name, loaded->model.name);
    engine.submit(ask(2, {{"user", "Count from one to twenty."}}, 30));
    const std::vector<EngineEvent> guessed = until_final(engine);
    const auto* done = std::get_if<DoneEvent>(&guessed.back());
    ASSERT_NE(done, nullptr);
    EXPECT_EQ(done->generated_ids, plain->generated_ids);
    EXPECT_EQ(done->text, plain->text);
    EXPECT_GT(done->stats.drafted_tokens, 10u);
    EXPECT_EQ(done->stats.accepted_tokens, done->stats.drafted_tokens);
    // A request may say no.
    GenerateCommand none = ask(3, {{"user", "Count from one to twenty."}}, 30);
    none.settings.draft_tokens = 0;
    engine.submit(none);
    const std::vector<EngineEvent> refused_guess = until_final(engine);
    ASSERT_TRUE(std::holds_alternative<DoneEvent>(refused_guess.back()));
    EXPECT_EQ(std::get<DoneEvent>(refused_guess.back()).stats.drafted_tokens, 0u);

    LoadCommand other{test::test_model_path(), small_context()};
    other.draft_model = test::data_dir() / "arch" / "qwen2-f32.gguf";
    engine.submit(other);
    const std::vector<EngineEvent> failed = until_final(engine);
    const auto* error = std::get_if<ErrorEvent>(&failed.back());
    ASSERT_NE(error, nullptr);
    EXPECT_NE(error->error.message.find("their vocabularies differ (token"), std::string::npos) << error->error.message;
    engine.submit(ask(4, {{"user", "hi"}}, 4));
    const std::vector<EngineEvent> after = until_final(engine);
    ASSERT_TRUE(std::holds_alternative<ErrorEvent>(after.back())) << "no model stays loaded half-way";
}

}  // namespace
}  // namespace powerhouse
