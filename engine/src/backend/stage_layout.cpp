#include "backend/stage_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "backend/cpu/quant_dot.h"

namespace powerhouse {

using arch::Buffer;
using arch::Op;
using arch::OpKind;

uint64_t BoundExperts::bytes(uint32_t n_experts) const {
    if (tensor == nullptr) return 0;
    const uint64_t bias_bytes = bias != nullptr ? static_cast<uint64_t>(rows) * sizeof(float) : 0;
    return (expert_stride + bias_bytes) * n_experts;
}

uint64_t BoundWeight::bytes() const {
    if (op == nullptr) return 0;
    if (op->kind == OpKind::moe) {
        uint64_t total = 0;
        for (const BoundExperts& e : experts) total += e.bytes(expert_end - expert_begin);
        for (const BoundExperts& e : shared) total += e.bytes(1);
        if (selection_bias != nullptr) total += uint64_t{op->moe->n_expert} * sizeof(float);
        return total;
    }
    if (tensor == nullptr) return 0;
    if (op->kind == OpKind::matmul || op->kind == OpKind::add_row) return row_bytes * static_cast<uint64_t>(rows);
    return n_values * sizeof(float);
}

Result<StageLayout> make_stage_layout(const arch::Hparams& hp, const arch::StepProgram& program,
                                      const ShardRanges& ranges) {
    if (program.layers.size() != hp.n_layer) {
        return make_error(ErrorCode::internal, fmt::format("the step program describes {} layers, the model has {}",
                                                           program.layers.size(), hp.n_layer));
    }
    if (ranges.first_layer > hp.n_layer) return make_error(ErrorCode::internal, "the device's layers are out of range");
    StageLayout layout;
    layout.first_layer = ranges.first_layer;
    layout.last_layer =
        ranges.n_layers == UINT32_MAX ? hp.n_layer : std::min(hp.n_layer, ranges.first_layer + ranges.n_layers);
    // The device's heads: whole KV-head groups with their query heads.
    uint32_t kv0 = 0, kv1 = hp.n_head_kv;
    if (ranges.kv_head_end > ranges.kv_head_begin) {
        kv0 = ranges.kv_head_begin;
        kv1 = std::min(ranges.kv_head_end, hp.n_head_kv);
    }
    uint32_t ff0 = 0, ff1 = hp.n_ff;
    if (ranges.ff_end > ranges.ff_begin) {
        ff0 = ranges.ff_begin;
        ff1 = std::min(ranges.ff_end, hp.n_ff);
    }
    uint32_t e0 = 0, e1 = hp.experts.count;
    if (ranges.expert_end > ranges.expert_begin) {
        e0 = ranges.expert_begin;
        e1 = std::min(ranges.expert_end, hp.experts.count);
    }
    if (kv0 >= kv1 || ff0 >= ff1 || hp.n_head_kv == 0 || hp.n_head % hp.n_head_kv != 0 ||
        (hp.is_moe() && e0 >= e1)) {
        return make_error(ErrorCode::internal, "the device's share of the heads, columns or experts is empty");
    }
    layout.expert_begin = e0;
    layout.expert_end = e1;
    layout.ram_expert_layers = std::min(ranges.ram_expert_layers, hp.n_layer);
    const uint32_t group = hp.n_head / hp.n_head_kv;
    layout.n_head_kv = kv1 - kv0;
    layout.n_head = layout.n_head_kv * group;
    layout.kv_width = size_t{layout.n_head_kv} * hp.head_dim;
    const auto set = [&](Buffer b, size_t full, size_t begin, size_t end) {
        layout.full[static_cast<size_t>(b)] = full;
        layout.offsets[static_cast<size_t>(b)] = begin;
        layout.widths[static_cast<size_t>(b)] = end - begin;
    };
    const size_t hd = hp.head_dim;
    set(Buffer::x, hp.n_embd, 0, hp.n_embd);
    set(Buffer::norm, hp.n_embd, 0, hp.n_embd);
    set(Buffer::tmp, hp.n_embd, 0, hp.n_embd);
    set(Buffer::q, size_t{hp.n_head} * hd, size_t{kv0} * group * hd, size_t{kv1} * group * hd);
    set(Buffer::attn, size_t{hp.n_head} * hd, size_t{kv0} * group * hd, size_t{kv1} * group * hd);
    set(Buffer::k, size_t{hp.n_head_kv} * hd, kv0 * hd, kv1 * hd);
    set(Buffer::v, size_t{hp.n_head_kv} * hd, kv0 * hd, kv1 * hd);
    set(Buffer::gate, hp.n_ff, ff0, ff1);
    set(Buffer::up, hp.n_ff, ff0, ff1);
    set(Buffer::logits, hp.n_vocab, 0, hp.n_vocab);
    set(Buffer::router, hp.experts.count, 0, hp.experts.count);
    return layout;
}

namespace {

// The moe op's three expert tensors (and their biases), checked against the spec and cut to
// the stage's experts: each expert's matrices stay whole on the device that holds it.
Result<BoundWeight> bind_experts(const GgufModel& model, const arch::Hparams& hp, const StageLayout& layout,
                                 const Op& op, uint32_t layer, bool split_reduce, std::string_view backend,
                                 const std::function<bool(GgmlType)>& can_run) {
    if (!op.moe) return make_error(ErrorCode::internal, "a moe op without its experts");
    const arch::MoeSpec& spec = *op.moe;
    if (spec.n_expert != hp.experts.count || spec.n_used == 0 || spec.n_used > spec.n_expert || spec.n_ff == 0) {
        return make_error(ErrorCode::internal, "the moe op does not match the model's experts");
    }
    BoundWeight bound;
    bound.op = &op;
    bound.expert_begin = layout.expert_begin;
    bound.expert_end = layout.expert_end;
    bound.expert_all_reduce = split_reduce && layout.is_expert_shard(hp);
    bound.experts_in_ram = layer < layout.ram_expert_layers;
    // Experts in RAM run on the CPU, whatever the stage's backend.
    const auto check_runs = [&](const GgufTensorInfo* t) -> Result<void> {
        const bool runs =
            t->type == GgmlType::f32 ||
            (bound.experts_in_ram ? type_traits(t->type).has_reference && cpu::has_dot(t->type) : can_run(t->type));
        if (runs) return {};
        return make_error(ErrorCode::unsupported,
                          fmt::format("tensor '{}' has type {}, which the {} backend cannot run yet", t->name,
                                      type_traits(t->type).name, bound.experts_in_ram ? "CPU" : backend));
    };
    const auto set_matrix = [](BoundExperts& e, const GgufTensorInfo* t, int64_t in, int64_t rows) {
        e.tensor = t;
        e.type = t->type;
        e.in = in;
        e.rows = rows;
        e.row_stride = row_bytes(type_traits(t->type), static_cast<uint64_t>(in));
        e.expert_stride = e.row_stride * static_cast<uint64_t>(rows);
        e.data = t->data;
    };
    const struct {
        const std::string& weight;
        const std::string& bias;
        int64_t in, rows;
    } parts[3] = {{spec.gate, spec.gate_bias, hp.n_embd, spec.n_ff},
                  {spec.up, spec.up_bias, hp.n_embd, spec.n_ff},
                  {spec.down, spec.down_bias, spec.n_ff, hp.n_embd}};
    for (size_t i = 0; i < 3; ++i) {
        arch::Op named = op;
        named.weight = parts[i].weight;
        const std::string name = arch::weight_name(named, layer);
        const GgufTensorInfo* t = model.find_tensor(name);
        if (t == nullptr) return make_error(ErrorCode::format, fmt::format("the model has no tensor '{}'", name));
        if (t->ne[0] != parts[i].in || t->ne[1] != parts[i].rows || t->ne[2] != spec.n_expert || t->ne[3] != 1) {
            return make_error(ErrorCode::format,
                              fmt::format("tensor '{}' is {}x{}x{}, expected {} experts of {}x{}", name, t->ne[2],
                                          t->ne[1], t->ne[0], spec.n_expert, parts[i].rows, parts[i].in));
        }
        PH_TRY(check_runs(t));
        BoundExperts& e = bound.experts[i];
        set_matrix(e, t, parts[i].in, parts[i].rows);
        e.data = t->data + e.expert_stride * layout.expert_begin;
        if (!parts[i].bias.empty()) {
            named.weight = parts[i].bias;
            const std::string bias_name = arch::weight_name(named, layer);
            const GgufTensorInfo* b = model.find_tensor(bias_name);
            if (b == nullptr) {
                return make_error(ErrorCode::format, fmt::format("the model has no tensor '{}'", bias_name));
            }
            if (b->type != GgmlType::f32 || b->ne[0] != e.rows || b->ne[1] != spec.n_expert || b->ne[2] != 1) {
                return make_error(ErrorCode::format, fmt::format("tensor '{}' must be F32 with {} experts of {} "
                                                                 "values",
                                                                 bias_name, spec.n_expert, e.rows));
            }
            e.bias = reinterpret_cast<const float*>(b->data) + static_cast<size_t>(e.rows) * layout.expert_begin;
        }
    }
    if (!spec.selection_bias.empty()) {
        arch::Op named = op;
        named.weight = spec.selection_bias;
        const std::string name = arch::weight_name(named, layer);
        const GgufTensorInfo* b = model.find_tensor(name);
        if (b == nullptr) return make_error(ErrorCode::format, fmt::format("the model has no tensor '{}'", name));
        if (b->type != GgmlType::f32 || b->ne[0] != spec.n_expert || b->ne[1] != 1) {
            return make_error(ErrorCode::format, fmt::format("tensor '{}' must be F32 with one value per expert ({})",
                                                             name, spec.n_expert));
        }
        bound.selection_bias = reinterpret_cast<const float*>(b->data);
    }
    // The shared expert runs where expert 0 is, so that an all-reduce of the stages' sums
    // adds it once.
    if (spec.n_ff_shared != 0 && layout.expert_begin == 0) {
        const struct {
            const std::string& weight;
            int64_t in, rows;
        } shared[3] = {{spec.shared_gate, hp.n_embd, spec.n_ff_shared},
                       {spec.shared_up, hp.n_embd, spec.n_ff_shared},
                       {spec.shared_down, spec.n_ff_shared, hp.n_embd}};
        for (size_t i = 0; i < 3; ++i) {
            arch::Op named = op;
            named.weight = shared[i].weight;
            const std::string name = arch::weight_name(named, layer);
            const GgufTensorInfo* t = model.find_tensor(name);
            if (t == nullptr) return make_error(ErrorCode::format, fmt::format("the model has no tensor '{}'", name));
            if (t->ne[0] != shared[i].in || t->ne[1] != shared[i].rows || t->ne[2] != 1) {
                return make_error(ErrorCode::format, fmt::format("tensor '{}' is {}x{}, expected {}x{}", name, t->ne[1],
                                                                 t->ne[0], shared[i].rows, shared[i].in));
            }
            PH_TRY(check_runs(t));
            set_matrix(bound.shared[i], t, shared[i].in, shared[i].rows);
        }
    }
    return bound;
}

// An add_row's table: whole rows of the buffer's full width (an encoder's x is never cut), in
// any type the stage reads; row weight_row, or (positions) one row per position of the
// training context.
Result<BoundWeight> bind_row_table(const arch::Hparams& hp, const StageLayout& layout, const Op& op,
                                   const GgufTensorInfo* t) {
    BoundWeight bound;
    bound.op = &op;
    bound.tensor = t;
    bound.type = t->type;
    const auto width = static_cast<int64_t>(layout.full_width(op.dst));
    const int64_t rows = op.weight_row ? int64_t{*op.weight_row} + 1 : int64_t{hp.n_ctx_train};
    if (t->ne[0] != width || t->n_rows() < rows || layout.width(op.dst) != layout.full_width(op.dst)) {
        return make_error(ErrorCode::format,
                          fmt::format("tensor '{}' is {}x{}: expected rows of {} values, at least {} "
                                      "of them{}",
                                      t->name, t->n_rows(), t->ne[0], width, rows,
                                      op.weight_row ? "" : " (one per position of the context)"));
    }
    bound.data = t->data;
    bound.in = width;
    bound.rows = t->n_rows();
    bound.row_stride = row_bytes(type_traits(t->type), static_cast<uint64_t>(width));
    bound.row_bytes = bound.row_stride;
    return bound;
}

}  // namespace

Result<BoundWeight> bind_weight(const GgufModel& model, const arch::Hparams& hp, const StageLayout& layout,
                                const Op& op, uint32_t layer, bool split_reduce, std::string_view backend,
                                const std::function<bool(GgmlType)>& can_run,
                                const std::function<int64_t(GgmlType)>& column_block) {
    BoundWeight bound;
    bound.op = &op;
    if (op.kind == OpKind::moe) return bind_experts(model, hp, layout, op, layer, split_reduce, backend, can_run);
    if (op.weight.empty()) return bound;
    const std::string name = arch::weight_name(op, layer);
    const GgufTensorInfo* t = model.find_tensor(name);
    if (t == nullptr) return make_error(ErrorCode::format, fmt::format("the model has no tensor '{}'", name));
    if (t->type != GgmlType::f32 && !can_run(t->type)) {
        return make_error(ErrorCode::unsupported, fmt::format("tensor '{}' has type {}, which the {} backend cannot "
                                                              "run yet",
                                                              name, type_traits(t->type).name, backend));
    }
    bound.tensor = t;
    bound.type = t->type;
    int64_t want0 = 0, want1 = 1;
    switch (op.kind) {
        case OpKind::matmul:
            want0 = static_cast<int64_t>(layout.full_width(op.a));
            want1 = static_cast<int64_t>(layout.full_width(op.dst));
            break;
        case OpKind::rms_norm:
        case OpKind::layer_norm:
        case OpKind::add_bias:
            want0 = static_cast<int64_t>(layout.full_width(op.dst));
            break;
        case OpKind::add_row:
            return bind_row_table(hp, layout, op, t);
        case OpKind::head_rms_norm:
            want0 = hp.head_dim;
            break;
        case OpKind::attention:  // attention sinks: one logit per query head
            want0 = hp.n_head;
            break;
        default:
            break;
    }
    if (op.weight_row && op.kind != OpKind::matmul && op.kind != OpKind::add_bias) {
        return make_error(ErrorCode::internal, fmt::format("a view of '{}' outside a product or a bias", name));
    }
    if (op.weight_row && op.kind == OpKind::add_bias) {
        // A part of a fused bias (attn_qkv.bias): its values must lie inside.
        if (t->n_rows() != 1 || t->ne[0] < int64_t{*op.weight_row} + want0) {
            return make_error(ErrorCode::format, fmt::format("tensor '{}' has {} values, too few for {} from {}", name,
                                                             t->n_elements, want0, *op.weight_row));
        }
    } else if (op.weight_row) {
        // A part of a fused tensor (Phi-3's attn_qkv, ffn_up): its rows must lie inside.
        if (t->ne[0] != want0 || t->n_rows() < int64_t{*op.weight_row} + want1) {
            return make_error(ErrorCode::format,
                              fmt::format("tensor '{}' is {}x{}, too small for {} rows of {} from row {}", name,
                                          t->n_rows(), t->ne[0], want1, want0, *op.weight_row));
        }
    } else if (t->ne[0] != want0 || t->n_rows() != want1) {
        return make_error(ErrorCode::format, fmt::format("tensor '{}' is {}x{}, expected {}x{}", name, t->ne[0],
                                                         t->n_rows(), want0, want1));
    }
    if (op.kind != OpKind::matmul) {
        if (t->type != GgmlType::f32)
            return make_error(ErrorCode::unsupported, fmt::format("tensor '{}' must be F32", name));
        size_t skip = op.weight_row.value_or(0) + layout.offset(op.dst);
        bound.n_values = layout.width(op.dst);
        if (op.kind == OpKind::head_rms_norm) {
            skip = 0;
            bound.n_values = hp.head_dim;
        } else if (op.kind == OpKind::attention) {  // the stage's query heads
            skip = layout.offset(Buffer::q) / hp.head_dim;
            bound.n_values = layout.n_head;
        }
        bound.values = reinterpret_cast<const float*>(t->data) + skip;
        return bound;
    }
    const TypeTraits& traits = type_traits(t->type);
    const uint64_t full_row = row_bytes(traits, static_cast<uint64_t>(want0));
    const size_t col = layout.offset(op.a);
    const int64_t granule = std::max<int64_t>(column_block(t->type), traits.block_size);
    if (col % traits.block_size != 0 || static_cast<int64_t>(layout.width(op.a)) % granule != 0) {
        return make_error(
            ErrorCode::unsupported,
            fmt::format("tensor '{}' ({}) cannot be split at column {} for {} columns: its blocks hold {} "
                        "values; use layer split",
                        name, traits.name, col, layout.width(op.a), traits.block_size));
    }
    bound.data = t->data + (op.weight_row.value_or(0) + layout.offset(op.dst)) * full_row + row_bytes(traits, col);
    bound.in = static_cast<int64_t>(layout.width(op.a));
    bound.rows = static_cast<int64_t>(layout.width(op.dst));
    bound.row_stride = full_row;
    bound.row_bytes = row_bytes(traits, layout.width(op.a));
    bound.all_reduce = split_reduce && layout.width(op.a) != layout.full_width(op.a) &&
                       layout.width(op.dst) == layout.full_width(op.dst);
    return bound;
}

Result<BoundProgram> bind_program(const GgufModel& model, const arch::Hparams& hp, const arch::StepProgram& program,
                                  const StageLayout& layout, bool embedding, bool output, bool split_reduce,
                                  std::string_view backend, const std::function<bool(GgmlType)>& can_run,
                                  const std::function<int64_t(GgmlType)>& column_block) {
    BoundProgram bound;
    const auto bind = [&](const Op& op, uint32_t layer, std::vector<BoundWeight>& into) -> Result<void> {
        Result<BoundWeight> w = bind_weight(model, hp, layout, op, layer, split_reduce, backend, can_run, column_block);
        if (!w) return w.error();
        into.push_back(*w);
        return {};
    };
    if (embedding) {
        for (const Op& op : program.input) PH_TRY(bind(op, 0, bound.input));
        const GgufTensorInfo* table = model.find_tensor(program.embedding);
        if (table == nullptr) {
            return make_error(ErrorCode::format, fmt::format("the model has no tensor '{}'", program.embedding));
        }
        if (table->ne[0] != hp.n_embd) {
            return make_error(ErrorCode::format, fmt::format("tensor '{}' has rows of {} values, not the model's "
                                                             "embedding width {}",
                                                             table->name, table->ne[0], hp.n_embd));
        }
        // The lookup decodes rows of the types the backend multiplies by.
        if (table->type != GgmlType::f32 && !can_run(table->type)) {
            return make_error(ErrorCode::unsupported,
                              fmt::format("tensor '{}' has type {}, which the {} backend cannot read", table->name,
                                          type_traits(table->type).name, backend));
        }
        bound.embedding = table;
    }
    bound.layers.resize(layout.last_layer - layout.first_layer);
    for (uint32_t l = layout.first_layer; l < layout.last_layer; ++l) {
        for (const Op& op : program.layer_ops(l)) PH_TRY(bind(op, l, bound.layers[l - layout.first_layer]));
    }
    if (output) {
        for (const Op& op : program.head) PH_TRY(bind(op, 0, bound.head));
    }
    if (hp.has_rope_freqs && !bound.layers.empty()) {
        const GgufTensorInfo* f = model.find_tensor(hp.rope_freqs);
        if (f == nullptr)
            return make_error(ErrorCode::format, fmt::format("the model has no tensor '{}'", hp.rope_freqs));
        if (f->type != GgmlType::f32 || f->ne[0] != hp.rope_dims / 2) {
            return make_error(ErrorCode::format, fmt::format("{} must be F32 with rope_dims / 2 = {} values",
                                                             hp.rope_freqs, hp.rope_dims / 2));
        }
        bound.rope_freqs = f;
    }
    return bound;
}

std::string_view buffer_name(Buffer b) {
    switch (b) {
        case Buffer::x:
            return "x";
        case Buffer::norm:
            return "norm";
        case Buffer::tmp:
            return "tmp";
        case Buffer::q:
            return "q";
        case Buffer::k:
            return "k";
        case Buffer::v:
            return "v";
        case Buffer::attn:
            return "attn";
        case Buffer::gate:
            return "gate";
        case Buffer::up:
            return "up";
        case Buffer::logits:
            return "logits";
        case Buffer::router:
            return "router";
    }
    return "?";
}

Result<size_t> buffer_rows(const StageLayout& layout, Buffer b, size_t count, size_t capacity, std::string_view stage) {
    const size_t width = layout.width(b);
    if (width == 0 || count % width != 0 || count > capacity) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("{}: {} values are not whole rows of buffer {} ({} rows of {} values)", stage,
                                      count, buffer_name(b), width == 0 ? 0 : capacity / width, width));
    }
    return count / width;
}

