#include "library/download.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <deque>
#include <vector>

#include <fmt/format.h>

#include "library/http_transfer.h"
#include "library/part_file.h"
#include "library/sha256.h"

namespace powerhouse::library {

using detail::classify;
using detail::describe_failure;
using detail::errno_text;
using detail::format_size;
using detail::fsync_folder;
using detail::is_http_url;
using detail::PartFile;
using detail::PartInfo;
using detail::read_part_info;
using detail::remove_quietly;
using detail::ResponseHead;
using detail::server_hash;
using detail::sleep_unless_cancelled;
using detail::TransferOutcome;
using detail::TransferRequest;
using detail::TransferSink;
using detail::Verdict;
using detail::write_part_info;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const char* hash_source_name(HashSource source) {
    switch (source) {
        case HashSource::none:
            return "none";
        case HashSource::caller:
            return "given";
        case HashSource::server_linked_etag:
            return "X-Linked-Etag";
        case HashSource::server_etag:
            return "ETag";
    }
    return "none";
}

fs::path part_path(const fs::path& target) {
    return fs::path(target.string() + ".part");
}

fs::path part_info_path(const fs::path& target) {
    return fs::path(target.string() + ".part.json");
}

Result<bool> target_file_exists(const fs::path& target) {
    std::error_code error;
    const fs::file_status status = fs::status(target, error);
    if (status.type() == fs::file_type::not_found) return false;
    if (error) return make_error(ErrorCode::io, fmt::format("cannot look at {}: {}", target.string(), error.message()));
    if (status.type() == fs::file_type::regular) return true;
    return make_error(
        ErrorCode::invalid_argument,
        fmt::format("{} already exists and is {}, not a model file: move it away or download into "
                    "another folder",
                    target.string(), status.type() == fs::file_type::directory ? "a folder" : "not a regular file"));
}

namespace {

// Whether the bytes at the start of `fd` open an HTML document (after a byte order mark
// and white space): a code host's page about the file or a login page, not the file.
bool opens_a_web_page(int fd) {
    char head[256];
    const ssize_t n = ::pread(fd, head, sizeof(head), 0);
    if (n <= 0) return false;
    std::string text(head, static_cast<size_t>(n));
    if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
    text.erase(0, std::min(text.find_first_not_of(" \t\r\n"), text.size()));
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    return text.rfind("<!doctype html", 0) == 0 || text.rfind("<html", 0) == 0;
}

// If-Range needs a strong validator: a strong ETag, else Last-Modified.
std::string validator_of(const ResponseHead& head) {
    if (!head.etag.empty() && head.etag.substr(0, 2) != "W/") return head.etag;
    return head.last_modified;
}

// Why this side stopped a transfer.
enum class Abort {
    none,
    cancelled,
    write_failed,  // the disk refused (ENOSPC, EDQUOT, EFBIG, EIO)
    no_space,      // not enough free space for what is still to come
    restart,       // the answer does not continue our bytes: start over from 0
    stalled,       // no byte for stall_seconds
    unexpected,    // a success status other than 200 and 206: not a file we understand
};

// One call of download_file().
class Download {
public:
    Download(std::string url, fs::path target, const DownloadOptions& options, std::string caller_sha256, PartFile part)
        : url_(std::move(url)),
          target_(std::move(target)),
          part_path_(part_path(target_)),
          info_path_(part_info_path(target_)),
          folder_(target_.parent_path().empty() ? fs::path(".") : target_.parent_path()),
          options_(options),
          caller_sha256_(std::move(caller_sha256)),
          part_(std::move(part)) {}

    Result<DownloadResult> run();
    // After a failure: an empty .part holds nothing to resume, so it and its record go.
    void discard_if_empty();

private:
    Result<void> start_from_existing_part();
    Result<void> truncate();
    bool on_head(const ResponseHead& head);
    bool on_body(const char* data, size_t size);
    bool keep_going();
    void report_progress(bool force);
    bool cancel_requested() const {
        return cancelled_ || (options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed));
    }
    Error cancelled_error();
    // The .part is complete: check it, and put it in place. nullopt: start over (once,
    // after a mismatch).
    std::optional<Result<DownloadResult>> finish();

    const std::string url_;
    const fs::path target_;
    const fs::path part_path_;
    const fs::path info_path_;
    const fs::path folder_;
    const DownloadOptions& options_;
    const std::string caller_sha256_;
    PartFile part_;

