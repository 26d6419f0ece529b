// What the remote engine tests of the desktop app share (desktop_remote_test.cpp,
// desktop_engines_test.cpp): the fault-injecting OpenAI server of remote_tests
// (tests/app/remote/openai_fault_server.py) and a chat controller on a store of its own,
// with short greedy answers.
#pragma once

#include <gtest/gtest.h>

#include <QTest>

#include <memory>
#include <string>
#include <vector>

#include "chat_controller.h"
#include "desktop_test_support.h"
#include "engine_client.h"
#include "http_test_server.h"
#include "store/store.h"
#include "support/test_support.h"

namespace powerhouse::test {

// The fault server on 127.0.0.1, serving the recorded fixtures of tests/data/remote; with
// `tls_dir`, https with a self-signed certificate made there (cert.pem).
inline std::unique_ptr<HttpTestServer> fault_server(const std::string& tls_dir = {}) {
    std::vector<std::string> args{"--fixtures", (data_dir() / "remote").string()};
    if (!tls_dir.empty()) {
        args.push_back("--tls");
        args.push_back(tls_dir);
    }
    return std::make_unique<HttpTestServer>(POWERHOUSE_REMOTE_TEST_DIR "/openai_fault_server.py", std::move(args));
}

class RemoteChatTest : public ::testing::Test {
protected:
    void SetUp() override {
        store_ = std::make_unique<store::Store>(open_store(dir_));
        engine_ = std::make_unique<EngineClient>();
        controller_ = std::make_unique<ChatController>(*store_, *engine_);
        powerhouse::GenerationSettings settings;
        settings.max_tokens = 32;
        settings.sampling.temperature = 0;
        controller_->setGenerationSettings(settings);
    }

    std::vector<store::Message> stored() {
        controller_->flushWrites();  // the controller's writes run on its writer thread
        auto m = store_->messages(controller_->currentConversationId());
        EXPECT_TRUE(m);
        return m ? *m : std::vector<store::Message>{};
    }
    bool wait_idle() {
        return wait_for([&] { return !controller_->generatingAny(); });
    }

    TempDir dir_;
    std::unique_ptr<store::Store> store_;
    std::unique_ptr<EngineClient> engine_;
    std::unique_ptr<ChatController> controller_;
};

}  // namespace powerhouse::test
