#include "remote/http_date.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "http_curl.h"

namespace powerhouse::remote::detail {
namespace {

using namespace std::chrono;

constexpr std::array<std::string_view, 7> kDays = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
constexpr std::array<std::string_view, 7> kLongDays = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                                       "Friday", "Saturday", "Sunday"};
constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

char lower(char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// Reads a date's parts from left to right; any mismatch leaves ok() false.
class Reader {
public:
    explicit Reader(std::string_view text) : text_(text) {}

    bool ok() const { return ok_; }
    bool at_end() const { return ok_ && pos_ == text_.size(); }

    // The letters up to the next character that is none: the name they spell, by its index
    // in `names` (any case).
    template <size_t N>
    int name(const std::array<std::string_view, N>& names) {
        size_t end = pos_;
        while (end < text_.size() && lower(text_[end]) >= 'a' && lower(text_[end]) <= 'z') ++end;
        const std::string_view word = text_.substr(pos_, end - pos_);
        for (size_t i = 0; i < N; ++i) {
            if (word.size() == names[i].size() && std::equal(word.begin(), word.end(), names[i].begin(),
                                                             [](char a, char b) { return lower(a) == lower(b); })) {
                pos_ = end;
                return static_cast<int>(i);
            }
        }
        ok_ = false;
        return -1;
    }
    // Exactly `count` digits.
    int digits(size_t count) {
        int value = 0;
        for (size_t i = 0; i < count; ++i) {
            if (!ok_ || pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') {
                ok_ = false;
                return 0;
            }
            value = value * 10 + (text_[pos_++] - '0');
        }
        return value;
    }
    void literal(std::string_view expected) {
        if (ok_ && text_.substr(pos_, expected.size()) == expected) {
            pos_ += expected.size();
        } else {
            ok_ = false;
        }
    }
    // The next character, without reading it ('\0' at the end).
    char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

private:
    std::string_view text_;
    size_t pos_ = 0;
    bool ok_ = true;
};

struct Parts {
    int year = 0;
    int month = 0;  // 0 = January
    int day = 0;
    int hour = 0, minute = 0, second = 0;
};

// time-of-day = hour ":" minute ":" second, two digits each.
void read_time(Reader& r, Parts& p) {
    p.hour = r.digits(2);
    r.literal(":");
    p.minute = r.digits(2);
    r.literal(":");
    p.second = r.digits(2);
}

std::optional<sys_seconds> to_time(const Parts& p) {
    // 60: a leap second, which RFC 9110's grammar allows.
    if (p.hour > 23 || p.minute > 59 || p.second > 60) return std::nullopt;
    const year_month_day date{year{p.year}, month{static_cast<unsigned>(p.month + 1)},
                              day{static_cast<unsigned>(p.day)}};
    if (!date.ok()) return std::nullopt;
    return sys_days{date} + hours{p.hour} + minutes{p.minute} + seconds{p.second};
}

}  // namespace

std::optional<sys_seconds> parse_http_date(std::string_view text, sys_seconds now) {
    Parts p;
    // The three forms differ from the first word on: a short day name and a comma (IMF-fixdate),
    // a long one and a comma (RFC 850), a short one and a space (asctime).
    Reader r(text);
    r.name(kDays);
    if (r.ok() && r.peek() == ',') {
        // IMF-fixdate: day-name "," SP 2DIGIT SP month SP 4DIGIT SP time-of-day SP "GMT"
        r.literal(", ");
        p.day = r.digits(2);
        r.literal(" ");
        p.month = r.name(kMonths);
        r.literal(" ");
        p.year = r.digits(4);
        r.literal(" ");
        read_time(r, p);
        r.literal(" GMT");
        return r.at_end() ? to_time(p) : std::nullopt;
    }
    if (r.ok()) {
        // asctime: day-name SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time-of-day SP 4DIGIT
        r.literal(" ");
        p.month = r.name(kMonths);
        r.literal(" ");
        if (r.peek() == ' ') {
            r.literal(" ");
            p.day = r.digits(1);
        } else {
            p.day = r.digits(2);
        }
        r.literal(" ");
        read_time(r, p);
        r.literal(" ");
        p.year = r.digits(4);
        return r.at_end() ? to_time(p) : std::nullopt;
    }
    // RFC 850: day-name-l "," SP 2DIGIT "-" month "-" 2DIGIT SP time-of-day SP "GMT"
    Reader l(text);
    l.name(kLongDays);
    l.literal(", ");
    p.day = l.digits(2);
    l.literal("-");
    p.month = l.name(kMonths);
    l.literal("-");
    const int two_digits = l.digits(2);
    l.literal(" ");
    read_time(l, p);
    l.literal(" GMT");
    if (!l.at_end()) return std::nullopt;
    // The year with those last two digits that is at most 50 years after now's (RFC 9110:
    // one more than 50 years ahead is the most recent past year with the same last digits).
    const int this_year = static_cast<int>(year_month_day{floor<days>(now)}.year());
    p.year = this_year - (this_year % 100 + 100) % 100 + two_digits;
    if (p.year > this_year + 50) p.year -= 100;
    return to_time(p);
}

std::optional<double> parse_retry_after(std::string_view value, sys_seconds now) {
    value = http::trim_space(value);
    double seconds = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (error == std::errc() && end == value.data() + value.size()) {
        // delay-seconds; not "inf" or "nan", which from_chars reads too.
        if (!std::isfinite(seconds) || seconds < 0) return std::nullopt;
        return seconds;
    }
    const std::optional<sys_seconds> when = parse_http_date(value, now);
    if (!when) return std::nullopt;
    return std::max(0.0, duration<double>(*when - now).count());
}

}  // namespace powerhouse::remote::detail
