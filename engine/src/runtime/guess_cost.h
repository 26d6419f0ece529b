// Whether speculative guesses pay (Scheduler, SchedulerOptions::guesses): a step of more
// rows takes longer, and a guess is worth a token only when the model keeps it. On a GPU
// reading the weights costs the same for 1 row or 8, so guessing nearly always pays; on a
// CPU each row costs about a third of a step more, so only guesses that mostly hold pay.
// The scheduler times its steps by their rows (StepCost), counts how a request's guesses
// fared (GuessRecord), and guesses as many as make its steps worth the most tokens a second.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace powerhouse {

// Seconds a step of so many rows takes, learned from the steps run: a running mean per row
// count (steps in which every row gives an output: decoding and guesses), read between the
// counts timed by a straight line.
class StepCost {
public:
    // A step of `rows` rows took `seconds`.
    void observe(uint32_t rows, double seconds);
    // The expected seconds of a step of `rows` rows; nullopt until steps of two sizes have
    // been timed (a line needs two points).
    std::optional<double> seconds(uint32_t rows) const;

    static constexpr uint32_t kMaxRows = 64;  // larger steps count as this many (and a line beyond)

private:
    std::array<double, kMaxRows + 1> mean_{};  // by rows; 0: not timed
};

// How a request's guesses fared: how many it kept and how many rounds ended in a miss,
// each fading by half in about seven rounds, so that the record follows the answer as it
// goes from prose to a repeated block of code and back.
struct GuessRecord {
    double kept = 0;
    double missed = 0;
    // `made` guesses checked, the first `kept_now` of them kept.
    void update(uint32_t made, uint32_t kept_now);
    // The chance that a guess is kept given the ones before it were (a Beta(1, 1) prior, so
    // 1/2 before any guess).
    double rate() const { return (kept + 1.0) / (kept + missed + 2.0); }
};

// The guesses expected to be kept when `k` are made, each kept with probability `rate`
// given that the ones before it were: rate + rate^2 + ... + rate^k.
double expected_kept(double rate, uint32_t k);

// The number of guesses, at most `limit`, that makes the step worth the most tokens a
// second: a step of `rows` rows worth `value` tokens without them, each guess adding a row
// that takes the step's time from cost(rows) to cost(rows + k) and `seconds_per_guess` of
// the draft model's time. 0 when no number of guesses beats none by 1%. nullopt when the
// cost of such steps is not known yet.
std::optional<uint32_t> guesses_that_pay(const StepCost& cost, uint32_t rows, double value, double rate, uint32_t limit,
                                         double seconds_per_guess);

}  // namespace powerhouse
