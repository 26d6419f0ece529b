#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <string_view>

#include "gguf/gguf_model.h"
#include "model/model_info_internal.h"
#include "plan/device_limits.h"
#include "powerhouse/plan.h"
#include "tensor/dtype.h"

namespace powerhouse {

namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr double kLinkGbS = 25.0;        // PCIe 4.0 x16, one direction, as achieved
constexpr double kHopSeconds = 10e-6;    // latency of one activation transfer
constexpr double kReduceSeconds = 20e-6;  // latency of one small all-reduce

std::string gib(uint64_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / kGiB); }

// Bytes of the KV cache per layer and position for `kv_heads` heads.
double kv_bytes_per_position(const ModelShape& m, uint32_t kv_heads, KvCacheType type) {
    const double elements = 2.0 * kv_heads * m.head_dim;  // K and V
    switch (type) {
        case KvCacheType::f32: return elements * 4;
        case KvCacheType::q8_0: return elements * 34.0 / 32.0;
        case KvCacheType::f16: break;
    }
    return elements * 2;
}

std::string device_label(const std::vector<DeviceDesc>& devices, uint32_t i) {
    return fmt::format("device {} ({})", i, devices[i].name);
}

// Splits `units` into parts proportional to `ratios`, each at least `minimum` (largest
// remainder). Requires units >= minimum * ratios.size().
std::vector<uint32_t> split_units(uint32_t units, const std::vector<double>& ratios, uint32_t minimum) {
    const double sum = std::accumulate(ratios.begin(), ratios.end(), 0.0);
    const auto n = static_cast<uint32_t>(ratios.size());
    const uint32_t free_units = units - minimum * n;
    std::vector<uint32_t> parts(n, minimum);
    std::vector<std::pair<double, uint32_t>> remainders;
    uint32_t given = 0;
    for (uint32_t i = 0; i < n; ++i) {
        const double exact = free_units * ratios[i] / sum;
        const auto whole = static_cast<uint32_t>(std::floor(exact));
        parts[i] += whole;
        given += whole;
        remainders.emplace_back(exact - whole, i);
    }
    std::stable_sort(remainders.begin(), remainders.end(), [](auto& a, auto& b) { return a.first > b.first; });
    for (uint32_t k = 0; given < free_units; ++k, ++given) ++parts[remainders[k % n].second];
    return parts;
}

struct Planner {
    const ModelShape& m;
    const std::vector<DeviceDesc>& devices;
    const PlanOptions& o;
    std::vector<uint32_t> used;
    std::vector<double> ratios;
    uint32_t ram_layers = 0;  // the first layers, whose experts stay in system RAM

    // Positions of the KV cache, all sequences together.
    double kv_positions() const { return o.kv_tokens != 0 ? o.kv_tokens : o.n_ctx; }

    // What layer l puts on the device that holds it: its experts only when not in RAM.
    uint64_t layer_bytes(uint32_t l) const {
        return m.layers[l].total() - (l < ram_layers ? m.layers[l].experts : 0);
    }
    uint64_t device_weight_bytes() const {
        uint64_t total = m.embedding_bytes + m.output_bytes;
        for (uint32_t l = 0; l < m.n_layer; ++l) total += layer_bytes(l);
        return total;
    }
    uint64_t ram_expert_bytes() const {
        uint64_t total = 0;
        for (uint32_t l = 0; l < ram_layers && l < m.n_layer; ++l) total += m.layers[l].experts;
        return total;
    }

