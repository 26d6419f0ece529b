// HTTP dates (RFC 9110 section 5.6.7) and the Retry-After header that carries one, read without
// the C library's locale: strptime's %a and %b follow LC_TIME, and the desktop app sets the
// user's locale, where "Sun" and "Nov" are not day and month names ("So", "nov.", "日").
//
// Thread-safety: pure functions.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace powerhouse::remote::detail {

// An HTTP-date: the IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") and the two obsolete forms
// that RFC 9110 requires recipients to accept, RFC 850's ("Sunday, 06-Nov-94 08:49:37 GMT")
// and asctime's ("Sun Nov  6 08:49:37 1994"). Names are English whatever the locale (and read
// in any case); the date must exist (no 30 February). RFC 850's two-digit year is the one
// nearest `now` that is at most 50 years ahead of it, as RFC 9110 says. Else nullopt.
std::optional<std::chrono::sys_seconds> parse_http_date(std::string_view text, std::chrono::sys_seconds now);

// Retry-After: delay-seconds, or an HTTP-date, as seconds from `now` (0 for a date past).
// nullopt when it is neither.
std::optional<double> parse_retry_after(std::string_view value, std::chrono::sys_seconds now);

}  // namespace powerhouse::remote::detail
