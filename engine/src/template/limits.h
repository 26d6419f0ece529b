// How the template interpreter fails and how it keeps a render within TemplateLimits.
//
// Inside the interpreter an error is thrown as a TemplateError: evaluation is a deep
// recursion in which nearly every operation can fail, and unwinding it by hand would bury
// the semantics. The exception never leaves the template module: ChatTemplate's entry
// points catch it and return an Error value (the engine's API does not throw).
//
// Budget counts what a render uses. Sizes are checked *before* anything is built
// ('x' * 10**10 fails without allocating), loop iterations and call depth exactly, and the
// clock every few hundred steps.
//
// Thread-safety: a Budget belongs to one render on one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "powerhouse/chat_template.h"

namespace powerhouse::jinja {

enum class ErrorKind {
    syntax,       // the template does not parse
    unsupported,  // valid Jinja outside the supported subset
    undefined,    // an undefined value was used (jinja2's UndefinedError)
    type,         // an operation on values of the wrong type (Python's TypeError)
    value,        // a value out of range (ValueError, ZeroDivisionError, IndexError, ...)
    security,     // refused by the sandbox (attributes starting with '_', mutating methods)
    raised,       // the template called raise_exception(message)
    limit,        // a TemplateLimits bound was reached
};

// A byte offset into the (normalized) template source; converted to line:column when an
// error is reported.
struct SourcePos {
    uint32_t offset = 0;
};
constexpr uint32_t kNoPosition = UINT32_MAX;

struct TemplateError {
    ErrorKind kind = ErrorKind::syntax;
    std::string message;
    uint32_t offset = kNoPosition;  // set by the innermost node that knows its position
};

[[noreturn]] void fail(ErrorKind kind, std::string message);
[[noreturn]] void fail_at(ErrorKind kind, SourcePos pos, std::string message);

class Budget {
public:
    explicit Budget(const TemplateLimits& limits);

    const TemplateLimits& limits() const { return limits_; }

    // One unit of interpretation; checks the clock now and then.
    void step() {
        if ((++steps_ & 255) == 0) check_time();
    }
    void check_time();
    void loop_iteration();
    // Accounts for `bytes` of new data; fails past max_allocated_bytes.
    void allocate(uint64_t bytes);
    // Before building a string of `bytes`: fails past max_output_bytes or the allocation
    // budget, and accounts for it.
    void reserve_string(uint64_t bytes);
    // Before building a list/dict of `items` entries: checks and accounts.
    void reserve_items(uint64_t items);
    // Checks a list size without accounting (before building something make_list accounts).
    void check_items(uint64_t items) const;
    uint64_t max_list_items() const { return limits_.max_list_items; }
    // Checks a string that is being built piece by piece (no accounting).
    void check_string_size(uint64_t bytes) const;

    void enter_call();
    void leave_call() { --call_depth_; }
    // Interpreter recursion (nested expressions and statements being evaluated).
    void enter_nesting();
    void leave_nesting() { --nesting_; }
    uint32_t max_data_depth() const { return limits_.max_nesting; }

private:
    TemplateLimits limits_;
    std::chrono::steady_clock::time_point deadline_;
    uint64_t steps_ = 0;
    uint64_t iterations_ = 0;
    uint64_t allocated_ = 0;
    uint32_t call_depth_ = 0;
    uint32_t nesting_ = 0;
};

// RAII for Budget::enter_nesting / enter_call.
class NestingGuard {
public:
    explicit NestingGuard(Budget& budget) : budget_(budget) { budget_.enter_nesting(); }
    ~NestingGuard() { budget_.leave_nesting(); }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

private:
    Budget& budget_;
};

class CallGuard {
public:
    explicit CallGuard(Budget& budget) : budget_(budget) { budget_.enter_call(); }
    ~CallGuard() { budget_.leave_call(); }
    CallGuard(const CallGuard&) = delete;
    CallGuard& operator=(const CallGuard&) = delete;

private:
    Budget& budget_;
};

}  // namespace powerhouse::jinja
