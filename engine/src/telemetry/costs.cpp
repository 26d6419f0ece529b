// Money (powerhouse/costs.h): tokens, kilowatt-hours and rented hours, times prices.
#include "powerhouse/costs.h"

#include <fmt/format.h>

#include <cmath>

#include "powerhouse/plan.h"

namespace powerhouse {

namespace {

constexpr double kSecondsPerHour = 3600;

Error bad(const char* field, double value, const char* rule) {
    return make_error(ErrorCode::invalid_argument, fmt::format("{} must be {}, not {}", field, rule, value));
}

bool above_zero(double v) {
    return std::isfinite(v) && v > 0;
}
bool not_negative(double v) {
    return std::isfinite(v) && v >= 0;
}

std::optional<double> per_unit(double tokens, double cost) {
    if (cost <= 0) return std::nullopt;
    return tokens / cost;
}

std::optional<double> per_million(double tokens, double cost) {
    if (tokens <= 0) return std::nullopt;
    return cost / tokens * 1e6;
}

}  // namespace

Result<PeriodCost> local_cost(const LocalUsage& usage, double days) {
    if (!above_zero(usage.tokens_per_second))
        return bad("the generation speed (tokens/s)", usage.tokens_per_second, "above 0");
    if (!not_negative(usage.watts)) return bad("the power (W)", usage.watts, "0 or more");
    if (!above_zero(usage.hours_per_day) || usage.hours_per_day > 24) {
        return bad("the hours of generation a day", usage.hours_per_day, "above 0 and at most 24");
    }
    if (!not_negative(usage.price_per_kwh))
        return bad("the electricity price (per kWh)", usage.price_per_kwh, "0 or more");
    if (!not_negative(usage.hardware_price)) return bad("the hardware price", usage.hardware_price, "0 or more");
    if (usage.hardware_price > 0 && !above_zero(usage.write_off_months)) {
        return bad("the months to write the hardware off over", usage.write_off_months, "above 0 when it has a price");
    }
    if (!above_zero(days)) return bad("the days", days, "above 0");
    PeriodCost c;
    c.days = days;
    c.generation_hours = usage.hours_per_day * days;
    c.tokens = usage.tokens_per_second * c.generation_hours * kSecondsPerHour;
    c.kwh = usage.watts * c.generation_hours / 1000.0;
    c.energy_cost = c.kwh * usage.price_per_kwh;
    if (usage.hardware_price > 0)
        c.hardware_cost = usage.hardware_price / (usage.write_off_months * kDaysPerMonth) * days;
    c.total_cost = c.energy_cost + c.hardware_cost;
    c.tokens_per_unit = per_unit(c.tokens, c.total_cost);
    c.cost_per_million_tokens = per_million(c.tokens, c.total_cost);
    return c;
}

Result<UsageCosts> local_costs(const LocalUsage& usage) {
    UsageCosts out;
    for (auto [period, days] : {std::pair{&out.day, 1.0}, {&out.week, kDaysPerWeek}, {&out.month, kDaysPerMonth}}) {
        Result<PeriodCost> c = local_cost(usage, days);
        if (!c) return std::move(c).error();
        *period = *c;
    }
    return out;
}

Result<double> cloud_tokens_per_second(const CloudGpu& gpu, double bytes_per_token) {
    if (gpu.tokens_per_second > 0) {
        if (!std::isfinite(gpu.tokens_per_second))
            return bad("the rented GPU's speed (tokens/s)", gpu.tokens_per_second, "finite");
        return gpu.tokens_per_second;
    }
    if (!above_zero(bytes_per_token)) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("the speed of the rented GPU{} needs either its tokens/s or the bytes the model "
                                      "reads per token",
                                      gpu.name.empty() ? "" : " (" + gpu.name + ")"));
    }
    const double bandwidth = gpu.bandwidth_gb_s > 0 ? gpu.bandwidth_gb_s : guess_bandwidth_gb_s(gpu.name);
    if (!above_zero(bandwidth)) return bad("the rented GPU's memory bandwidth (GB/s)", bandwidth, "above 0");
    if (!above_zero(gpu.roofline_share) || gpu.roofline_share > 1) {
        return bad("the share of the roofline reached", gpu.roofline_share, "above 0 and at most 1");
    }
    return bandwidth * 1e9 * gpu.roofline_share / bytes_per_token;
}

Result<CloudCost> cloud_cost(const CloudGpu& gpu, double tokens, double bytes_per_token) {
    if (!not_negative(gpu.price_per_hour))
        return bad("the rented GPU's price per hour", gpu.price_per_hour, "0 or more");
    if (!not_negative(tokens)) return bad("the tokens", tokens, "0 or more");
    Result<double> speed = cloud_tokens_per_second(gpu, bytes_per_token);
    if (!speed) return std::move(speed).error();
    CloudCost c;
    c.tokens = tokens;
    c.tokens_per_second = *speed;
    c.hours = tokens / *speed / kSecondsPerHour;
    c.cost = c.hours * gpu.price_per_hour;
    c.tokens_per_unit = per_unit(c.tokens, c.cost);
    c.cost_per_million_tokens = per_million(c.tokens, c.cost);
    return c;
}

Result<CloudCosts> cloud_costs(const CloudGpu& gpu, const UsageCosts& local, double bytes_per_token) {
    CloudCosts out;
    for (auto [cloud, home] : {std::pair{&out.day, &local.day}, {&out.week, &local.week}, {&out.month, &local.month}}) {
        Result<CloudCost> c = cloud_cost(gpu, home->tokens, bytes_per_token);
        if (!c) return std::move(c).error();
        *cloud = *c;
    }
    return out;
}

}  // namespace powerhouse
