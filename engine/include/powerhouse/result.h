// Errors as values. Every function that can fail across a module boundary returns
// Result<T>: either a value or an Error that says what went wrong in words a user can act
// on. Nothing in the engine throws across its public API.
//
// Thread-safety: plain value types; no shared state.
#pragma once

#include <cassert>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace powerhouse {

enum class ErrorCode {
    invalid_argument,  // the caller asked for something that makes no sense
    io,                // the operating system refused (open, read, mmap, write)
    format,            // a file is malformed; the message names the field and offset
    unsupported,       // well-formed, but not something Powerhouse can run
    out_of_memory,     // would not fit (host or device)
    context_full,      // a prompt or conversation longer than the model's context
    cancelled,
    device_failed,     // a device failed or stopped answering; the message names it
    internal,
};

const char* error_code_name(ErrorCode code);

struct Error {
    ErrorCode code = ErrorCode::internal;
    std::string message;
};

inline Error make_error(ErrorCode code, std::string message) {
    return Error{code, std::move(message)};
}

template <class T>
class [[nodiscard]] Result {
public:
    Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}
    Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}

    bool ok() const { return state_.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & {
        assert(ok());
        return std::get<0>(state_);
    }
    const T& value() const& {
        assert(ok());
        return std::get<0>(state_);
    }
    T&& value() && {
        assert(ok());
        return std::get<0>(std::move(state_));
    }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    const Error& error() const& {
        assert(!ok());
        return std::get<1>(state_);
    }
    Error&& error() && {
        assert(!ok());
        return std::get<1>(std::move(state_));
    }

private:
    std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error) : error_(std::move(error)), failed_(true) {}

    bool ok() const { return !failed_; }
    explicit operator bool() const { return ok(); }
    const Error& error() const& {
        assert(failed_);
        return error_;
    }
    Error&& error() && {
        assert(failed_);
        return std::move(error_);
    }

private:
    Error error_;
    bool failed_ = false;
};

}  // namespace powerhouse

// Propagates an error from an expression returning Result<...>.
#define PH_TRY(expr)                                   \
    do {                                               \
        auto ph_try_result_ = (expr);                  \
        if (!ph_try_result_.ok()) {                    \
            return std::move(ph_try_result_).error();  \
        }                                              \
    } while (0)