    uint64_t budget(uint32_t device) const {
        const DeviceDesc& d = devices[device];
        return d.free_bytes > o.reserve_bytes ? d.free_bytes - o.reserve_bytes : 0;
    }
    double bandwidth(uint32_t device) const {
        return devices[device].bandwidth_gb_s > 0 ? devices[device].bandwidth_gb_s
                                                  : guess_bandwidth_gb_s(devices[device].name);
    }
    // The work buffers of `device` when it takes `batch` tokens at a time (a layer split
    // cuts the batch into one micro-batch per device) holding `share` of the heads and
    // columns, its own layers' experts when `experts` (not all in RAM).
    uint64_t scratch(uint32_t device, bool output, double share, uint32_t batch, bool experts) const {
        const uint64_t q_width = uint64_t{m.n_head} * m.head_dim;
        const uint64_t kv_width = uint64_t{m.n_head_kv} * m.head_dim;
        // A mixture of experts splits experts, not the (unused) dense columns: those stay whole.
        const double ff_share = m.n_expert > 0 ? 1.0 : share;
        const double per_token =
            3.0 * m.n_embd + share * (q_width * 2.0 + 2.0 * kv_width) + ff_share * 2.0 * m.n_ff + m.n_expert;
        uint64_t bytes = static_cast<uint64_t>(batch * per_token * 4.0);
        // The widest product input converted for the integer dot products.
        const double widest = std::max({static_cast<double>(m.n_embd), share * m.n_ff, share * q_width});
        bytes += static_cast<uint64_t>(batch * widest * 4.0);
        bytes += static_cast<uint64_t>(share * m.n_head * o.n_ctx * 4.0);  // attention scores of one token
        // The logits of a step: a row per sequence, and the rows of x they come from.
        if (output) bytes += uint64_t{std::max<uint32_t>(1, o.max_sequences)} * (m.n_vocab + m.n_embd) * 4;
        if (m.n_expert > 0 && experts) {
            // Per (token, slot) pair: its weighted output and choice, its rows through the
            // three products (input, gate, up, output) and their converted inputs (at most
            // four bytes a value).
            const double e = m.n_embd, f = m.n_ff_expert;
            // (Under expert parallelism a device may get all of them: routing is the model's.)
            const double moe = m.n_expert_used * ((e + 2.0) + (2.0 * e + 2.0 * f) + (e + std::max(e, f)));
            bytes += static_cast<uint64_t>(batch * moe * 4.0);
        }
        return bytes + prompt_operand(device, share, batch);
    }
    // What a CUDA device adds for prompts through cuBLAS (plan/device_limits.h): its largest
    // matrix but the head (the experts never take cuBLAS) decoded to f32, `share` of its
    // columns, when its batch reaches kCudaCublasMinTokens. The CUDA stage allocates it.
    uint64_t prompt_operand(uint32_t device, double share, uint32_t batch) const {
        if (devices[device].kind != DeviceKind::cuda || batch < kCudaCublasMinTokens) return 0;
        const double q_width = static_cast<double>(m.n_head) * m.head_dim;
        const double ff = m.n_expert > 0 ? 0.0 : static_cast<double>(m.n_ff);
        return static_cast<uint64_t>(share * std::max(q_width, ff) * m.n_embd * 4.0);
    }
    uint32_t micro_batch(uint32_t n) const { return (std::max<uint32_t>(1, o.n_batch) + n - 1) / n; }
    bool devices_run_experts() const { return ram_layers < m.n_layer; }

    Result<void> prepare();
    DevicePlan single() const;
    DevicePlan layer() const;
    Result<DevicePlan> tensor() const;
    Result<void> check_fits(const DevicePlan& plan) const;
    void estimate(DevicePlan& plan) const;
};

Result<void> Planner::prepare() {
    if (devices.empty()) return make_error(ErrorCode::invalid_argument, "no devices to plan on");
    if (m.n_layer == 0 || m.layers.size() != m.n_layer) {
        return make_error(ErrorCode::invalid_argument, "the model shape has no layers");
    }
    if (o.n_ctx == 0) return make_error(ErrorCode::invalid_argument, "the context length must be at least 1");
    if (o.use.empty()) {
        for (uint32_t i = 0; i < devices.size(); ++i) used.push_back(i);
    } else {
        for (uint32_t i : o.use) {
            if (i >= devices.size()) {
                return make_error(ErrorCode::invalid_argument,
                                  fmt::format("device {} does not exist (there are {})", i, devices.size()));
            }
            if (std::find(used.begin(), used.end(), i) != used.end()) {
                return make_error(ErrorCode::invalid_argument, fmt::format("device {} is listed twice", i));
            }
            used.push_back(i);
        }
    }
    for (uint32_t i : used) {
        const StageShape shape{m.head_dim, o.kv_type, o.n_batch, m.n_embd, m.n_ff, m.n_head, m.embedding_only};
        if (Result<void> ok = stage_supports(devices[i].kind, shape); !ok) {
            return make_error(ok.error().code, fmt::format("{} cannot run {}: {}", device_label(devices, i),
                                                           m.name.empty() ? "this model" : m.name, ok.error().message));
        }
    }
    if (std::find(used.begin(), used.end(), o.main_device) == used.end()) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("the main device {} is not among the devices used", o.main_device));
    }
    if (!o.ratios.empty()) {
        if (o.ratios.size() != used.size()) {
            return make_error(ErrorCode::invalid_argument, fmt::format("{} split ratios given for {} devices",
                                                                       o.ratios.size(), used.size()));
        }
        for (double r : o.ratios) {
            if (!(r > 0) || !std::isfinite(r)) {
                return make_error(ErrorCode::invalid_argument,
                                  fmt::format("split ratio {} is not a positive number (leave a device out instead "
                                              "of giving it 0)", r));
            }
        }
        ratios = o.ratios;
    } else {
        for (uint32_t d : used) ratios.push_back(static_cast<double>(std::max<uint64_t>(budget(d), 1)));
    }
    return {};
}

