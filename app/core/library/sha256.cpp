#include "library/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace powerhouse::library {

struct Sha256::State {
    EVP_MD_CTX* context = nullptr;
    State() : context(EVP_MD_CTX_new()) {}
    ~State() { EVP_MD_CTX_free(context); }
    State(const State&) = delete;
    State& operator=(const State&) = delete;
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
    reset();
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::reset() {
    // EVP only fails on allocation failure or a missing algorithm, neither of which a
    // caller could handle: a null context makes update() and hex() no-ops that yield a
    // hash that matches nothing, which fails verification safely.
    if (state_->context != nullptr && EVP_DigestInit_ex(state_->context, EVP_sha256(), nullptr) != 1) {
        EVP_MD_CTX_free(state_->context);
        state_->context = nullptr;
    }
}

void Sha256::update(const void* data, size_t size) {
    if (state_->context != nullptr && size > 0) EVP_DigestUpdate(state_->context, data, size);
}

std::string Sha256::hex() const {
    if (state_->context == nullptr) return std::string(64, '?');
    // Finish a copy, so that the running digest can go on.
    State copy;
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (copy.context == nullptr || EVP_MD_CTX_copy_ex(copy.context, state_->context) != 1 ||
        EVP_DigestFinal_ex(copy.context, digest, &length) != 1) {
        return std::string(64, '?');
    }
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(length * 2);
    for (unsigned int i = 0; i < length; ++i) {
        out += kDigits[digest[i] >> 4];
        out += kDigits[digest[i] & 15];
    }
    return out;
}

std::string sha256_hex(std::string_view bytes) {
    Sha256 hash;
    hash.update(bytes);
    return hash.hex();
}

Result<std::string> sha256_file(const std::filesystem::path& path, std::optional<uint64_t> length,
                                const std::atomic<bool>* cancel) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return make_error(ErrorCode::io, fmt::format("cannot open {}: {}", path.string(), std::strerror(errno)));
    // Read sequentially in large blocks: the file is usually far larger than the page cache
    // would keep, so tell the kernel to read ahead.
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    Sha256 hash;
    std::vector<char> buffer(1 << 20);
    uint64_t done = 0;
    for (;;) {
        if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
            ::close(fd);
            return make_error(ErrorCode::cancelled, fmt::format("hashing {} was cancelled", path.string()));
        }
        size_t want = buffer.size();
        if (length) {
            if (done >= *length) break;
            want = static_cast<size_t>(std::min<uint64_t>(want, *length - done));
        }
        const ssize_t n = ::read(fd, buffer.data(), want);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int saved = errno;
            ::close(fd);
            return make_error(ErrorCode::io, fmt::format("cannot read {}: {}", path.string(), std::strerror(saved)));
        }
        if (n == 0) break;
        hash.update(buffer.data(), static_cast<size_t>(n));
        done += static_cast<uint64_t>(n);
    }
    ::close(fd);
    if (length && done < *length) {
        return make_error(ErrorCode::io,
                          fmt::format("{} has {} bytes, fewer than the {} to hash", path.string(), done, *length));
    }
    return hash.hex();
}

std::optional<std::string> normalize_sha256(std::string_view text) {
    if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
    if (text.substr(0, 7) == "sha256:" || text.substr(0, 7) == "SHA256:") text.remove_prefix(7);
    if (text.size() != 64) return std::nullopt;
    std::string out(text);
    for (char& c : out) {
        if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
    }
    return out;
}

}  // namespace powerhouse::library
