#include "bench_costs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include "format.h"
#include "gpu_power.h"
#include "powerhouse/costs.h"
#include "powerhouse/plan.h"

namespace powerhouse::cli {
namespace {

LocalUsage local_usage(const CostChoice& choice, double tokens_per_second, double watts) {
    LocalUsage u;
    u.tokens_per_second = tokens_per_second;
    u.watts = watts;
    u.hours_per_day = choice.hours_per_day;
    u.price_per_kwh = choice.price_per_kwh;
    u.hardware_price = choice.hardware_price;
    u.write_off_months = choice.write_off_months;
    return u;
}

// The rented GPU: its bandwidth from the planner's table, and the share of its roofline the
// local GPUs reached (like with like), or all of it when the model ran on the CPU (the
// cloud's best case).
CloudGpu cloud_gpu(const CostChoice& choice, double roofline_share) {
    CloudGpu gpu;
    gpu.name = choice.cloud_gpu;
    gpu.price_per_hour = choice.cloud_price_per_hour;
    gpu.bandwidth_gb_s = guess_bandwidth_gb_s(choice.cloud_gpu);
    gpu.roofline_share = roofline_share > 0 ? std::min(roofline_share, 1.0) : 1.0;
    return gpu;
}

// Amounts of money and tokens, to a precision a person reads: 0.8400 -> "0.84", 25.5625
// -> "25.56", 1234.5 -> "1234".
std::string amount(double v) {
    return v >= 1000 ? fmt::format("{:.0f}", v) : fmt::format("{:.4g}", v);
}
std::string amount(const std::optional<double>& v) {
    return v ? amount(*v) : std::string("-");
}
// Four digits: "1.416 M", "92.14 M", "3.042 B".
std::string tokens_text(double tokens) {
    if (tokens >= 1e9) return fmt::format("{:.4g} B", tokens / 1e9);
    if (tokens >= 1e6) return fmt::format("{:.4g} M", tokens / 1e6);
    if (tokens >= 1e3) return fmt::format("{:.4g} K", tokens / 1e3);
    return fmt::format("{:.0f}", tokens);
}

}  // namespace

void add_cost_options(CLI::App& bench, CostChoice& choice) {
    CLI::Option* price =
        bench.add_option("--price-per-kwh", choice.price_per_kwh,
                         "Electricity price per kWh, in your currency: prints what the generation costs over a day, "
                         "a week and a month at the measured speed and power, and tokens per unit of currency");
    const auto needs_price = [&](CLI::Option* option) { option->needs(price); };
    needs_price(
        bench.add_option("--hours-per-day", choice.hours_per_day, "With --price-per-kwh: hours a day spent generating")
            ->capture_default_str());
    needs_price(bench.add_option("--watts", choice.watts,
                                 "With --price-per-kwh: the power to count while generating, in W (the whole "
                                 "machine, from a meter; default: what the model's GPUs draw, measured)"));
    CLI::Option* hardware = bench.add_option("--hardware-price", choice.hardware_price,
                                             "With --price-per-kwh: what the hardware cost, written off over "
                                             "--write-off-months");
    needs_price(hardware);
    CLI::Option* months = bench.add_option("--write-off-months", choice.write_off_months,
                                           "With --hardware-price: the months to write it off over");
    hardware->needs(months);
    months->needs(hardware);
    CLI::Option* cloud_price = bench.add_option("--cloud-price-per-hour", choice.cloud_price_per_hour,
                                                "With --price-per-kwh: what a rented cloud GPU costs an hour, to "
                                                "compare with (e.g. 1.60 for an A100)");
    CLI::Option* cloud_name = bench.add_option("--cloud-gpu", choice.cloud_gpu,
                                               "With --cloud-price-per-hour: the rented GPU (A100, H100, H200, ...): "
                                               "its speed is the planner's bandwidth estimate for this model");
    needs_price(cloud_price);
    cloud_price->needs(cloud_name);
    cloud_name->needs(cloud_price);
    needs_price(bench.add_option("--currency", choice.currency,
                                 "With --price-per-kwh: the currency's name, for the labels only (default: \"unit "
                                 "of your currency\")"));
}

Result<void> check_costs(const CostChoice& choice) {
    if (!choice.wanted()) return {};
    // The engine's own checks, on a speed that passes them: the same rules, the same words.
    const double watts = std::isnan(choice.watts) ? 0.0 : choice.watts;
    Result<UsageCosts> local = local_costs(local_usage(choice, 1.0, watts));
    if (!local) return local.error();
    if (choice.cloud()) {
        Result<CloudCost> cloud = cloud_cost(cloud_gpu(choice, 1.0), 1.0, 1.0);
        if (!cloud) return cloud.error();
    }
    return {};
}

Result<double> planned_bytes_per_token(const std::filesystem::path& model, const std::string& gpu_name, uint32_t n_ctx,
                                       KvCacheType kv_type) {
    Result<ModelShape> shape = read_model_shape(model);
    if (!shape) return shape.error();
    // One GPU of that kind with room for everything: only the bytes a token reads matter here.
    DeviceDesc gpu;
    gpu.name = gpu_name;
    gpu.kind = DeviceKind::cuda;
    gpu.total_bytes = gpu.free_bytes = uint64_t{1} << 50;
    gpu.bandwidth_gb_s = guess_bandwidth_gb_s(gpu_name);
    PlanOptions options;
    options.mode = SplitMode::single;
    options.n_ctx = n_ctx;
    options.kv_type = kv_type;
    Result<DevicePlan> plan = plan_devices(*shape, {gpu}, options);
    if (!plan) {
        return make_error(plan.error().code,
                          fmt::format("the speed of a rented {} on this model cannot be estimated: {}", gpu_name,
                                      plan.error().message));
    }
    if (plan->tokens_per_second <= 0) {
        return make_error(ErrorCode::internal, "the planner gave no speed estimate for the rented GPU");
    }
    return gpu.bandwidth_gb_s * 1e9 / plan->tokens_per_second;
}

Result<void> report_costs(const CostChoice& choice, const MeasuredUse& use, bool json, nlohmann::ordered_json& out) {
    Result<UsageCosts> local = local_costs(local_usage(choice, use.tokens_per_second, use.watts));
    if (!local) return local.error();
    const CloudGpu gpu = cloud_gpu(choice, use.roofline_share);
    std::optional<CloudCosts> cloud;
    if (choice.cloud()) {
        Result<CloudCosts> c = cloud_costs(gpu, *local, use.cloud_bytes_per_token);
        if (!c) return c.error();
        cloud = *c;
    }
    const std::pair<const char*, const PeriodCost*> periods[] = {
        {"day", &local->day}, {"week", &local->week}, {"month", &local->month}};
    const CloudCost* rented[] = {cloud ? &cloud->day : nullptr, cloud ? &cloud->week : nullptr,
                                 cloud ? &cloud->month : nullptr};

    if (json) {
        nlohmann::ordered_json costs = {{"currency", choice.currency},
                                        {"tokens_per_second", use.tokens_per_second},
                                        {"watts", use.watts},
                                        {"watts_source", use.watts_source},
                                        {"hours_per_day", choice.hours_per_day},
                                        {"price_per_kwh", choice.price_per_kwh},
                                        {"hardware_price", choice.hardware_price},
                                        {"write_off_months", choice.write_off_months}};
        for (const auto& [name, c] : periods) {
            costs[name] = {{"days", c->days},
                           {"generation_hours", c->generation_hours},
                           {"tokens", c->tokens},
                           {"kwh", c->kwh},
                           {"energy_cost", c->energy_cost},
                           {"hardware_cost", c->hardware_cost},
                           {"total_cost", c->total_cost},
                           {"tokens_per_unit", or_null(c->tokens_per_unit)},
                           {"cost_per_million_tokens", or_null(c->cost_per_million_tokens)}};
        }
        if (cloud) {
            nlohmann::ordered_json c = {{"gpu", gpu.name},
                                        {"price_per_hour", gpu.price_per_hour},
                                        {"bandwidth_gb_s", gpu.bandwidth_gb_s},
                                        {"roofline_share", gpu.roofline_share},
                                        {"bytes_per_token", use.cloud_bytes_per_token},
                                        {"tokens_per_second", cloud->day.tokens_per_second}};
            for (size_t i = 0; i < 3; ++i) {
                c[periods[i].first] = {{"tokens", rented[i]->tokens},
                                       {"hours", rented[i]->hours},
                                       {"cost", rented[i]->cost},
                                       {"tokens_per_unit", or_null(rented[i]->tokens_per_unit)},
                                       {"cost_per_million_tokens", or_null(rented[i]->cost_per_million_tokens)}};
            }
            costs["cloud"] = std::move(c);
        }
        out["costs"] = std::move(costs);
        return {};
    }

    const std::string unit = choice.currency.empty() ? "unit" : choice.currency;
    const std::string in_currency = choice.currency.empty() ? "in units of your currency" : "in " + choice.currency;
    std::printf(
        "\nCosts at %.2f tokens/s and %.1f W (%s), generating %g h a day, electricity at %g per kWh%s; "
        "amounts %s:\n",
        use.tokens_per_second, use.watts, use.watts_source.c_str(), choice.hours_per_day, choice.price_per_kwh,
        choice.hardware_price > 0 ? fmt::format(", hardware of {} written off over {} months",
                                                amount(choice.hardware_price), choice.write_off_months)
                                        .c_str()
                                  : "",
        in_currency.c_str());
    std::vector<std::vector<std::string>> rows;
    for (const auto& [name, c] : periods) {
        rows.push_back({name, tokens_text(c->tokens), fmt::format("{:.3f}", c->kwh), amount(c->energy_cost),
                        amount(c->hardware_cost), amount(c->total_cost), tokens_text(c->tokens_per_unit.value_or(0)),
                        amount(c->cost_per_million_tokens)});
        if (!c->tokens_per_unit) rows.back()[6] = "free";
    }
    std::fputs(format_table({"period", "tokens", "kWh", "electricity", "hardware", "total", "tokens per " + unit,
                             "per 1M tokens"},
                            rows)
                   .c_str(),
               stdout);
    if (!cloud) return {};
    std::printf(
        "\nRented: one %s at %g per hour, %.0f GB/s: %.1f tokens/s by the planner's bandwidth estimate at "
        "%.0f%% of its roofline (%s), for the same tokens:\n",
        gpu.name.c_str(), gpu.price_per_hour, gpu.bandwidth_gb_s, cloud->day.tokens_per_second,
        100.0 * gpu.roofline_share,
        use.roofline_share > 0 ? "the share the GPUs here reached" : "its best case: the model ran on the CPU");
    rows.clear();
    for (size_t i = 0; i < 3; ++i) {
        const CloudCost& c = *rented[i];
        rows.push_back({periods[i].first, tokens_text(c.tokens), fmt::format("{:.2f}", c.hours), amount(c.cost),
                        c.tokens_per_unit ? tokens_text(*c.tokens_per_unit) : "free",
                        amount(c.cost_per_million_tokens)});
    }
    std::fputs(
        format_table({"period", "tokens", "rented hours", "cost", "tokens per " + unit, "per 1M tokens"}, rows).c_str(),
        stdout);
    const double home = local->month.total_cost, away = cloud->month.cost;
    if (home > 0 && away > 0) {
        std::printf("A month's tokens cost %s here and %s rented: %s is %.2fx cheaper.\n", amount(home).c_str(),
                    amount(away).c_str(), home <= away ? "here" : "renting",
                    std::max(home, away) / std::min(home, away));
    }
    return {};
}

}  // namespace powerhouse::cli