    PartInfo info_;
    Sha256 hash_;                    // of the .part's bytes [0, offset_)
    uint64_t offset_ = 0;            // bytes in the .part
    std::optional<uint64_t> total_;  // the file's size, from the current response
    bool sent_range_ = false;
    Abort abort_ = Abort::none;
    std::string abort_message_;
    bool cancelled_ = false;
    bool mismatch_retried_ = false;
    DownloadResult result_;

    Clock::time_point last_report_{};
    Clock::time_point last_data_{};  // when the current attempt last received body bytes
    std::deque<std::pair<Clock::time_point, uint64_t>> speed_samples_;  // (when, bytes_transferred)
};

void Download::discard_if_empty() {
    struct stat st {};
    if (::fstat(part_.fd(), &st) == 0 && st.st_size == 0) {
        remove_quietly(part_path_);  // still locked by us: nobody else is using the name
        remove_quietly(info_path_);
    }
}

Result<void> Download::truncate() {
    if (::ftruncate(part_.fd(), 0) != 0) {
        return make_error(ErrorCode::io, fmt::format("cannot truncate {}: {}", part_path_.string(), errno_text(errno)));
    }
    if (offset_ > 0 || result_.resumed_from > 0) ++result_.restarts;
    offset_ = 0;
    hash_.reset();
    return {};
}

Result<void> Download::start_from_existing_part() {
    struct stat st {};
    if (::fstat(part_.fd(), &st) != 0) {
        return make_error(ErrorCode::io, fmt::format("cannot stat {}: {}", part_path_.string(), errno_text(errno)));
    }
    offset_ = static_cast<uint64_t>(st.st_size);
    const std::optional<PartInfo> info = read_part_info(info_path_);
    const bool same_source = info && info->url == url_;
    // Continuing bytes of unknown origin could splice two versions of a file: resume only
    // when If-Range can guard it or a known sha256 will check the result. Bytes recorded as
    // coming from another URL are not continued even then (a mismatch would cost a whole
    // download to find out).
    const bool guarded =
        offset_ > 0 && (same_source ? !info->validator.empty() || !info->sha256.empty() || !caller_sha256_.empty()
                                    : !info && !caller_sha256_.empty());
    if (same_source) info_ = *info;
    if (!guarded) {
        info_ = PartInfo{};
        info_.url = url_;
        if (offset_ > 0) {
            PH_TRY(truncate());
            result_.restarts = 0;  // a leftover of unknown origin is not a restart of ours
        }
        return {};
    }
    // The running hash must cover the bytes already there.
    const int fd = part_.fd();
    std::vector<char> buffer(1 << 20);
    uint64_t done = 0;
    while (done < offset_) {
        if (cancel_requested()) return cancelled_error();
        const size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), offset_ - done));
        const ssize_t n = ::pread(fd, buffer.data(), want, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            return make_error(ErrorCode::io, fmt::format("cannot read {}: {}", part_path_.string(),
                                                         n == 0 ? "unexpected end" : errno_text(errno)));
        }
        hash_.update(buffer.data(), static_cast<size_t>(n));
        done += static_cast<uint64_t>(n);
    }
    result_.resumed_from = offset_;
    return {};
}

