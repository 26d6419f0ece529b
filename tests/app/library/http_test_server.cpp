#include "http_test_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace powerhouse::test {
std::string test_payload(int version, size_t size) {
    // OpenSSL's one-shot digest, not the library's Sha256: the payload must not depend on the
    // code under test.
    std::string out(size + 32, '\0');
    const std::string prefix = "powerhouse-test-payload-" + std::to_string(version) + "-";
    for (size_t i = 0; i * 32 < size; ++i) {
        const std::string block = prefix + std::to_string(i);
        EVP_Digest(block.data(), block.size(), reinterpret_cast<unsigned char*>(&out[i * 32]), nullptr, EVP_sha256(),
                   nullptr);
    }
    out.resize(size);
    return out;
}

std::string corrupted_payload(size_t size) {
    std::string out = test_payload(1, size);
    for (size_t offset = 1000; offset < out.size(); offset += out.size() / 7) out[offset] ^= 0x5A;
    return out;
}

HttpTestServer::HttpTestServer(size_t payload_size)
    : HttpTestServer(POWERHOUSE_HTTP_TEST_SERVER, {"--size", std::to_string(payload_size)}) {}

HttpTestServer::HttpTestServer(const std::string& script, const std::vector<std::string>& args) {
    std::vector<std::string> words = {"python3", script};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
        ::dup2(fds[1], STDOUT_FILENO);
        ::close(fds[0]);
        ::close(fds[1]);
        ::execvp("python3", argv.data());
        ::_exit(127);
    }
    ::close(fds[1]);
    if (pid_ < 0) {
        ::close(fds[0]);
        return;
    }
    // The first line is the port (Python and the payload take a fraction of a second; a
    // certificate to make first may take a second).
    std::string line;
    pollfd p{fds[0], POLLIN, 0};
    while (line.find('\n') == std::string::npos && ::poll(&p, 1, 30000) > 0) {
        char buffer[64];
        const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
        if (n <= 0) break;
        line.append(buffer, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    if (line.find('\n') != std::string::npos) port_ = std::stoi(line);
}

HttpTestServer::~HttpTestServer() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
    }
}

std::string HttpTestServer::url(const std::string& path_and_query) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path_and_query;
}

nlohmann::json HttpTestServer::stats(const std::string& id) const {
    return get_json("/stats?id=" + id);
}

nlohmann::json HttpTestServer::get_json(const std::string& path_and_query) const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return nullptr;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port_));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string response;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
        const std::string request = "GET " + path_and_query + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        if (::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
            char buffer[4096];
            ssize_t n;
            while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0) response.append(buffer, static_cast<size_t>(n));
        }
    }
    ::close(fd);
    const size_t body = response.find("\r\n\r\n");
    if (body == std::string::npos) return nullptr;
    return nlohmann::json::parse(response.substr(body + 4), nullptr, false);
}

}  // namespace powerhouse::test
