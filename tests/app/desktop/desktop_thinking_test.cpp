// A conversation's chat-template switches in the desktop app: "Think before answering" (off
// sends {"enable_thinking": false}) and the reasoning effort, stored with the conversation's
// other settings, offered only for a model whose template reads them, and sent to a remote
// server as chat_template_kwargs and reasoning_effort.
// The test model (SmolLM2) reads no switch; copies of it with another template stand in for
// models that do (tests/cli/model_copies.h): Qwen3.5's, whose prompt opens a think block unless
// enable_thinking is false, so that the answer lands in the message's thinking or in its text;
// and one that opens a think block only for a high reasoning effort.
// Also a chat template chosen for one model instead of its own (model_templates.h), used from
// its next load: the test model given Qwen3.5's template thinks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "chat_controller.h"
#include "cli/model_copies.h"
#include "desktop_test_support.h"
#include "engine_client.h"
#include "http_test_server.h"
#include "model_templates.h"
#include "remote_chat.h"
#include "remote_chat_fixture.h"
#include "store/store.h"
#include "support/test_support.h"

namespace {

using powerhouse::store::Message;
using powerhouse::store::MessageState;
using powerhouse::store::Store;
using powerhouse::test::open_store;
using powerhouse::test::RemoteChatTest;
using powerhouse::test::wait_for;

// ChatML that opens a think block for a high reasoning effort only (Qwen3.5's opens it for
// thinking): the effort shows as thinking or text, as enable_thinking does.
constexpr const char* kEffortTemplate =
    "{%- for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{%- if reasoning_effort is defined and reasoning_effort == 'high' %}{{ '<think>\\n' }}{%- endif %}{%- endif %}";

class ChatThinkingTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        if (!std::filesystem::exists(powerhouse::test::test_model_path())) return;
        dir_ = new powerhouse::test::TempDir;
        switch_ = powerhouse::test::test_model_with_template(
            *dir_, powerhouse::test::read_file(powerhouse::test::data_dir() / "templates" / "Qwen3.5-4B.jinja"),
            "switch.gguf");
        effort_ = powerhouse::test::test_model_with_template(*dir_, kEffortTemplate, "effort.gguf");
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }

    void SetUp() override {
        if (!std::filesystem::exists(powerhouse::test::test_model_path()))
            GTEST_SKIP() << "no test model (scripts/fetch-test-model)";
        ASSERT_FALSE(switch_.empty());
        ASSERT_FALSE(effort_.empty());
        store_ = std::make_unique<Store>(open_store(home_));
        engine_ = std::make_unique<EngineClient>();
        controller_ = std::make_unique<ChatController>(*store_, *engine_);
        powerhouse::GenerationSettings settings;
        settings.max_tokens = 8;  // a few tokens show where the answer goes
        settings.sampling.temperature = 0;
        controller_->setGenerationSettings(settings);
    }

    static powerhouse::ModelOptions small() {
        powerhouse::ModelOptions options;
        options.n_ctx = 512;
        options.n_threads = 2;
        return options;
    }

    void load(const std::filesystem::path& model) {
        controller_->loadModel(QString::fromStdString(model.string()), small());
        ASSERT_TRUE(wait_for([&] { return controller_->modelState() != ChatController::ModelState::Loading; }));
        ASSERT_EQ(controller_->modelState(), ChatController::ModelState::Ready)
            << controller_->errorText().toStdString();
    }

    // Asks in a new conversation; the answer as stored.
    Message ask(const QString& text) {
        controller_->flushWrites();
        EXPECT_TRUE(controller_->send(text));
        EXPECT_TRUE(wait_for([&] { return !controller_->generatingAny(); }));
        controller_->flushWrites();
        auto m = store_->messages(controller_->currentConversationId());
        EXPECT_TRUE(m && m->size() == 2u);
        return m && m->size() == 2u ? (*m)[1] : Message{};
    }

    static powerhouse::test::TempDir* dir_;
    static std::filesystem::path switch_;  // Qwen3.5's template: thinks unless enable_thinking is false
    static std::filesystem::path effort_;  // thinks for a high reasoning effort only
    powerhouse::test::TempDir home_;
    std::unique_ptr<Store> store_;
    std::unique_ptr<EngineClient> engine_;
    std::unique_ptr<ChatController> controller_;
};

powerhouse::test::TempDir* ChatThinkingTest::dir_ = nullptr;
std::filesystem::path ChatThinkingTest::switch_;
std::filesystem::path ChatThinkingTest::effort_;