bool Download::on_head(const ResponseHead& head) {
    const auto [hash, source] = server_hash(head);
    if (head.status == 206) {
        const auto range = detail::parse_content_range(head.content_range);
        const bool continues = sent_range_ && range && range->first && *range->first == offset_;
        // A different file behind the same URL, though If-Range let the range through.
        const bool changed = (!hash.empty() && !info_.sha256.empty() && hash != info_.sha256) ||
                             (range && range->complete_length && info_.size && *info_.size != *range->complete_length);
        if (!continues || changed) {
            abort_ = Abort::restart;
            return false;
        }
        total_ = range->complete_length;
        const std::string validator = validator_of(head);
        if (!validator.empty()) info_.validator = validator;
    } else if (head.status == 200) {
        // The whole file from byte 0: the server ignores ranges, or If-Range found the file
        // changed. Either way the .part's bytes are not the start of this answer.
        if (offset_ > 0) {
            if (!truncate()) {
                abort_ = Abort::write_failed;
                abort_message_ = fmt::format("cannot truncate {}: {}", part_path_.string(), errno_text(errno));
                return false;
            }
            result_.resumed_from = 0;
        }
        total_ = head.content_length;
        info_.validator = validator_of(head);
        info_.sha256.clear();
        info_.hash_source = HashSource::none;
    } else if (head.status >= 200 && head.status < 300) {
        abort_ = Abort::unexpected;
        abort_message_ = fmt::format("download failed: unexpected HTTP {} from {}", head.status, url_);
        return false;
    } else {
        return true;  // not the file; its body is dropped and the status judged afterwards
    }
    info_.url = url_;
    if (total_) info_.size = total_;
    if (!hash.empty()) {
        info_.sha256 = hash;
        info_.hash_source = source;
    }
    write_part_info(info_path_, info_);

    if (total_ && *total_ > offset_) {
        struct statvfs fs_info {};
        if (::statvfs(folder_.c_str(), &fs_info) == 0) {
            const uint64_t available = static_cast<uint64_t>(fs_info.f_bavail) * fs_info.f_frsize;
            const uint64_t needed = *total_ - offset_;
            if (available < needed || available - needed < options_.keep_free_bytes) {
                abort_ = Abort::no_space;
                abort_message_ =
                    fmt::format("not enough disk space in {} for {}: {} still to download{}, {} free", folder_.string(),
                                target_.filename().string(), format_size(needed),
                                options_.keep_free_bytes > 0
                                    ? fmt::format(" plus {} to keep free", format_size(options_.keep_free_bytes))
                                    : std::string(),
                                format_size(available));
                return false;
            }
        }
    }
    return true;
}

bool Download::on_body(const char* data, size_t size) {
    while (size > 0) {
        const ssize_t n = ::pwrite(part_.fd(), data, size, static_cast<off_t>(offset_));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int error = n < 0 ? errno : EIO;
            abort_ = Abort::write_failed;
            const char* what = error == ENOSPC   ? "the disk is full"
                               : error == EDQUOT ? "the disk quota is used up"
                               : error == EFBIG  ? "the file size limit was reached"
                                                 : "writing failed";
            abort_message_ = fmt::format(
                "{} while writing {} ({}); the {} downloaded so far are kept in {}: make "
                "room and download again to resume",
                what, part_path_.string(), errno_text(error), format_size(offset_), part_path_.filename().string());
            return false;
        }
        hash_.update(data, static_cast<size_t>(n));
        last_data_ = Clock::now();
        offset_ += static_cast<uint64_t>(n);
        result_.bytes_transferred += static_cast<uint64_t>(n);
        data += n;
        size -= static_cast<size_t>(n);
    }
    return keep_going();
}

bool Download::keep_going() {
    report_progress(false);
    if (cancel_requested()) {
        abort_ = Abort::cancelled;
        return false;
    }
    // libcurl's own low-speed limit averages over several seconds, so after a fast start a
    // dead connection would go unnoticed for that long; no byte at all for stall_seconds
    // is a stall whatever came before.
    if (Clock::now() - last_data_ > std::chrono::seconds(options_.stall_seconds)) {
        abort_ = Abort::stalled;
        return false;
    }
    return true;
}

void Download::report_progress(bool force) {
    const auto now = Clock::now();
    if (!force && now - last_report_ < options_.progress_interval) return;
    last_report_ = now;
    // Speed over the last five seconds: recent enough to follow a change, long enough not
    // to jump with every burst.
    speed_samples_.emplace_back(now, result_.bytes_transferred);
    while (speed_samples_.size() > 2 && now - speed_samples_[1].first > std::chrono::seconds(5)) {
        speed_samples_.pop_front();
    }
    DownloadProgress p;
    p.bytes_done = offset_;
    p.total = total_;
    p.bytes_transferred = result_.bytes_transferred;
    p.attempt = result_.attempts;
    const double seconds = std::chrono::duration<double>(now - speed_samples_.front().first).count();
    if (seconds > 0.001) {
        p.bytes_per_second = static_cast<double>(result_.bytes_transferred - speed_samples_.front().second) / seconds;
    }
    if (total_ && p.bytes_per_second > 0 && *total_ >= offset_) {
        p.seconds_left = static_cast<double>(*total_ - offset_) / p.bytes_per_second;
    } else if (total_ && *total_ == offset_) {
        p.seconds_left = 0.0;
    }
    if (options_.on_progress && !options_.on_progress(p)) cancelled_ = true;
}

