#include "backend/cuda/fusion.h"

#include <cstddef>

namespace powerhouse::cuda {

namespace {

using arch::Buffer;
using arch::Op;
using arch::OpKind;

// Whether the op reads buffer b. Conservative: a and b count as read whatever the kind
// (an op that takes one operand leaves b at x); in-place kinds read their dst; attention
// reads the layer's keys and values too.
bool reads(const Op& op, Buffer b) {
    if (op.a == b || op.b == b) return true;
    switch (op.kind) {
        case OpKind::add_bias:
        case OpKind::rope:
        case OpKind::head_rms_norm:
            return op.dst == b;
        case OpKind::attention:
            return b == Buffer::k || b == Buffer::v;
        default:
            return false;
    }
}

bool writes(const Op& op, Buffer b) {
    return op.dst == b;
}

// Whether the ops, in order, write buffer b before any of them reads it: true (written
// first, or untouched), false (read first); `decided` says whether one of them touched it.
bool written_before_read(std::span<const Op* const> ops, Buffer b, bool& decided) {
    for (const Op* op : ops) {
        if (reads(*op, b)) {
            decided = true;
            return false;
        }
        if (writes(*op, b)) {
            decided = true;
            return true;
        }
    }
    decided = false;
    return true;
}

// Whether the value in buffer b after op `after` of the layer is never read: by the rest of
// the layer, then neither by the next layer (the same ops from the first) nor by the head
// (after the last layer).
bool dead_after(std::span<const Op* const> layer, std::span<const Op* const> head, size_t after, Buffer b) {
    bool decided = false;
    const bool rest = written_before_read(layer.subspan(after + 1), b, decided);
    if (decided) return rest;
    bool next_decided = false, head_decided = false;
    return written_before_read(layer.first(after + 1), b, next_decided) &&
           written_before_read(head, b, head_decided);
}

}  // namespace

FusionPlan plan_fusions(std::span<const Op* const> layer, std::span<const Op* const> head) {
    const size_t n = layer.size();
    FusionPlan plan;
    plan.quantize_for.assign(n, -1);
    plan.residual_next.assign(n, false);
    plan.same_input_next.assign(n, false);
    plan.rope_pair_next.assign(n, false);
    for (size_t i = 0; i < n; ++i) {
        const Op& op = *layer[i];
        if (op.kind == OpKind::rms_norm || op.kind == OpKind::swiglu || op.kind == OpKind::geglu) {
            // The first later op of the layer that touches the result: a product reading it.
            for (size_t k = i + 1; k < n; ++k) {
                const Op& next = *layer[k];
                if (!reads(next, op.dst) && !writes(next, op.dst)) continue;
                if (next.kind == OpKind::matmul && next.a == op.dst && next.dst != op.dst) {
                    plan.quantize_for[i] = static_cast<int>(k);
                }
                break;
            }
        }
        // A pair once: the second of a pair does not start another.
        if (op.kind == OpKind::rope && i + 1 < n && layer[i + 1]->kind == OpKind::rope &&
            layer[i + 1]->dst != op.dst && (i == 0 || !plan.rope_pair_next[i - 1])) {
            plan.rope_pair_next[i] = true;
        }
        if (op.kind == OpKind::matmul && i + 1 < n) {
            const Op& add = *layer[i + 1];
            const Buffer product = op.dst;
            const bool adds_product =
                add.kind == OpKind::add && add.dst != product && (add.a == product) != (add.b == product) &&
                (add.a == add.dst || add.b == add.dst) && op.a != add.dst;
            plan.residual_next[i] = adds_product && dead_after(layer, head, i + 1, product);
            const Op& next = add;
            plan.same_input_next[i] = next.kind == OpKind::matmul && next.a == op.a && op.dst != op.a &&
                                      next.dst != op.a && next.dst != op.dst;
        }
    }
    return plan;
}

}  // namespace powerhouse::cuda
