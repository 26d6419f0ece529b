// The files beside a download's target, for the library's own use (download.cpp):
// "<target>.part", held open under an exclusive flock while a download writes it, and
// "<target>.part.json", the record of where its bytes came from, which decides whether a
// later call may continue them.
//
// Thread-safety: a PartFile belongs to one download; the lock keeps other downloads (threads
// or processes) of the same target out.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "library/download.h"
#include "powerhouse/result.h"

namespace powerhouse::library::detail {

// What "<target>.part.json" records about the bytes in the .part.
struct PartInfo {
    std::string url;
    std::string validator;  // the strong ETag or Last-Modified of the answer they came from
    std::optional<uint64_t> size;
    std::string sha256;  // the server's; "" when it sent none
    HashSource hash_source = HashSource::none;
};

// nullopt when missing or unreadable (then the .part is not continued).
std::optional<PartInfo> read_part_info(const std::filesystem::path& path);
// Best effort: a lost record costs a restart from byte 0, never a wrong file (the record
// only ever permits a resume that If-Range or the sha256 still guards).
void write_part_info(const std::filesystem::path& path, const PartInfo& info);

// The .part, open read-write and exclusively locked for as long as the object lives.
class PartFile {
public:
    // Creates the file when missing. Fails at once, without waiting, when another download
    // holds it: "<target> is already being downloaded".
    static Result<PartFile> open_locked(const std::filesystem::path& path, const std::filesystem::path& target);

    PartFile(PartFile&& other) noexcept;
    PartFile& operator=(PartFile&&) = delete;
    PartFile(const PartFile&) = delete;
    PartFile& operator=(const PartFile&) = delete;
    ~PartFile();  // closes, which releases the lock
    int fd() const { return fd_; }

private:
    explicit PartFile(int fd) : fd_(fd) {}
    int fd_ = -1;
};

// fsync of a folder, so that a rename in it survives a power cut.
Result<void> fsync_folder(const std::filesystem::path& folder);

void remove_quietly(const std::filesystem::path& path);
std::string errno_text(int error);

}  // namespace powerhouse::library::detail
