#include "library/remote_shape.h"

#include <algorithm>
#include <cstddef>

#include <fmt/format.h>

namespace powerhouse::library {
namespace {

std::string mib(uint64_t bytes) {
    return bytes % (1u << 20) == 0 ? fmt::format("{} MiB", bytes >> 20) : fmt::format("{} KiB", bytes >> 10);
}

}  // namespace

Result<RemoteShape> read_remote_model_shape(const std::vector<RemoteGgufFile>& files, const DownloadOptions& options,
                                            const RemoteHeaderLimits& limits) {
    if (files.empty()) return make_error(ErrorCode::invalid_argument, "a model needs at least one file");
    const uint64_t cap = std::max<uint64_t>(limits.max_bytes, 1);
    std::vector<std::string> headers;
    std::vector<GgufPrefix> prefixes;
    RemoteShape out;
    for (const RemoteGgufFile& file : files) {
        std::string bytes;
        uint64_t size = file.size;
        uint64_t want = std::clamp<uint64_t>(limits.first_bytes, 1, cap);
        for (;;) {
            Result<RangeResponse> got = fetch_range(file.url, bytes.size(), want - bytes.size(), options);
            if (!got) return std::move(got).error();
            out.bytes_read += got->bytes.size();
            if (size == 0 && got->file_size) size = *got->file_size;
            const bool file_ended = got->bytes.size() < want - bytes.size();
            bytes += got->bytes;
            if (size == 0 || file_ended) size = std::max<uint64_t>(size, bytes.size());
            const GgufPrefix prefix{file.name, std::as_bytes(std::span(bytes.data(), bytes.size())), size};
            Result<std::optional<uint64_t>> length = gguf_header_length(prefix);
            if (!length) return std::move(length).error();
            if (*length) break;
            if (file_ended || bytes.size() >= size) {
                return make_error(ErrorCode::format,
                                  fmt::format("{} ends inside its GGUF header ({} bytes)", file.name, bytes.size()));
            }
            if (want >= cap) {
                return make_error(ErrorCode::unsupported,
                                  fmt::format("the GGUF header of {} is longer than {}; not read further", file.name,
                                              mib(cap)));
            }
            want = std::min(want * 2, cap);
        }
        prefixes.push_back({file.name, {}, size});
        headers.push_back(std::move(bytes));
    }
    for (size_t i = 0; i < prefixes.size(); ++i) {
        prefixes[i].bytes = std::as_bytes(std::span(headers[i].data(), headers[i].size()));
    }
    Result<ModelShape> shape = read_model_shape(prefixes);
    if (!shape) return std::move(shape).error();
    out.shape = std::move(shape).value();
    return out;
}

}  // namespace powerhouse::library