std::string describe_stage(const arch::Hparams& hp, const StageLayout& layout, bool embedding, bool output) {
    std::string part = layout.last_layer > layout.first_layer
                           ? fmt::format("layers {}-{}", layout.first_layer, layout.last_layer - 1)
                           : std::string("no layers");
    if (layout.is_tensor_shard(hp)) {
        const size_t k0 = layout.offset(Buffer::k) / hp.head_dim;
        part += fmt::format(", KV heads {}-{}", k0, k0 + layout.n_head_kv - 1);
        if (hp.is_moe()) {
            part += fmt::format(", experts {}-{}", layout.expert_begin, layout.expert_end - 1);
        } else {
            part += fmt::format(", FFN columns {}-{}", layout.offset(Buffer::gate),
                                layout.offset(Buffer::gate) + layout.width(Buffer::gate) - 1);
        }
    }
    if (hp.is_moe() && layout.ram_expert_layers > layout.first_layer && layout.last_layer > layout.first_layer) {
        const uint32_t last = std::min(layout.ram_expert_layers, layout.last_layer) - 1;
        part += last == layout.first_layer ? fmt::format(", experts of layer {} in RAM", last)
                                           : fmt::format(", experts of layers {}-{} in RAM", layout.first_layer, last);
    }
    if (embedding) part += " + embedding";
    if (output) part += " + output";
    return part;
}

}  // namespace powerhouse