Error Download::cancelled_error() {
    ::fdatasync(part_.fd());
    return make_error(ErrorCode::cancelled, fmt::format("the download of {} was stopped; {} kept in {} to resume", url_,
                                                        format_size(offset_), part_path_.string()));
}

std::optional<Result<DownloadResult>> Download::finish() {
    if (::fsync(part_.fd()) != 0) {
        return Result<DownloadResult>(
            make_error(ErrorCode::io, fmt::format("cannot sync {}: {}", part_path_.string(), errno_text(errno))));
    }
    const std::string actual = hash_.hex();
    std::string expected = caller_sha256_;
    HashSource source = HashSource::caller;
    if (expected.empty() && !info_.sha256.empty()) {
        expected = info_.sha256;
        source = info_.hash_source;
    }
    if (expected.empty()) source = HashSource::none;
    if (!expected.empty() && actual != expected) {
        if (options_.retry_after_hash_mismatch && !mismatch_retried_) {
            mismatch_retried_ = true;
            remove_quietly(info_path_);
            info_ = PartInfo{};
            info_.url = url_;
            if (auto truncated = truncate(); !truncated) return Result<DownloadResult>(truncated.error());
            result_.resumed_from = 0;
            return std::nullopt;
        }
        // The bytes are wrong: nothing of them may stay, not even to resume.
        remove_quietly(part_path_);
        remove_quietly(info_path_);
        return Result<DownloadResult>(make_error(
            ErrorCode::format,
            fmt::format(
                "sha256 mismatch for {}: expected {} ({}), got {}; the downloaded bytes were deleted", url_, expected,
                source == HashSource::caller ? "given" : fmt::format("from the server's {}", hash_source_name(source)),
                actual)));
    }
    if (expected.empty() && opens_a_web_page(part_.fd())) {
        // Nothing to check the bytes against, and they are a page about the file.
        remove_quietly(part_path_);
        remove_quietly(info_path_);
        return Result<DownloadResult>(make_error(
            ErrorCode::invalid_argument,
            fmt::format("{} answered with a web page, not the file (nothing kept): give the file's download link "
                        "(on Hugging Face .../resolve/..., on GitHub .../raw/...)",
                        url_)));
    }
    std::error_code error;
    fs::rename(part_path_, target_, error);
    if (error) {
        return Result<DownloadResult>(make_error(
            ErrorCode::io,
            fmt::format("cannot rename {} to {}: {}", part_path_.string(), target_.string(), error.message())));
    }
    if (auto synced = fsync_folder(folder_); !synced) return Result<DownloadResult>(synced.error());
    remove_quietly(info_path_);
    total_ = offset_;
    report_progress(true);
    result_.path = target_;
    result_.size = offset_;
    result_.sha256 = actual;
    result_.verified = !expected.empty();
    result_.hash_source = source;
    return Result<DownloadResult>(result_);
}