// The switch off reaches the template: the prompt closes the think block, and the answer is
// text instead of thinking. The choice is stored with the conversation and read back by
// another controller on the same store.
TEST_F(ChatThinkingTest, ThinkingOffReachesTheTemplateAndIsKeptWithTheConversation) {
    load(switch_);
    EXPECT_TRUE(controller_->thinkingSwitch());
    EXPECT_FALSE(controller_->reasoningEffortChoice());
    EXPECT_TRUE(controller_->templateSwitchesNote().isEmpty());
    EXPECT_TRUE(controller_->sampling().value("thinking").toBool());  // the model's own default

    const Message thought = ask("What is 2+2?");
    EXPECT_EQ(thought.state, MessageState::complete) << thought.error;
    EXPECT_FALSE(thought.reasoning.empty());
    EXPECT_TRUE(thought.content.empty()) << thought.content;

    controller_->newConversation();
    ASSERT_TRUE(controller_->setConversationSettings({}, {{"thinking", false}}));
    EXPECT_FALSE(controller_->sampling().value("thinking").toBool());
    const Message answered = ask("What is 2+2?");
    EXPECT_EQ(answered.state, MessageState::complete) << answered.error;
    EXPECT_TRUE(answered.reasoning.empty()) << answered.reasoning;
    EXPECT_FALSE(answered.content.empty());
    const qint64 conversation = controller_->currentConversationId();

    auto kept = store_->conversation(conversation);
    ASSERT_TRUE(kept);
    EXPECT_NE(kept->settings_json.find("\"enable_thinking\":false"), std::string::npos) << kept->settings_json;
    controller_.reset();
    ChatController again(*store_, *engine_);
    again.selectConversation(conversation);
    EXPECT_FALSE(again.sampling().value("thinking").toBool());
    again.newConversation();
    EXPECT_TRUE(again.sampling().value("thinking").toBool());  // another conversation: the default
}

// Only a model whose template reads a switch is offered it; the others say why nothing is.
TEST_F(ChatThinkingTest, TheSwitchesAreOfferedForModelsWhoseTemplateReadsThem) {
    load(powerhouse::test::test_model_path());
    EXPECT_FALSE(controller_->thinkingSwitch());
    EXPECT_FALSE(controller_->reasoningEffortChoice());
    EXPECT_EQ(controller_->templateSwitchesNote().toStdString(),
              "This model's chat template has no switch for thinking or reasoning effort.");

    load(effort_);
    EXPECT_FALSE(controller_->thinkingSwitch());
    EXPECT_TRUE(controller_->reasoningEffortChoice());
    EXPECT_TRUE(controller_->templateSwitchesNote().isEmpty());

    load(switch_);
    EXPECT_TRUE(controller_->thinkingSwitch());
    EXPECT_FALSE(controller_->reasoningEffortChoice());
}

// The effort reaches the template as it is chosen; Default sends none; anything but low,
// medium and high is refused.
TEST_F(ChatThinkingTest, TheReasoningEffortReachesTheTemplate) {
    load(effort_);
    const Message plain = ask("What is 2+2?");
    EXPECT_TRUE(plain.reasoning.empty()) << plain.reasoning;
    EXPECT_FALSE(plain.content.empty());

    controller_->newConversation();
    EXPECT_FALSE(controller_->setConversationSettings({}, {{"reasoningEffort", "extreme"}}));
    ASSERT_TRUE(controller_->setConversationSettings({}, {{"reasoningEffort", "high"}}));
    EXPECT_EQ(controller_->sampling().value("reasoningEffort").toString().toStdString(), "high");
    const Message high = ask("What is 2+2?");
    EXPECT_FALSE(high.reasoning.empty());
    EXPECT_TRUE(high.content.empty()) << high.content;
    auto kept = store_->conversation(controller_->currentConversationId());
    ASSERT_TRUE(kept);
    EXPECT_NE(kept->settings_json.find("\"reasoning_effort\":\"high\""), std::string::npos) << kept->settings_json;
}

