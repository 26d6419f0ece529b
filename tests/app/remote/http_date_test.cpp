// HTTP dates and Retry-After (remote/http_date.h): the IMF-fixdate and the two obsolete forms
// RFC 9110 requires recipients to accept, every day and month name, the two-digit year of RFC
// 850, dates that do not exist, and the same answers under a locale whose names are not
// English (strptime's %a and %b followed LC_TIME, which the desktop app sets).
#include <gtest/gtest.h>

#include <chrono>
#include <clocale>
#include <cstdio>
#include <string>

#include "remote/http_date.h"

namespace powerhouse::remote::detail {
namespace {

using namespace std::chrono;

const char* const kDays[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
const char* const kLongDays[] = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};
const char* const kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// 2026-03-01 00:00:00 UTC, a fixed "now".
const sys_seconds kNow = sys_days{year{2026} / March / 1};

sys_seconds at(int y, unsigned m, unsigned d, int hh, int mm, int ss) {
    return sys_days{year{y} / month{m} / day{d}} + hours{hh} + minutes{mm} + seconds{ss};
}

// RFC 9110's own examples, one per form.
TEST(HttpDate, ReadsTheThreeFormsOfRfc9110) {
    const sys_seconds expected = at(1994, 11, 6, 8, 49, 37);
    EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT", kNow), expected);  // IMF-fixdate
    // RFC 850 (its year "94" more than 50 years behind now still the past's 1994: 2094 is
    // more than 50 years ahead).
    EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", kNow), expected);
    EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994", kNow), expected);  // asctime
    EXPECT_EQ(parse_http_date("Sun Nov 16 08:49:37 1994", kNow), at(1994, 11, 16, 8, 49, 37));
}

// Every month and day name, in every form.
TEST(HttpDate, ReadsEveryMonthAndDayName) {
    for (unsigned m = 1; m <= 12; ++m) {
        for (int d = 0; d < 7; ++d) {
            char imf[64], rfc850[64], asctime[64];
            std::snprintf(imf, sizeof imf, "%s, %02u %s 2025 23:59:%02d GMT", kDays[d], m + 9, kMonths[m - 1], d);
            std::snprintf(rfc850, sizeof rfc850, "%s, %02u-%s-25 23:59:%02d GMT", kLongDays[d], m + 9, kMonths[m - 1],
                          d);
            std::snprintf(asctime, sizeof asctime, "%s %s %2u 23:59:%02d 2025", kDays[d], kMonths[m - 1], m + 9, d);
            const sys_seconds expected = at(2025, m, m + 9, 23, 59, d);
            EXPECT_EQ(parse_http_date(imf, kNow), expected) << imf;
            EXPECT_EQ(parse_http_date(rfc850, kNow), expected) << rfc850;
            EXPECT_EQ(parse_http_date(asctime, kNow), expected) << asctime;
        }
    }
}

// RFC 850's two-digit year: the century that puts it at most 50 years ahead of now.
TEST(HttpDate, ATwoDigitYearIsNeverMoreThan50YearsAhead) {
    EXPECT_EQ(parse_http_date("Thursday, 01-Jan-70 00:00:00 GMT", kNow), at(2070, 1, 1, 0, 0, 0));
    EXPECT_EQ(parse_http_date("Friday, 01-Jan-77 00:00:00 GMT", kNow), at(1977, 1, 1, 0, 0, 0));
    EXPECT_EQ(parse_http_date("Sunday, 01-Mar-26 00:00:00 GMT", kNow), kNow);
}

TEST(HttpDate, RefusesWhatIsNoHttpDate) {
    for (const char* text :
         {"", "soon", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 6 Nov 1994 08:49:37 GMT",
          "Sun, 06 Nov 94 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Fun, 06 Nov 1994 08:49:37 GMT",
          "Sun, 30 Feb 1994 08:49:37 GMT", "Sun, 31 Apr 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
          "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1994 08:49:37 GMT trailing", "Sunday, 06-Nov-1994 08:49:37 GMT",
          "Sun Nov 6 08:49:37 1994 GMT", "So, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov. 1994 08:49:37 GMT"}) {
        EXPECT_FALSE(parse_http_date(text, kNow)) << text;
    }
}

TEST(RetryAfter, IsSecondsOrADate) {
    EXPECT_EQ(parse_retry_after("7", kNow), 7.0);
    EXPECT_EQ(parse_retry_after(" 120 ", kNow), 120.0);
    EXPECT_EQ(parse_retry_after("Sun, 01 Mar 2026 00:00:30 GMT", kNow), 30.0);
    EXPECT_EQ(parse_retry_after("Sun, 01 Feb 2026 00:00:30 GMT", kNow), 0.0);  // past: now
    EXPECT_FALSE(parse_retry_after("later", kNow));
    EXPECT_FALSE(parse_retry_after("-5", kNow));
    EXPECT_FALSE(parse_retry_after("inf", kNow));
    EXPECT_FALSE(parse_retry_after("nan", kNow));
}

// Under a locale whose day and month names are not English, dates read the same. The test
// runs under the first such locale installed (LOCPATH may point at ones made by localedef),
// and is skipped where there is none.
TEST(RetryAfter, ReadsDatesWhateverTheLocale) {
    const std::string previous = std::setlocale(LC_TIME, nullptr);
    const char* chosen = nullptr;
    for (const char* name :
         {"de_DE.UTF-8", "fr_FR.UTF-8", "ja_JP.UTF-8", "es_ES.UTF-8", "ru_RU.UTF-8", "de_DE.utf8", "fr_FR.utf8"}) {
        if (std::setlocale(LC_TIME, name) != nullptr) {
            chosen = name;
            break;
        }
    }
    if (chosen == nullptr) GTEST_SKIP() << "no locale other than C and POSIX is installed";
    for (unsigned m = 1; m <= 12; ++m) {
        char imf[64];
        std::snprintf(imf, sizeof imf, "%s, 01 %s 2026 00:00:00 GMT", kDays[m % 7], kMonths[m - 1]);
        EXPECT_EQ(parse_retry_after(imf, at(2026, m, 1, 0, 0, 0) - seconds{9}), 9.0) << chosen << ": " << imf;
    }
    std::setlocale(LC_TIME, previous.c_str());
}

}  // namespace
}  // namespace powerhouse::remote::detail
