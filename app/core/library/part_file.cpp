#include "library/part_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "library/sha256.h"

namespace powerhouse::library::detail {

namespace fs = std::filesystem;

std::optional<PartInfo> read_part_info(const fs::path& path) {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("url") || !j["url"].is_string()) return std::nullopt;
    PartInfo info;
    info.url = j["url"].get<std::string>();
    if (j.contains("validator") && j["validator"].is_string()) info.validator = j["validator"].get<std::string>();
    if (j.contains("size") && j["size"].is_number_unsigned()) info.size = j["size"].get<uint64_t>();
    if (j.contains("sha256") && j["sha256"].is_string()) {
        if (auto hash = normalize_sha256(j["sha256"].get<std::string>())) info.sha256 = *hash;
    }
    if (!info.sha256.empty() && j.contains("hash_source") && j["hash_source"].is_string()) {
        const std::string source = j["hash_source"].get<std::string>();
        info.hash_source = source == hash_source_name(HashSource::server_etag) ? HashSource::server_etag
                                                                               : HashSource::server_linked_etag;
    }
    return info;
}

void write_part_info(const fs::path& path, const PartInfo& info) {
    nlohmann::json j = {{"url", info.url}, {"validator", info.validator}};
    j["size"] = info.size ? nlohmann::json(*info.size) : nlohmann::json(nullptr);
    j["sha256"] = info.sha256.empty() ? nlohmann::json(nullptr) : nlohmann::json(info.sha256);
    j["hash_source"] = hash_source_name(info.hash_source);
    // Written beside and renamed: a reader never sees half a record.
    const fs::path temporary = fs::path(path.string() + ".tmp");
    {
        std::ofstream out(temporary, std::ios::trunc);
        // A validator or URL that is not UTF-8 is kept with U+FFFD in its place: the If-Range
        // of a later resume then does not match, and the download starts over, safely.
        out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
        if (!out) return;
    }
    std::error_code ignored;
    fs::rename(temporary, path, ignored);
}

void remove_quietly(const fs::path& path) {
    std::error_code ignored;
    fs::remove(path, ignored);
}

std::string errno_text(int error) {
    return std::strerror(error);
}

Result<PartFile> PartFile::open_locked(const fs::path& path, const fs::path& target) {
    // The lock belongs to an inode: when another download renamed or deleted the .part
    // between our open and our lock, the lock is on a file no longer at that name, so look
    // again (a few times: each round means another download just finished).
    for (int round = 0; round < 5; ++round) {
        const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            return make_error(ErrorCode::io, fmt::format("cannot open {}: {}", path.string(), errno_text(errno)));
        }
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int error = errno;
            ::close(fd);
            if (error == EWOULDBLOCK) {
                return make_error(ErrorCode::io, fmt::format("{} is already being downloaded (by this or another "
                                                             "program): {} is locked",
                                                             target.string(), path.string()));
            }
            return make_error(ErrorCode::io, fmt::format("cannot lock {}: {}", path.string(), errno_text(error)));
        }
        struct stat opened {};
        struct stat named {};
        if (::fstat(fd, &opened) == 0 && ::stat(path.c_str(), &named) == 0 && opened.st_dev == named.st_dev &&
            opened.st_ino == named.st_ino) {
            return PartFile(fd);
        }
        ::close(fd);
    }
    return make_error(ErrorCode::io, fmt::format("{} keeps changing under another download", path.string()));
}

PartFile::PartFile(PartFile&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

PartFile::~PartFile() {
    if (fd_ >= 0) ::close(fd_);
}

Result<void> fsync_folder(const fs::path& folder) {
    const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return make_error(ErrorCode::io, fmt::format("cannot open {}: {}", folder.string(), errno_text(errno)));
    const int rc = ::fsync(fd);
    const int error = errno;
    ::close(fd);
    if (rc != 0)
        return make_error(ErrorCode::io, fmt::format("cannot sync {}: {}", folder.string(), errno_text(error)));
    return {};
}

}  // namespace powerhouse::library::detail
