#include "powerhouse/result.h"

namespace powerhouse {

const char* error_code_name(ErrorCode code) {
    switch (code) {
        case ErrorCode::invalid_argument: return "invalid argument";
        case ErrorCode::io: return "I/O error";
        case ErrorCode::format: return "malformed file";
        case ErrorCode::unsupported: return "unsupported";
        case ErrorCode::out_of_memory: return "out of memory";
        case ErrorCode::context_full: return "context full";
        case ErrorCode::cancelled: return "cancelled";
        case ErrorCode::device_failed: return "device failed";
        case ErrorCode::internal: return "internal error";
    }
    return "error";
}

}  // namespace powerhouse