DevicePlan Planner::single() const {
    DevicePlan plan;
    plan.mode = SplitMode::single;
    DeviceAssignment a;
    a.device = o.main_device;
    a.first_layer = 0;
    a.n_layers = m.n_layer;
    a.kv_head_end = m.n_head_kv;
    a.ff_end = m.n_ff;
    a.expert_end = m.n_expert;
    a.embedding = a.output = true;
    a.weight_bytes = device_weight_bytes();
    a.kv_cache_bytes = static_cast<uint64_t>(kv_bytes_per_position(m, m.n_head_kv, o.kv_type) * kv_positions()) * m.n_layer;
    a.scratch_bytes = scratch(a.device, true, 1.0, o.n_batch, devices_run_experts());
    a.budget_bytes = budget(a.device);
    plan.devices.push_back(a);
    return plan;
}

DevicePlan Planner::layer() const {
    DevicePlan plan;
    plan.mode = SplitMode::layer;
    const uint64_t kv_layer = static_cast<uint64_t>(kv_bytes_per_position(m, m.n_head_kv, o.kv_type) * kv_positions());
    std::vector<double> cost(m.n_layer);
    for (uint32_t l = 0; l < m.n_layer; ++l) cost[l] = static_cast<double>(layer_bytes(l) + kv_layer);
    const double total = std::accumulate(cost.begin(), cost.end(), 0.0) + static_cast<double>(m.embedding_bytes) +
                         static_cast<double>(m.output_bytes) + (m.tied_output ? static_cast<double>(m.embedding_bytes) : 0.0);
    const double ratio_sum = std::accumulate(ratios.begin(), ratios.end(), 0.0);
    const auto n = static_cast<uint32_t>(used.size());
    // Devices get at least one layer each while there are layers enough; boundaries go where
    // the running bytes come closest to each device's share.
    const uint32_t active = std::min(n, m.n_layer);
    std::vector<uint32_t> ends(active);
    double cum_ratio = 0;
    uint32_t begin = 0;
    for (uint32_t d = 0; d < active; ++d) {
        cum_ratio += ratios[d];
        if (d + 1 == active) {
            ends[d] = m.n_layer;
            break;
        }
        const double target = total * cum_ratio / ratio_sum;
        double running = static_cast<double>(m.embedding_bytes);
        for (uint32_t l = 0; l < begin; ++l) running += cost[l];
        uint32_t best = begin + 1;
        double best_gap = INFINITY;
        const uint32_t last_allowed = m.n_layer - (active - d - 1);
        for (uint32_t b = begin + 1; b <= last_allowed; ++b) {
            running += cost[b - 1];
            const double gap = std::abs(running - target);
            if (gap < best_gap) {
                best_gap = gap;
                best = b;
            }
        }
        ends[d] = best;
        begin = best;
    }
    begin = 0;
    for (uint32_t d = 0; d < active; ++d) {
        DeviceAssignment a;
        a.device = used[d];
        a.first_layer = begin;
        a.n_layers = ends[d] - begin;
        a.kv_head_end = m.n_head_kv;
        a.ff_end = m.n_ff;
        a.expert_end = m.n_expert;
        a.embedding = d == 0;
        a.output = d + 1 == active;
        for (uint32_t l = begin; l < ends[d]; ++l) a.weight_bytes += layer_bytes(l);
        if (a.embedding) a.weight_bytes += m.embedding_bytes;
        if (a.output) a.weight_bytes += m.output_bytes;
        // A tied output matrix is the embedding: the last device needs its own copy.
        if (a.output && !a.embedding && m.tied_output) a.weight_bytes += m.embedding_bytes;
        a.kv_cache_bytes = kv_layer * a.n_layers;
        a.scratch_bytes = scratch(a.device, a.output, 1.0, active > 1 ? micro_batch(active) : o.n_batch,
                                  std::max(begin, ram_layers) < ends[d]);
        if (active > 1) a.comm_bytes = uint64_t{2} * o.n_batch * m.n_embd * 4;  // send and receive
        a.budget_bytes = budget(a.device);
        plan.devices.push_back(a);
        begin = ends[d];
    }
    plan.transfers_per_token = active - 1;
    plan.transfer_bytes_per_token = uint64_t{plan.transfers_per_token} * m.n_embd * 4;
    return plan;
}

