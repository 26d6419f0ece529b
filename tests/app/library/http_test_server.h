// The download tests' HTTP server (http_test_server.py) as a C++ object: started with
// python3 on a free port of 127.0.0.1, killed when the object dies. See the script for the
// routes and their misbehaviour. Also the payload it serves, computed the same way here,
// so that tests compare downloaded bytes with bytes they did not download.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace powerhouse::test {

// The size the tests' server serves: a few MB, not a multiple of any buffer size.
inline constexpr size_t kPayloadSize = 4 * 1024 * 1024 + 12345;

// Version `version` of the server's payload: sha256("powerhouse-test-payload-<v>-<i>")
// digests for i = 0, 1, ..., cut to `size` bytes.
std::string test_payload(int version = 1, size_t size = kPayloadSize);
// The same payload as /corrupt serves it: some bytes flipped.
std::string corrupted_payload(size_t size = kPayloadSize);

class HttpTestServer {
public:
    explicit HttpTestServer(size_t payload_size = kPayloadSize);
    // Another test server script that, like http_test_server.py, prints its port on its first
    // line of stdout (tests/app/remote/openai_fault_server.py), started as `python3 script args...`.
    HttpTestServer(const std::string& script, const std::vector<std::string>& args);
    ~HttpTestServer();
    HttpTestServer(const HttpTestServer&) = delete;
    HttpTestServer& operator=(const HttpTestServer&) = delete;

    bool running() const { return port_ > 0; }
    int port() const { return port_; }
    // "http://127.0.0.1:<port>" + path_and_query
    std::string url(const std::string& path_and_query) const;
    // The counters of one id (GET /stats?id=...), read with a plain socket, not the code
    // under test.
    nlohmann::json stats(const std::string& id) const;
    // GET path_and_query, read likewise, as JSON (null when no answer came, discarded when
    // its body is no JSON).
    nlohmann::json get_json(const std::string& path_and_query) const;

private:
    pid_t pid_ = -1;
    int port_ = 0;
};

}  // namespace powerhouse::test
