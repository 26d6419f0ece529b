// SHA-256 of model files: the check that a download (or an imported file) holds exactly
// the bytes its publisher hashed. The digest itself is OpenSSL's (libcrypto's EVP
// interface, which uses the CPU's SHA extensions when there are some).
//
// Thread-safety: a Sha256 object is used by one thread at a time; the free functions are
// reentrant.
#pragma once

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "powerhouse/result.h"

namespace powerhouse::library {

// An incremental SHA-256: update() with the bytes in order, then hex().
class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(Sha256&&) noexcept;
    Sha256& operator=(Sha256&&) noexcept;
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;

    void update(const void* data, size_t size);
    void update(std::string_view bytes) { update(bytes.data(), bytes.size()); }
    // The digest of everything so far, as 64 lowercase hex digits. Does not end the
    // computation: update() may continue after it.
    std::string hex() const;
    // Starts over, as if newly constructed.
    void reset();

private:
    struct State;
    std::unique_ptr<State> state_;
};

// The SHA-256 of some bytes, as 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);

// The SHA-256 of a file's first `length` bytes (all of it without a length). Checks
// `cancel` between blocks: a set flag ends it with ErrorCode::cancelled.
Result<std::string> sha256_file(const std::filesystem::path& path, std::optional<uint64_t> length = std::nullopt,
                                const std::atomic<bool>* cancel = nullptr);

// A SHA-256 as servers and users write it, made canonical (64 lowercase hex digits):
// accepts surrounding double quotes (an HTTP entity tag, "W/" excluded: a weak tag names
// no exact bytes), a "sha256:" prefix and upper case. Anything else: nullopt.
std::optional<std::string> normalize_sha256(std::string_view text);

}  // namespace powerhouse::library