Result<DevicePlan> Planner::tensor() const {
    const auto n = static_cast<uint32_t>(used.size());
    if (m.n_head_kv < n) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("tensor split over {} devices needs at least {} KV heads, and {} has {}: use "
                                      "layer split, or {} devices",
                                      n, n, m.name.empty() ? "this model" : m.name, m.n_head_kv, m.n_head_kv));
    }
    const bool moe = m.n_expert > 0;
    if (moe && m.n_expert < n) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("expert-parallel split over {} devices needs at least {} experts, and {} has {}: "
                                      "use layer split",
                                      n, n, m.name.empty() ? "this model" : m.name, m.n_expert));
    }
    const uint32_t block = m.layers.front().ff_block;
    if (!moe && (block == 0 || m.n_ff % block != 0 || m.n_ff / block < n)) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("the feed-forward width {} cannot be split into {} parts of whole {}-element "
                                      "blocks: use layer split",
                                      m.n_ff, n, block));
    }
    const std::vector<uint32_t> heads = split_units(m.n_head_kv, ratios, 1);
    const std::vector<uint32_t> ff_blocks = moe ? std::vector<uint32_t>(n, 0) : split_units(m.n_ff / block, ratios, 1);
    const std::vector<uint32_t> experts = moe ? split_units(m.n_expert, ratios, 1) : std::vector<uint32_t>(n, 0);
    // The output projection is split by columns at head boundaries, which must fall on
    // whole blocks of its format.
    const uint32_t group_width = m.n_head / m.n_head_kv * m.head_dim;
    uint32_t o_block = 1;
    for (const LayerWeights& w : m.layers) o_block = std::max(o_block, w.o_block);
    for (uint32_t d = 0, at = 0; d + 1 < n; ++d) {
        at += heads[d];
        if (uint64_t{at} * group_width % o_block != 0) {
            return make_error(ErrorCode::unsupported,
                              fmt::format("tensor split cannot cut the attention output at head group {}: its weights "
                                          "come in blocks of {} columns and a head group is {} wide; use layer split",
                                          at, o_block, group_width));
        }
    }
    DevicePlan plan;
    plan.mode = SplitMode::tensor;
    uint32_t head_at = 0, ff_at = 0, expert_at = 0;
    for (uint32_t d = 0; d < n; ++d) {
        DeviceAssignment a;
        a.device = used[d];
        a.n_layers = m.n_layer;
        a.kv_head_begin = head_at;
        a.kv_head_end = head_at + heads[d];
        if (moe) {  // the dense feed-forward columns stay whole (a MoE model has none to speak of)
            a.ff_end = m.n_ff;
            a.expert_begin = expert_at;
            a.expert_end = expert_at + experts[d];
            expert_at = a.expert_end;
        } else {
            a.ff_begin = ff_at;
            a.ff_end = ff_at + ff_blocks[d] * block;
            ff_at = a.ff_end;
        }
        head_at = a.kv_head_end;
        const double head_share = static_cast<double>(heads[d]) / m.n_head_kv;
        const double ff_share = moe ? static_cast<double>(experts[d]) / m.n_expert
                                    : static_cast<double>(a.ff_end - a.ff_begin) / m.n_ff;
        for (uint32_t l = 0; l < m.n_layer; ++l) {
            const LayerWeights& w = m.layers[l];
            const uint64_t device_experts = l < ram_layers ? 0 : w.experts;
            a.weight_bytes += static_cast<uint64_t>(static_cast<double>(w.q + w.k + w.v + w.o) * head_share +
                                                    static_cast<double>(w.gate + w.up + w.down + device_experts) * ff_share) +
                              w.replicated;
        }
        a.embedding = a.output = a.device == o.main_device;
        if (a.embedding) a.weight_bytes += m.embedding_bytes + m.output_bytes;
        a.kv_cache_bytes = static_cast<uint64_t>(kv_bytes_per_position(m, heads[d], o.kv_type) * kv_positions()) * m.n_layer;
        a.scratch_bytes = scratch(a.device, a.output, std::max(head_share, ff_share), o.n_batch, devices_run_experts());
        a.comm_bytes = uint64_t{2} * o.n_batch * m.n_embd * 4;
        a.budget_bytes = budget(a.device);
        plan.devices.push_back(a);
    }
    plan.allreduces_per_token = 2 * m.n_layer;
    plan.allreduce_bytes_per_token = uint64_t{plan.allreduces_per_token} * m.n_embd * 4;
    return plan;
}