// A template chosen for a model (Models page: from a file) is used when it loads: the test
// model given Qwen3.5's thinks, offers the switch, and the bar's note says whose template it
// is; back to its own, none of that. A broken one fails the load with the engine's word,
// where load errors show; a file that cannot be a template is refused before it is kept.
TEST_F(ChatThinkingTest, AChatTemplateChosenForAModelIsUsedWhenItLoads) {
    const QString model = QString::fromStdString(powerhouse::test::test_model_path().string());
    const QString qwen =
        QString::fromStdString((powerhouse::test::data_dir() / "templates" / "Qwen3.5-4B.jinja").string());
    ASSERT_TRUE(set_model_chat_template(*store_, model, qwen));
    auto chosen = model_chat_template(*store_, model);
    ASSERT_TRUE(chosen && *chosen);
    EXPECT_EQ((*chosen)->file, qwen);
    load(powerhouse::test::test_model_path());
    EXPECT_EQ(controller_->templateNote().toStdString(), "using the chat template given instead of the model's own");
    EXPECT_TRUE(controller_->thinkingSwitch());
    const Message thought = ask("What is 2+2?");
    EXPECT_FALSE(thought.reasoning.empty());
    EXPECT_TRUE(thought.content.empty()) << thought.content;

    ASSERT_TRUE(clear_model_chat_template(*store_, model));
    load(powerhouse::test::test_model_path());
    EXPECT_TRUE(controller_->templateNote().isEmpty()) << controller_->templateNote().toStdString();
    EXPECT_FALSE(controller_->thinkingSwitch());
    controller_->newConversation();
    const Message plain = ask("What is 2+2?");
    EXPECT_TRUE(plain.reasoning.empty()) << plain.reasoning;
    EXPECT_FALSE(plain.content.empty());

    const std::filesystem::path broken = home_ / "broken.jinja", empty = home_ / "empty.jinja";
    std::ofstream(broken) << "{% if messages %}no end";
    std::ofstream(empty) << "  \n";
    ASSERT_TRUE(set_model_chat_template(*store_, model, QString::fromStdString(broken.string())));
    controller_->loadModel(model, small());
    ASSERT_TRUE(wait_for([&] { return controller_->modelState() != ChatController::ModelState::Loading; }));
    EXPECT_EQ(controller_->modelState(), ChatController::ModelState::Failed);
    EXPECT_NE(controller_->errorText().toStdString().find(
                  "The model could not be loaded: the chat template given cannot be used: "),
              std::string::npos)
        << controller_->errorText().toStdString();

    const auto refused = set_model_chat_template(*store_, model, QString::fromStdString(empty.string()));
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("is empty"), std::string::npos) << refused.error().message;
    const auto missing =
        set_model_chat_template(*store_, model, QString::fromStdString((home_ / "missing.jinja").string()));
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("cannot open"), std::string::npos) << missing.error().message;
    chosen = model_chat_template(*store_, model);
    ASSERT_TRUE(chosen && *chosen);
    EXPECT_EQ((*chosen)->file.toStdString(), broken.string());  // a refused file changes nothing
}

// A remote conversation: both switches are offered (what the server's template reads is
// unknown), and go as the servers read them: enable_thinking in chat_template_kwargs, the
// effort as reasoning_effort; neither when left at the model's default.
TEST_F(RemoteChatTest, TheSwitchesGoToARemoteServer) {
    auto faults = powerhouse::test::fault_server();
    ASSERT_TRUE(faults->running());
    const std::string scenario = "think-reasoning_content";
    controller_->useRemote(
        RemoteTarget{"faults", QString::fromStdString(faults->url("/" + scenario + "/v1")), {}, {}, "test-model"});
    EXPECT_TRUE(controller_->thinkingSwitch());
    EXPECT_TRUE(controller_->reasoningEffortChoice());
    EXPECT_FALSE(controller_->templateSwitchesNote().isEmpty());

    ASSERT_TRUE(controller_->send("Hello?"));
    ASSERT_TRUE(wait_idle());
    nlohmann::json body = faults->get_json("/" + scenario + "/last")["body"];
    EXPECT_FALSE(body.contains("chat_template_kwargs")) << body.dump();
    EXPECT_FALSE(body.contains("reasoning_effort")) << body.dump();

    ASSERT_TRUE(controller_->setConversationSettings({}, {{"thinking", false}, {"reasoningEffort", "low"}}));
    ASSERT_TRUE(controller_->send("And now?"));
    ASSERT_TRUE(wait_idle());
    body = faults->get_json("/" + scenario + "/last")["body"];
    EXPECT_EQ(body["chat_template_kwargs"], (nlohmann::json{{"enable_thinking", false}})) << body.dump();
    EXPECT_EQ(body["reasoning_effort"], "low") << body.dump();
}

}  // namespace
