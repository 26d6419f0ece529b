#include "client_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace powerhouse::server {

namespace {

// The peer of socket `fd` as "address" and port, when it is an IPv4 or IPv6 socket.
bool peer_of(int fd, std::string& addr, int& port) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
    char text[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
        inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
        port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
        inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
        port = ntohs(a->sin6_port);
    } else {
        return false;
    }
    addr = text;
    return true;
}

}  // namespace

ClientWatch::ClientWatch(const std::string& remote_addr, int remote_port) {
    DIR* dir = opendir("/proc/self/fd");
    if (dir == nullptr) return;
    while (const dirent* entry = readdir(dir)) {
        char* end = nullptr;
        const long fd = std::strtol(entry->d_name, &end, 10);
        if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
        struct stat st {};
        if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        std::string addr;
        int port = 0;
        if (peer_of(static_cast<int>(fd), addr, port) && port == remote_port && addr == remote_addr) {
            fd_ = static_cast<int>(fd);
            break;
        }
    }
    closedir(dir);
}

bool ClientWatch::gone() const {
    if (fd_ < 0) return false;
    char byte = 0;
    const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;  // the client closed its side: it reads no answer
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    return false;  // bytes waiting (a pipelined request): still there
}

void ClientWatch::end_response() const {
    if (fd_ >= 0) shutdown(fd_, SHUT_WR);
}

}  // namespace powerhouse::server