Result<void> Planner::check_fits(const DevicePlan& plan) const {
    for (const DeviceAssignment& a : plan.devices) {
        if (a.total_bytes() <= a.budget_bytes) continue;
        std::vector<std::string> fixes;
        // The context that would fit on this device with the same share of the model.
        const double kv_per_position = static_cast<double>(a.kv_cache_bytes) / kv_positions();
        const uint64_t fixed = a.total_bytes() - a.kv_cache_bytes;
        if (kv_per_position > 0 && fixed < a.budget_bytes) {
            const auto fit = static_cast<uint64_t>(static_cast<double>(a.budget_bytes - fixed) / kv_per_position);
            const uint64_t rounded = fit / 256 * 256;
            if (rounded >= 256) {
                // The cache holds kv_tokens for all sequences when set apart from the context.
                fixes.push_back(o.kv_tokens != 0 && o.kv_tokens != o.n_ctx
                                    ? fmt::format("make the KV cache hold {} tokens", rounded)
                                    : fmt::format("lower the context to {}", rounded));
            }
        }
        if (o.kv_type == KvCacheType::f16) fixes.emplace_back("use a Q8_0 KV cache");
        for (uint32_t i = 0; i < devices.size(); ++i) {
            if (std::find(used.begin(), used.end(), i) == used.end()) {
                fixes.push_back(fmt::format("add {}", device_label(devices, i)));
                break;
            }
        }
        if (plan.mode == SplitMode::single && used.size() > 1) fixes.emplace_back("split the model across the devices");
        if (!o.ratios.empty() && plan.mode != SplitMode::single) fixes.emplace_back("change the split ratios");
        if (fixes.empty()) fixes.emplace_back("use a smaller quantization of the model");
        std::string how;
        for (size_t i = 0; i < fixes.size(); ++i) {
            how += (i == 0 ? "" : i + 1 == fixes.size() ? " or " : ", ") + fixes[i];
        }
        const DeviceDesc& d = devices[a.device];
        return make_error(ErrorCode::out_of_memory,
                          fmt::format("{}: needs {}, has {} free (keeping {} free); {}", device_label(devices, a.device),
                                      gib(a.total_bytes()), gib(d.free_bytes > o.reserve_bytes ? a.budget_bytes : 0),
                                      gib(std::min(o.reserve_bytes, d.free_bytes)), how));
    }
    return {};
}

void Planner::estimate(DevicePlan& plan) const {
    // Each token reads every weight once and, on average, half of the context's KV cache.
    double seconds = 0;
    double slowest = 0;
    for (const DeviceAssignment& a : plan.devices) {
        // A token reads only the experts it is routed to: on average n_used / n_expert of them.
        double unread = 0;
        if (m.n_expert > 0) {
            for (uint32_t l = std::max(a.first_layer, ram_layers); l < a.first_layer + a.n_layers && l < m.n_layer;
                 ++l) {
                unread += static_cast<double>(m.layers[l].experts);
            }
            if (plan.mode == SplitMode::tensor) unread *= static_cast<double>(a.expert_end - a.expert_begin) / m.n_expert;
            unread *= 1.0 - static_cast<double>(m.n_expert_used) / m.n_expert;
        }
        const double bytes = static_cast<double>(a.weight_bytes - (a.embedding ? m.embedding_bytes : 0)) - unread +
                             static_cast<double>(a.kv_cache_bytes) / 2.0;
        const double t = bytes / (bandwidth(a.device) * 1e9);
        seconds += t;
        slowest = std::max(slowest, t);
    }
    if (plan.mode == SplitMode::tensor) {
        seconds = slowest + plan.allreduces_per_token *
                                (kReduceSeconds + 2.0 * static_cast<double>(m.n_embd) * 4 / (kLinkGbS * 1e9));
    } else {
        seconds += plan.transfers_per_token * kHopSeconds +
                   static_cast<double>(plan.transfer_bytes_per_token) / (kLinkGbS * 1e9);
    }
    if (ram_layers > 0 && m.n_expert > 0) {
        // The chosen experts read from RAM by the CPU, and each such layer's input and
        // output crossing to and from it.
        const double read = static_cast<double>(ram_expert_bytes()) * m.n_expert_used / m.n_expert;
        seconds += read / (guess_bandwidth_gb_s("CPU") * 1e9) + 2.0 * ram_layers * kHopSeconds;
    }
    plan.tokens_per_second = seconds > 0 ? 1.0 / seconds : 0.0;
}

}  // namespace

uint64_t ModelShape::weight_bytes() const {
    uint64_t total = embedding_bytes + output_bytes;
    for (const LayerWeights& l : layers) total += l.total();
    return total;
}

