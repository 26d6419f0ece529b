// A model's shape before it is downloaded: each file's GGUF header read over HTTP Range
// requests (the first `first_bytes`, doubled while the header goes on, never more than
// `max_bytes` per file, also from a server that ignores Range), then parsed by the engine's
// reader (plan.h's read_model_shape over GgufPrefix), so that the planner places it exactly
// as it would the downloaded file. A split model's parts each hold their own tensors' index,
// so every part's header is read.
//
// Thread-safety: a free function; blocks the calling thread (the desktop calls it from a
// worker), callbacks and cancel as in download.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "library/download.h"
#include "powerhouse/plan.h"
#include "powerhouse/result.h"

namespace powerhouse::library {

struct RemoteHeaderLimits {
    uint64_t first_bytes = uint64_t{2} << 20;  // the first request of each file
    uint64_t max_bytes = uint64_t{64} << 20;   // past this a header is not read on
};

struct RemoteGgufFile {
    std::string url;
    std::string name;   // for messages: the file's path in its repository
    uint64_t size = 0;  // as the listing gives it; 0: as the server says
};

struct RemoteShape {
    ModelShape shape;
    uint64_t bytes_read = 0;  // over all files
};

// Errors: download.h's (HTTP 401/403/404, the network), format (a malformed header, or a
// file that ends inside its header), unsupported (a header longer than max_bytes: the
// message says so, for the caller to keep an estimate), cancelled.
Result<RemoteShape> read_remote_model_shape(const std::vector<RemoteGgufFile>& files, const DownloadOptions& options,
                                            const RemoteHeaderLimits& limits = {});

}  // namespace powerhouse::library
