// bench's money figures (powerhouse/costs.h): tokens per unit of the user's currency over a
// day, a week and a month at the generation speed bench measured and the power drawn meanwhile
// (the GPUs' own, or what --watts says the machine draws), optionally with the hardware
// written off, and beside it the same tokens on a GPU rented by the hour at the speed the
// planner's bandwidth estimate gives it on this model. No currency is named unless the user
// gives one (--currency).
//
// Thread-safety: called on the command's thread.
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "powerhouse/device_types.h"
#include "powerhouse/result.h"

namespace powerhouse::cli {

inline constexpr double kNotGiven = std::numeric_limits<double>::quiet_NaN();

struct CostChoice {
    double price_per_kwh = kNotGiven;  // --price-per-kwh: the cost lines are printed when given
    double hours_per_day = 8;
    double watts = kNotGiven;  // --watts: the power to count; not given: the GPUs' measured draw
    double hardware_price = 0;
    double write_off_months = 0;
    double cloud_price_per_hour = kNotGiven;
    std::string cloud_gpu;
    std::string currency;  // a label only ("EUR"); empty: "unit of your currency"

    bool wanted() const { return !std::isnan(price_per_kwh); }
    bool cloud() const { return !std::isnan(cloud_price_per_hour); }
};

// --price-per-kwh, --hours-per-day, --watts, --hardware-price, --write-off-months,
// --cloud-price-per-hour, --cloud-gpu and --currency on bench.
void add_cost_options(CLI::App& bench, CostChoice& choice);

// The figures given, checked before the model runs, by the engine's rules and in its words.
Result<void> check_costs(const CostChoice& choice);

// The bytes the planner counts for one token of the model placed alone on one GPU of that
// name: its bandwidth estimate is that GPU's bandwidth over them (the weights read once, the
// embedding's single row aside, and half the KV cache of `n_ctx` positions on average).
Result<double> planned_bytes_per_token(const std::filesystem::path& model, const std::string& gpu_name, uint32_t n_ctx,
                                       KvCacheType kv_type);

// What bench measured, for the costs.
struct MeasuredUse {
    double tokens_per_second = 0;      // generation (tg)
    double watts = 0;                  // while generating
    std::string watts_source;          // "measured on GPU 0 (energy counter)", "--watts"
    double roofline_share = 0;         // of the GPUs the model ran on; 0: not on GPUs
    double cloud_bytes_per_token = 0;  // planned_bytes_per_token for the rented GPU
};

// Prints the cost lines, or with `json` adds "costs" to `out`. Errors: the engine's.
Result<void> report_costs(const CostChoice& choice, const MeasuredUse& use, bool json, nlohmann::ordered_json& out);

}  // namespace powerhouse::cli