double guess_bandwidth_gb_s(const std::string& name) {
    struct Known {
        const char* part;
        double gb_s;
    };
    // Published peak memory bandwidths.
    static constexpr Known known[] = {{"H200", 4800}, {"H100", 3350}, {"B200", 8000}, {"A100", 2039},
                                      {"5090", 1792}, {"4090", 1008}, {"3090", 936},  {"4080", 717},
                                      {"A6000", 768}, {"L40", 864},   {"V100", 900},  {"CPU", 50}};
    for (const Known& k : known) {
        if (name.find(k.part) != std::string::npos) return k.gb_s;
    }
    return 500;
}

Result<std::vector<DeviceDesc>> parse_device_spec(const std::string& spec) {
    std::vector<DeviceDesc> out;
    size_t at = 0;
    while (at < spec.size()) {
        const size_t end = std::min(spec.find(';', at), spec.size());
        const std::string item = spec.substr(at, end - at);
        at = end + 1;
        if (item.find_first_not_of(' ') == std::string::npos) continue;
        const size_t colon = item.rfind(':');
        double gib_total = 0;
        bool ok = colon != std::string::npos && colon > 0;
        if (ok) {
            const auto [ptr, ec] = std::from_chars(item.data() + colon + 1, item.data() + item.size(), gib_total);
            ok = ec == std::errc() && ptr == item.data() + item.size() && gib_total > 0 && gib_total <= 65536;
        }
        if (!ok) {
            return make_error(ErrorCode::invalid_argument,
                              fmt::format("device \"{}\" is not NAME:GiB, with GiB a size above 0 (for example "
                                          "\"RTX 4090:24;A100:80\")",
                                          item));
        }
        DeviceDesc d;
        d.name = item.substr(0, colon);
        d.total_bytes = d.free_bytes = static_cast<uint64_t>(gib_total * static_cast<double>(kGiB));
        d.bandwidth_gb_s = guess_bandwidth_gb_s(d.name);
        out.push_back(std::move(d));
    }
    if (out.empty()) return make_error(ErrorCode::invalid_argument, "no devices given");
    return out;
}

const char* split_mode_name(SplitMode mode) {
    switch (mode) {
        case SplitMode::single: return "single";
        case SplitMode::layer: return "layer";
        case SplitMode::tensor: return "tensor";
        case SplitMode::automatic: return "auto";
    }
    return "?";
}

Result<int32_t> parse_experts_in_ram(const std::string& text) {
    if (text == "auto") return kExpertsInRamAuto;
    if (text == "all") return kExpertsInRamAll;
    int32_t layers = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), layers);
    if (ec != std::errc() || ptr != text.data() + text.size() || layers < 0) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("experts in RAM \"{}\" is not auto, all or a number of layers", text));
    }
    return layers;
}

Result<SplitMode> parse_split_mode(const std::string& text) {
    for (SplitMode m : {SplitMode::single, SplitMode::layer, SplitMode::tensor, SplitMode::automatic}) {
        if (text == split_mode_name(m)) return m;
    }
    return make_error(ErrorCode::invalid_argument,
                      fmt::format("split mode \"{}\" is not one of auto, single, layer, tensor", text));
}

namespace {

// The plan for one choice of the layers whose experts stay in RAM.
Result<DevicePlan> plan_with(const ModelShape& model, const std::vector<DeviceDesc>& devices,
                             const PlanOptions& options, uint32_t ram_layers) {
    Planner p{model, devices, options, {}, {}, ram_layers};
    if (Result<void> ok = p.prepare(); !ok) return ok.error();
    Result<DevicePlan> plan = DevicePlan{};
    switch (options.mode) {
        case SplitMode::single:
            plan = p.single();
            plan->reason = "as asked";
            break;
        case SplitMode::layer:
            plan = p.layer();
            plan->reason = "as asked";
            break;
        case SplitMode::tensor:
            plan = p.tensor();
            if (plan) plan->reason = "as asked";
            break;
        case SplitMode::automatic: {
            DevicePlan one = p.single();
            const DeviceAssignment& a = one.devices.front();
            if (a.total_bytes() <= a.budget_bytes || p.used.size() == 1) {
                one.reason = fmt::format("fits on {} ({} of {} usable): one device avoids interconnect time",
                                         device_label(devices, a.device), gib(a.total_bytes()), gib(a.budget_bytes));
                plan = one;
            } else {
                plan = p.layer();
                plan->reason = fmt::format("needs {}, more than {} has usable ({}): layer split across {} devices",
                                           gib(a.total_bytes()), device_label(devices, a.device), gib(a.budget_bytes),
                                           plan->devices.size());
            }
            break;
        }
    }
    if (!plan) return plan;
    plan->n_ctx = options.n_ctx;
    plan->kv_type = options.kv_type;
    plan->experts_in_ram_layers = ram_layers;
    plan->ram_expert_bytes = p.ram_expert_bytes();
    plan->ram_budget_bytes = options.ram_bytes;
    if (Result<void> fits = p.check_fits(*plan); !fits) return fits.error();
    if (options.ram_bytes > 0 && plan->ram_expert_bytes > options.ram_bytes) {
        return make_error(ErrorCode::out_of_memory,
                          fmt::format("the experts of {} layers need {} of system memory and {} is free: use a smaller "
                                      "quantization of the model, or more GPU memory",
                                      ram_layers, gib(plan->ram_expert_bytes), gib(options.ram_bytes)));
    }
    p.estimate(*plan);
    return plan;
}

}  // namespace

