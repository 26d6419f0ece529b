// Money: what tokens cost on the user's own machine (electricity, and optionally the hardware
// written off over a period), and what the same tokens would cost on a GPU rented by the hour
// at the speed the planner's bandwidth estimate gives it. Every amount is in the user's
// currency: prices go in and costs come out in it, and nothing here names a currency.
// (cost_per_million_tokens in telemetry.h is the electricity alone, from joules per token.)
//
// Thread-safety: pure functions over value types.
#pragma once

#include <optional>
#include <string>

#include "powerhouse/result.h"

namespace powerhouse {

inline constexpr double kDaysPerWeek = 7;
inline constexpr double kDaysPerMonth = 365.25 / 12;  // 30.4375: a month on average over the years

// How the user generates at home.
struct LocalUsage {
    double tokens_per_second = 0;  // measured generation speed
    double watts = 0;              // average power while generating (the GPUs, or the whole machine)
    double hours_per_day = 0;      // hours a day spent generating, at most 24
    double price_per_kwh = 0;      // electricity
    double hardware_price = 0;     // what the hardware cost; 0: not counted
    double write_off_months = 0;   // the months it is written off over (above 0 when it is counted)
};

struct PeriodCost {
    double days = 0;
    double generation_hours = 0;
    double tokens = 0;
    double kwh = 0;
    double energy_cost = 0;
    // The write-off's share for these days: hardware_price / (write_off_months x kDaysPerMonth)
    // a day, every day, since the hardware ages whether it generates or not.
    double hardware_cost = 0;
    double total_cost = 0;                          // energy_cost + hardware_cost
    std::optional<double> tokens_per_unit;          // tokens per unit of currency; empty when free
    std::optional<double> cost_per_million_tokens;  // empty when no tokens
};

struct UsageCosts {
    PeriodCost day, week, month;  // 1, 7 and kDaysPerMonth days
};

// The costs of `days` of that usage. Errors (invalid_argument, naming the field): a speed not
// above 0, negative watts or prices, hours a day outside (0, 24], a hardware price without
// months to write it off over, days not above 0.
Result<PeriodCost> local_cost(const LocalUsage& usage, double days);
Result<UsageCosts> local_costs(const LocalUsage& usage);

// A GPU rented by the hour.
struct CloudGpu {
    std::string name;  // "A100": its bandwidth from the planner's table when bandwidth_gb_s is 0
    double price_per_hour = 0;
    double bandwidth_gb_s = 0;     // its memory bandwidth; 0: guess_bandwidth_gb_s(name)
    double tokens_per_second = 0;  // its speed, where known; above 0, it wins over the estimate
    // The share of the bandwidth roofline reached in practice (1: all of it, the planner's
    // estimate, so the cloud's best case). Using the share the local GPU reaches (bench
    // prints it) compares like with like.
    double roofline_share = 1;
};

// The rented GPU's speed on the model: tokens_per_second if given, else the planner's
// roofline (decoding reads every byte of the model once per token): bandwidth x 1e9 x
// roofline_share / bytes_per_token, `bytes_per_token` being what the planner counts for a
// token (for a plan on one device: its bandwidth x 1e9 / DevicePlan::tokens_per_second).
// Errors: no speed and no bytes per token, or values not above 0.
Result<double> cloud_tokens_per_second(const CloudGpu& gpu, double bytes_per_token);

struct CloudCost {
    double tokens = 0;
    double tokens_per_second = 0;
    // Rented hours: tokens / speed, as if billed to the second and rented only while
    // generating, the cheapest case (an hour's minimum or idle rented time only adds).
    double hours = 0;
    double cost = 0;
    std::optional<double> tokens_per_unit;          // empty when free
    std::optional<double> cost_per_million_tokens;  // empty when no tokens
};

Result<CloudCost> cloud_cost(const CloudGpu& gpu, double tokens, double bytes_per_token = 0);

struct CloudCosts {
    CloudCost day, week, month;  // the tokens of the same local period
};

// What the tokens of each local period would cost on the rented GPU.
Result<CloudCosts> cloud_costs(const CloudGpu& gpu, const UsageCosts& local, double bytes_per_token = 0);

}  // namespace powerhouse
