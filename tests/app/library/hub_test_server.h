// The loopback Hugging Face Hub (hub_test_server.py: recorded answers from tests/data/hub,
// and the real test model's bytes) as a C++ object, for the library, CLI and desktop tests.
// See the script for its routes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "http_test_server.h"
#include "support/test_support.h"

namespace powerhouse::test {

// The recorded repository whose Q4_1 file the hub serves from the test model.
inline constexpr const char* kHubSmolRepo = "smol-org/SmolLM2-135M-Instruct-GGUF";
inline constexpr const char* kHubSmolFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

class HubTestServer : public HttpTestServer {
public:
    // With `serve_test_model`, the test model (test_model_path()) is kHubSmolFile of
    // kHubSmolRepo, when it is there; `more` are further arguments of the script
    // ("--serve", "OWNER/NAME/PATH=FILE", "--delay-search", "QUERY=SECONDS", ...).
    explicit HubTestServer(bool serve_test_model = true, const std::vector<std::string>& more = {})
        : HttpTestServer(POWERHOUSE_HUB_TEST_SERVER, args(serve_test_model, more)) {}

    // "http://127.0.0.1:<port>": the endpoint to use in place of https://huggingface.co.
    std::string endpoint() const { return url(""); }
    // Every request so far, "GET /api/models?...", in order; with `clear`, forgotten after.
    std::vector<std::string> requests(bool clear = false) const {
        const nlohmann::json seen = get_json(clear ? "/_requests?clear=1" : "/_requests");
        std::vector<std::string> out;
        if (seen.is_array()) {
            for (const auto& r : seen) out.push_back(r.get<std::string>());
        }
        return out;
    }

private:
    static std::vector<std::string> args(bool serve_test_model, const std::vector<std::string>& more) {
        std::vector<std::string> out;
        const std::filesystem::path model = test_model_path();
        if (serve_test_model && std::filesystem::exists(model)) {
            out.push_back("--serve");
            out.push_back(std::string(kHubSmolRepo) + "/" + kHubSmolFile + "=" + model.string());
        }
        out.insert(out.end(), more.begin(), more.end());
        return out;
    }
};

}  // namespace powerhouse::test