Result<DevicePlan> plan_devices(const ModelShape& model, const std::vector<DeviceDesc>& devices,
                                const PlanOptions& options) {
    if (model.n_expert == 0) return plan_with(model, devices, options, 0);
    if (options.experts_in_ram == kExpertsInRamAll) return plan_with(model, devices, options, model.n_layer);
    if (options.experts_in_ram != kExpertsInRamAuto) {
        if (options.experts_in_ram < 0 || static_cast<uint32_t>(options.experts_in_ram) > model.n_layer) {
            return make_error(ErrorCode::invalid_argument,
                              fmt::format("experts in RAM for {} layers: the model has {} (give 0 to {}, or auto)",
                                          options.experts_in_ram, model.n_layer, model.n_layer));
        }
        return plan_with(model, devices, options, static_cast<uint32_t>(options.experts_in_ram));
    }
    // Auto: CPU devices are RAM already; GPUs take as many layers' experts as fit, the
    // first layers' experts going to RAM one layer at a time until the rest fits.
    const bool gpus = std::any_of(devices.begin(), devices.end(), [&](const DeviceDesc& d) {
        return d.kind == DeviceKind::cuda;
    });
    Result<DevicePlan> first = plan_with(model, devices, options, 0);
    if (first || !gpus) return first;
    for (uint32_t layers = 1; layers <= model.n_layer; ++layers) {
        Result<DevicePlan> plan = plan_with(model, devices, options, layers);
        if (!plan && plan.error().code == ErrorCode::invalid_argument) return plan;
        if (!plan && layers < model.n_layer) continue;
        if (!plan) {
            // Nothing fits even with every expert in RAM: say what the devices lack then.
            return plan.error().code == ErrorCode::out_of_memory ? plan : first;
        }
        const std::string where = layers == model.n_layer ? "every layer" : fmt::format("{} layers", layers);
        // Until the GPU backend runs experts, they all stay in RAM.
        const char* why = first.error().code == ErrorCode::unsupported ? ", as the GPU backend has no expert kernels yet"
                                                                        : "";
        plan->reason = fmt::format("{}; the experts of {} in RAM ({}), run by the CPU{}", plan->reason, where,
                                   gib(plan->ram_expert_bytes), why);
        return plan;
    }
    return first;
}

