#include "template/limits.h"

#include <fmt/format.h>

#include "template/value.h"

namespace powerhouse::jinja {

void fail(ErrorKind kind, std::string message) {
    throw TemplateError{kind, std::move(message), kNoPosition};
}

void fail_at(ErrorKind kind, SourcePos pos, std::string message) {
    throw TemplateError{kind, std::move(message), pos.offset};
}

Budget::Budget(const TemplateLimits& limits)
    : limits_(limits), deadline_(std::chrono::steady_clock::now() + limits.max_time) {}

void Budget::check_time() {
    if (std::chrono::steady_clock::now() > deadline_) {
        fail(ErrorKind::limit,
             fmt::format("the template ran longer than the limit of {} ms", limits_.max_time.count()));
    }
}

void Budget::loop_iteration() {
    if (++iterations_ > limits_.max_loop_iterations) {
        fail(ErrorKind::limit,
             fmt::format("the template ran more than the limit of {} loop iterations", limits_.max_loop_iterations));
    }
    step();
}

void Budget::allocate(uint64_t bytes) {
    allocated_ += bytes;
    if (allocated_ > limits_.max_allocated_bytes) {
        fail(ErrorKind::limit,
             fmt::format("the template built more than the limit of {} bytes of data", limits_.max_allocated_bytes));
    }
}

void Budget::check_string_size(uint64_t bytes) const {
    if (bytes > limits_.max_output_bytes) {
        fail(ErrorKind::limit,
             fmt::format("a string of {} bytes is longer than the limit of {} bytes", bytes, limits_.max_output_bytes));
    }
}

void Budget::reserve_string(uint64_t bytes) {
    check_string_size(bytes);
    allocate(bytes);
}

void Budget::check_items(uint64_t items) const {
    if (items > max_list_items()) {
        fail(ErrorKind::limit,
             fmt::format("a list of {} items is longer than the limit of {} items", items, max_list_items()));
    }
}

void Budget::reserve_items(uint64_t items) {
    check_items(items);
    allocate(items * sizeof(Value));
}

void Budget::enter_call() {
    if (++call_depth_ > limits_.max_call_depth) {
        --call_depth_;
        fail(ErrorKind::limit,
             fmt::format("macro calls nest deeper than the limit of {} (endless recursion?)", limits_.max_call_depth));
    }
}

void Budget::enter_nesting() {
    // Macros add their body's nesting to the caller's: allow the parser's limit for each
    // level of calls, up to a bound that keeps the C++ stack small.
    const uint64_t limit = static_cast<uint64_t>(limits_.max_nesting) * 8;
    if (++nesting_ > limit) {
        --nesting_;
        fail(ErrorKind::limit, fmt::format("the template nests deeper than the limit of {} while running", limit));
    }
    step();
}

}  // namespace powerhouse::jinja