Result<DownloadResult> Download::run() {
    PH_TRY(start_from_existing_part());
    int failures = 0;  // attempts in a row that added nothing
    uint64_t furthest = offset_;
    auto backoff = options_.initial_backoff;
    bool reached_server = false;
    std::string last_failure;

    for (;;) {
        if (cancel_requested()) return cancelled_error();
        ++result_.attempts;
        TransferRequest request;
        request.url = url_;
        sent_range_ = offset_ > 0;
        if (sent_range_) {
            request.range_from = offset_;
            request.if_range = info_.validator;
        }
        abort_ = Abort::none;
        abort_message_.clear();
        total_.reset();
        last_data_ = Clock::now();
        TransferSink sink;
        sink.on_head = [this](const ResponseHead& head) { return on_head(head); };
        sink.on_body = [this](const char* data, size_t size) { return on_body(data, size); };
        sink.keep_going = [this] { return keep_going(); };
        const TransferOutcome outcome = detail::perform_transfer(request, options_, sink);
        result_.effective_url = outcome.effective_url;
        if (outcome.head.status > 0) reached_server = true;

        switch (abort_) {
            case Abort::cancelled:
                return cancelled_error();
            case Abort::write_failed:
            case Abort::no_space:
            case Abort::unexpected:
                return make_error(ErrorCode::io, abort_message_);
            case Abort::restart:
                PH_TRY(truncate());
                info_ = PartInfo{};
                info_.url = url_;
                last_failure = "the server's answer did not continue the partial file";
                break;
            case Abort::stalled:
                last_failure =
                    fmt::format("the connection stalled (no data for {} s) for {}", options_.stall_seconds, url_);
                break;
            case Abort::none:
                break;
        }

        bool complete = false;
        if (abort_ == Abort::none && outcome.curl_code == 0 && outcome.head.status == 416) {
            // Nothing left after our offset: complete if the .part has the whole length,
            // otherwise the .part is longer than the file, or the server refuses ranges.
            const auto range = detail::parse_content_range(outcome.head.content_range);
            const std::optional<uint64_t> length =
                range && range->complete_length ? range->complete_length : info_.size;
            if (sent_range_ && length && *length == offset_) {
                total_ = length;
                complete = true;
            } else if (sent_range_) {
                PH_TRY(truncate());
                info_ = PartInfo{};
                info_.url = url_;
                last_failure = describe_failure(outcome, url_);
            } else {
                return make_error(ErrorCode::io, describe_failure(outcome, url_));
            }
        } else if (abort_ == Abort::none) {
            switch (classify(outcome, reached_server)) {
                case Verdict::success:
                    if (total_ && offset_ != *total_) {
                        last_failure = fmt::format("the connection closed after {} of {} ({})", format_size(offset_),
                                                   format_size(*total_), url_);
                    } else {
                        complete = true;
                    }
                    break;
                case Verdict::retry:
                    last_failure = describe_failure(outcome, url_);
                    break;
                case Verdict::fail: {
                    const long status = outcome.head.status;
                    const bool client_error = outcome.curl_code == 0 && status >= 400 && status < 500;
                    return make_error(client_error ? ErrorCode::invalid_argument : ErrorCode::io,
                                      fmt::format("download failed: {}", describe_failure(outcome, url_)));
                }
            }
        }

        if (complete) {
            if (auto done = finish()) return std::move(*done);
            continue;  // one more time from scratch after a mismatch
        }
        if (offset_ > furthest) {
            furthest = offset_;
            failures = 0;
            backoff = options_.initial_backoff;
        } else if (++failures >= options_.max_attempts) {
            return make_error(ErrorCode::io,
                              fmt::format("download failed after {} attempts: {}{}", result_.attempts, last_failure,
                                          offset_ > 0 ? fmt::format("; {} kept in {} to resume", format_size(offset_),
                                                                    part_path_.string())
                                                      : std::string()));
        }
        if (abort_ == Abort::restart) continue;  // nothing to wait for
        if (options_.on_retry) options_.on_retry(RetryNotice{last_failure, backoff, result_.attempts});
        if (!sleep_unless_cancelled(backoff, options_.cancel)) return cancelled_error();
        backoff = std::min(backoff * 2, options_.max_backoff);
    }
}

}  // namespace

Result<DownloadResult> download_file(const std::string& url, const fs::path& target, const DownloadOptions& options) {
    if (!is_http_url(url)) {
        return make_error(ErrorCode::invalid_argument, fmt::format("not an http(s) URL: '{}'", url));
    }
    std::string expected;
    if (!options.expected_sha256.empty()) {
        auto normalized = normalize_sha256(options.expected_sha256);
        if (!normalized) {
            return make_error(ErrorCode::invalid_argument,
                              fmt::format("'{}' is not a sha256 (64 hex digits)", options.expected_sha256));
        }
        expected = *normalized;
    }
    if (target.filename().empty()) {
        return make_error(ErrorCode::invalid_argument, fmt::format("'{}' names no file", target.string()));
    }
    const fs::path folder = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    std::error_code error;
    if (!fs::is_directory(folder, error)) {
        return make_error(ErrorCode::io, fmt::format("the folder {} does not exist", folder.string()));
    }
    if (Result<bool> exists = target_file_exists(target); !exists) return std::move(exists).error();
    const detail::CurlGlobal curl;
    if (!curl.ok()) return make_error(ErrorCode::internal, "libcurl could not be initialised");
    Result<PartFile> part = PartFile::open_locked(part_path(target), target);
    if (!part) return std::move(part).error();
    Download download(url, target, options, expected, std::move(*part));
    Result<DownloadResult> result = download.run();
    if (!result) download.discard_if_empty();
    return result;
}
}  // namespace powerhouse::library