// Adds one tensor's bytes to the part of the shape it belongs to (a layer's attention, its
// feed-forward, its experts, or what every shard keeps whole), by its GGUF name.
Result<void> add_tensor_to_shape(ModelShape& m, std::string_view name, uint64_t n_bytes, uint64_t block_size) {
    if (name.rfind("blk.", 0) == 0) {
        const size_t dot = name.find('.', 4);
        uint32_t layer = 0;
        const auto [ptr, ec] = std::from_chars(name.data() + 4, name.data() + std::min(dot, name.size()), layer);
        const bool parsed = ec == std::errc() && dot != std::string_view::npos;
        if (parsed && layer >= m.layers.size() && layer - m.layers.size() < m.n_layer_nextn) return {};
        if (!parsed || layer >= m.layers.size()) {
            return make_error(ErrorCode::format, fmt::format("tensor '{}' names a layer the model does not have", name));
        }
        LayerWeights& w = m.layers[layer];
        const std::string_view part = name.substr(dot + 1);
        const auto is = [&](std::string_view prefix) { return part.rfind(prefix, 0) == 0; };
        if (is("attn_q.")) w.q += n_bytes;
        else if (is("attn_qkv.")) {
            // Phi-3's Q, K and V in one tensor: each part by its heads (rows).
            const uint64_t heads = uint64_t{m.n_head} + 2 * uint64_t{m.n_head_kv};
            const uint64_t kv = n_bytes * m.n_head_kv / heads;
            w.q += n_bytes - 2 * kv;
            w.k += kv;
            w.v += kv;
        } else if (is("attn_k."))
            w.k += n_bytes;
        else if (is("attn_v.")) w.v += n_bytes;
        else if (is("attn_output.bias")) w.replicated += n_bytes;  // every shard adds it whole
        else if (is("attn_output.")) {
            w.o += n_bytes;
            if (is("attn_output.weight")) w.o_block = static_cast<uint32_t>(block_size);
        }
        else if (is("ffn_gate_exps.") || is("ffn_up_exps.") || is("ffn_down_exps.")) w.experts += n_bytes;
        else if (is("attn_sinks.")) w.q += n_bytes;  // one per query head: shared as the heads are
        else if (is("ffn_gate.")) w.gate += n_bytes;
        else if (is("ffn_up.")) w.up += n_bytes;
        else if (is("ffn_down.")) {
            w.down += n_bytes;
            // Columns go in whole blocks, and never fewer than 32 together: the CPU's
            // activation blocks and the GPU's 8-value groups of float types both divide it.
            w.ff_block = std::max<uint32_t>(32, static_cast<uint32_t>(block_size));
        } else {
            w.replicated += n_bytes;
        }
    } else if (name == "token_embd.weight") {
        m.embedding_bytes += n_bytes;
    } else {
        m.output_bytes += n_bytes;  // output.weight, output_norm, rope_freqs
    }
    return {};
}

namespace {

Result<ModelShape> shape_of(const GgufModel& file, const std::filesystem::path& path) {
    Result<ModelInfo> info = inspect_gguf(file, path);
    if (!info) return info.error();
    ModelShape m;
    m.name = info->name.empty() ? path.filename().string() : info->name;
    m.architecture = info->architecture;
    m.n_layer = info->n_layer;
    m.n_head = info->n_head;
    m.n_head_kv = info->n_head_kv;
    m.head_dim = info->head_dim_k;
    m.n_embd = info->n_embd;
    m.n_ff = info->n_ff;
    m.n_vocab = info->n_vocab;
    m.n_ctx_train = info->n_ctx_train;
    m.n_expert = info->n_expert;
    m.n_expert_used = info->n_expert_used;
    m.n_ff_expert = info->n_ff_expert;
    m.n_layer_nextn = info->n_layer_nextn;
    m.embedding_only = info->embedding_only;
    if (m.n_layer == 0 || m.n_head == 0 || m.n_head_kv == 0) {
        return make_error(ErrorCode::format, fmt::format("{}: the model has no layer or head counts", path.string()));
    }
    m.layers.resize(m.n_layer);
    m.tied_output = file.find_tensor("output.weight") == nullptr;
    for (const GgufTensorInfo& t : file.tensors()) {
        if (Result<void> added = add_tensor_to_shape(m, t.name, t.n_bytes, type_traits(t.type).block_size); !added) {
            return make_error(ErrorCode::format, fmt::format("{}: {}", path.string(), added.error().message));
        }
    }
    return m;
}

}  // namespace

Result<ModelShape> read_model_shape(const std::filesystem::path& path) {
    Result<GgufModel> file = GgufModel::open(path);
    if (!file) return file.error();
    return shape_of(*file, path);
}

Result<std::optional<uint64_t>> gguf_header_length(const GgufPrefix& prefix) {
    Result<std::optional<GgufFile>> parsed = GgufFile::parse_header(prefix.bytes, prefix.file_size, prefix.name);
    if (!parsed) return std::move(parsed).error();
    if (!*parsed) return std::optional<uint64_t>();
    return std::optional<uint64_t>((*parsed)->data_offset());
}

Result<ModelShape> read_model_shape(const std::vector<GgufPrefix>& parts) {
    if (parts.empty()) return make_error(ErrorCode::invalid_argument, "a model needs at least one file");
    std::vector<GgufFile> files;
    for (const GgufPrefix& part : parts) {
        Result<std::optional<GgufFile>> parsed = GgufFile::parse_header(part.bytes, part.file_size, part.name);
        if (!parsed) return std::move(parsed).error();
        if (!*parsed) {
            return make_error(ErrorCode::format,
                              fmt::format("{}: the header continues past the first {} bytes", part.name, part.bytes.size()));
        }
        files.push_back(std::move(**parsed));
    }
    Result<GgufModel> model = GgufModel::from_parts(std::move(files));
    if (!model) return std::move(model).error();
    return shape_of(*model, parts.front().name);
}

}  // namespace powerhouse
