#include "engine/backend/op_conformance_cases.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace powerhouse::test {

namespace {

using arch::Buffer;
using arch::Op;
using arch::OpKind;

// The tensor an op reads, named as the op names it for layer 0: values uniform in [lo, hi)
// from std::mt19937(seed).
TensorData weight_of(const Op& op, GgmlType type, std::vector<int64_t> dims, float lo, float hi, uint32_t seed) {
    return TensorData{arch::weight_name(op, 0), type, std::move(dims), lo, hi, seed};
}

// Element-wise ops see single tokens, a few, a group of eight and a prompt of 33 (odd, past
// one SIMD register and one group of the GPU's products).
std::vector<Step> elementwise_steps() {
    return {{1, 0}, {3, 1}, {8, 4}, {33, 12}};
}

// The widths added for the GPU (see OpCase::gpu_shape).
bool gpu_width(int64_t width) {
    return width % 8 == 0 && width % 32 != 0;
}

OpCase elementwise_case(std::string name, arch::Hparams hp, Op op, uint32_t seed, int64_t width) {
    OpCase c;
    c.gpu_shape = gpu_width(width);
    c.name = std::move(name);
    c.hp = std::move(hp);
    c.op = std::move(op);
    c.steps = elementwise_steps();
    c.seed = seed;
    return c;
}

}  // namespace

// Widths: odd ones (7, 577, 4099 and the like) for the CPU's SIMD tails, and multiples of 8
// that are not multiples of 32 (72, 584, 4104) for the GPU, whose stage takes only those
// (cuda_stage_supports: the planner refuses the others before anything loads).
std::vector<OpCase> rms_norm_cases() {
    std::vector<OpCase> cases;
    for (const uint32_t width : {7u, 64u, 577u, 584u, 4099u, 4104u}) {
        Op op{OpKind::rms_norm, Buffer::norm, Buffer::x, Buffer::x, "blk.{}.attn_norm.weight"};
        OpCase c =
            elementwise_case("width_" + std::to_string(width), tiny_hparams(width, 1, 1, 32, 32), op, width, width);
        if (width == 577 || width == 584) c.hp.rms_eps = 1e-6f;
        c.tensors.push_back(weight_of(op, GgmlType::f32, {width}, 0.5f, 1.5f, width));
        cases.push_back(std::move(c));
    }
    return cases;
}

std::vector<OpCase> head_rms_norm_cases() {
    std::vector<OpCase> cases;
    for (const uint32_t head_dim : {16u, 64u, 80u, 128u}) {
        Op op{OpKind::head_rms_norm, Buffer::q, Buffer::q, Buffer::x, "blk.{}.attn_q_norm.weight"};
        OpCase c =
            elementwise_case("head_" + std::to_string(head_dim), tiny_hparams(64, 3, 1, head_dim, 64), op, head_dim, 64);
        c.tensors.push_back(weight_of(op, GgmlType::f32, {head_dim}, 0.5f, 1.5f, head_dim));
        cases.push_back(std::move(c));
    }
    return cases;
}

std::vector<OpCase> matmul_cases() {
    std::vector<OpCase> cases;
    uint32_t seed = 100;
    for (const GgmlType type : kMatmulTypes) {
        // Rows must be whole blocks: of the type, and of 8 values for the float types (the
        // GPU's products take them 8 at a time). Three blocks, and one block past the GPU's
        // tiles of 2048 weights (a short last tile); an odd number of rows (7, 37: the CPU's
        // tails) and a number that is a multiple of 8 but not of 32 (24, 40: the GPU stage
        // takes a feed-forward width that is a multiple of 8 only), and odd numbers of
        // tokens. Rows of three 32-blocks (54 bytes of Q4_0, 102 of Q8_0) or of Q2_K, Q3_K
        // and Q6_K are not 16-byte aligned, and the GPU then reads them in place, unstaged.
        // 32 rows: whole groups of sixteen, which the CPU interleaves for Q4_K and Q6_K
        // (backend/cpu/interleave.h), checked against the product of the file's rows.
        const auto block = static_cast<int64_t>(std::max<uint32_t>(8, type_traits(type).block_size));
        for (const auto& [in, rows] : {std::pair<int64_t, int64_t>{3 * block, 7},
                                       {3 * block, 24},
                                       {3 * block, 32},
                                       {2048 + block, 37},
                                       {2048 + block, 40}}) {
            for (const int tokens : {1, 3, 8, 33}) {
                Op op{OpKind::matmul, Buffer::gate, Buffer::x, Buffer::x, "blk.{}.ffn_gate.weight"};
                ++seed;
                OpCase c;
                c.name = std::string(type_traits(type).name) + "_in_" + std::to_string(in) + "_rows_" +
                         std::to_string(rows) + "_tokens_" + std::to_string(tokens);
                c.hp = tiny_hparams(static_cast<uint32_t>(in), 1, 1, 32, static_cast<uint32_t>(rows));
                c.op = op;
                c.tensors.push_back(weight_of(op, type, {in, rows}, -1.0f, 1.0f, seed));
                c.steps = {{tokens, 0}};
                c.seed = seed;
                c.gpu_shape = gpu_width(rows);
                cases.push_back(std::move(c));
            }
        }
    }
    return cases;
}

std::vector<OpCase> add_bias_cases() {
    std::vector<OpCase> cases;
    for (const uint32_t width : {7u, 67u, 72u, 4099u, 4104u}) {
        Op op{OpKind::add_bias, Buffer::x, Buffer::x, Buffer::x, "blk.{}.attn_q.bias"};
        OpCase c = elementwise_case("width_" + std::to_string(width), tiny_hparams(width, 1, 1, 32, 32), op, width + 1,
                                    width);
        c.tensors.push_back(weight_of(op, GgmlType::f32, {width}, -1.0f, 1.0f, width + 1));
        cases.push_back(std::move(c));
    }
    return cases;
}

std::vector<OpCase> rope_cases() {
    struct Shape {
        uint32_t head_dim, rope_dims;
        float base, freq_scale;
    };
    // Llama 3 (whole head), a partial rotary head with linear scaling (the last half of each
    // head untouched), and a head of 80 (Phi-2's size).
    const Shape shapes[] = {{128, 128, 500000.0f, 1.0f}, {64, 32, 10000.0f, 0.25f}, {80, 80, 1e6f, 1.0f}};
    std::vector<OpCase> cases;
    uint32_t seed = 300;
    for (const Shape& s : shapes) {
        for (const bool neox : {false, true}) {
            for (const bool freqs : {false, true}) {
                Op op{OpKind::rope, Buffer::q, Buffer::q, Buffer::x, ""};
                OpCase c;
                c.name = std::string(neox ? "neox" : "normal") + "_head_" + std::to_string(s.head_dim) + "_dims_" +
                         std::to_string(s.rope_dims) + (freqs ? "_rope_freqs" : "");
                c.hp = tiny_hparams(64, 3, 1, s.head_dim, 64);
                c.hp.rope_dims = s.rope_dims;
                c.hp.rope_layout = neox ? arch::RopeLayout::neox : arch::RopeLayout::normal;
                c.hp.layers[0].rope_base = s.base;
                c.hp.layers[0].rope_freq_scale = s.freq_scale;
                c.hp.has_rope_freqs = freqs;
                c.op = op;
                ++seed;
                if (freqs)
                    c.tensors.push_back({"rope_freqs.weight", GgmlType::f32, {s.rope_dims / 2}, 1.0f, 32.0f, seed});
                // Positions far from 0 too, where the angles are large (ggml's f32 recurrence).
                c.n_ctx = 1100;
                c.steps = {{8, 0}, {1, 8}, {3, 1000}, {33, 1040}};
                c.seed = seed;
                cases.push_back(std::move(c));
            }
        }
    }
    // The keys: n_head_kv heads.
    OpCase k = cases[1];
    k.name = "normal_keys_head_128_dims_128_rope_freqs";
    k.op = Op{OpKind::rope, Buffer::k, Buffer::k, Buffer::x, ""};
    k.hp.n_head_kv = 3;
    k.hp.n_head = 6;
    cases.push_back(std::move(k));
    // Mistral 3's queries: the rotation, then Llama 4's attention temperature in steps of 16
    // positions (the steps above cross 0, 1, 62 and 65 of them).
    OpCase t = cases[0];
    t.name = "normal_head_128_dims_128_temperature";
    t.op.value = 0.1f;
    t.hp.attn_temperature = 0.1f;
    t.hp.attn_temperature_length = 16;
    cases.push_back(std::move(t));
    return cases;
}

std::vector<OpCase> attention_cases() {
    struct Shape {
        KvCacheType kv;
        uint32_t head_dim, n_head, n_head_kv, window;
        float scale;  // 0: 1 / sqrt(head_dim)
    };
    std::vector<Shape> shapes;
    for (const uint32_t head_dim : {16u, 64u, 80u, 128u}) {
        for (const uint32_t window : {0u, 7u}) {
            shapes.push_back({KvCacheType::f16, head_dim, 4, 2, window, 0.0f});
            // A Q8_0 cache holds blocks of 32 values of one head.
            if (head_dim % 32 == 0) shapes.push_back({KvCacheType::q8_0, head_dim, 4, 2, window, 0.0f});
        }
    }
    shapes.push_back({KvCacheType::f16, 64, 3, 3, 0, 0.0f});    // one KV head per query head
    shapes.push_back({KvCacheType::q8_0, 64, 8, 1, 0, 0.25f});  // one KV head for all, Gemma's own scale
    std::vector<OpCase> cases;
    uint32_t seed = 500;
    for (const Shape& s : shapes) {
        OpCase c;
        c.name = std::string(s.kv == KvCacheType::q8_0 ? "Q8_0" : "F16") + "_head_" + std::to_string(s.head_dim) +
                 "_heads_" + std::to_string(s.n_head) + "_kv_" + std::to_string(s.n_head_kv) +
                 (s.window != 0 ? "_window_" + std::to_string(s.window) : "") + (s.scale != 0 ? "_scale_0_25" : "");
        c.hp = tiny_hparams(64, s.n_head, s.n_head_kv, s.head_dim, 64);
        c.hp.layers[0].window = s.window;
        c.op = Op{OpKind::attention, Buffer::attn, Buffer::q, Buffer::x, "", s.scale};
        c.kv = s.kv;
        // Every position from 0 (the cache is read up to each token's own), in prompts and
        // single tokens, past the GPU's attention chunks of n_ctx / 4 = 128 positions.
        c.n_ctx = 512;
        c.steps = {{8, 0}, {1, 8}, {3, 9}, {33, 12}, {33, 45}, {33, 78}, {33, 111}, {1, 144}, {1, 145}};
        c.seed = ++seed;
        cases.push_back(std::move(c));
    }
    return cases;
}

std::vector<OpCase> glu_cases(OpKind kind) {
    std::vector<OpCase> cases;
    for (const uint32_t width : {7u, 67u, 72u, 4099u, 4104u}) {
        const Op op{kind, Buffer::gate, Buffer::gate, Buffer::up, ""};
        cases.push_back(
            elementwise_case("width_" + std::to_string(width), tiny_hparams(64, 1, 1, 32, width), op, width + 2, width));
    }
    return cases;
}

std::vector<OpCase> add_cases() {
    std::vector<OpCase> cases;
    for (const uint32_t width : {7u, 67u, 72u, 4099u, 4104u}) {
        const Op op{OpKind::add, Buffer::x, Buffer::x, Buffer::tmp, ""};
        cases.push_back(
            elementwise_case("width_" + std::to_string(width), tiny_hparams(width, 1, 1, 32, 32), op, width + 3, width));
    }
    return cases;
}

std::vector<OpCase> scale_cases() {
    struct Shape {
        uint32_t width;
        float value;
        const char* name;
    };
    const Shape shapes[] = {{7, 0.125f, "width_7_by_0_125"},
                            {67, -3.3f, "width_67_by_minus_3_3"},
                            {72, 2.5f, "width_72_by_2_5"},
                            {4099, 0.0883883f, "width_4099_by_0_0883883"},
                            {4104, -0.0625f, "width_4104_by_minus_0_0625"}};
    std::vector<OpCase> cases;
    for (const Shape& s : shapes) {
        // Out of place: tmp = x * value.
        const Op op{OpKind::scale, Buffer::tmp, Buffer::x, Buffer::x, "", s.value};
        cases.push_back(elementwise_case(s.name, tiny_hparams(s.width, 1, 1, 32, 32), op, s.width + 4, s.width));
    }
    return cases;
}

// An encoder's one-op model: the CUDA stage refuses it (OpCase::cuda_supported).
arch::Hparams encoder_hparams(uint32_t n_embd, uint32_t n_head, uint32_t head_dim, uint32_t n_ff) {
    arch::Hparams hp = tiny_hparams(n_embd, n_head, n_head, head_dim, n_ff);
    hp.architecture = "bert";
    hp.embedding_only = true;
    hp.causal = false;
    return hp;
}

std::vector<OpCase> layer_norm_cases() {
    std::vector<OpCase> cases;
    for (const uint32_t width : {7u, 64u, 384u, 577u, 4099u}) {
        Op op{OpKind::layer_norm, Buffer::x, Buffer::x, Buffer::x, "blk.{}.attn_output_norm.weight"};
        OpCase c =
            elementwise_case("width_" + std::to_string(width), encoder_hparams(width, 1, 32, 32), op, width + 5, width);
        c.hp.norm_eps = width == 384 ? 1e-12f : 1e-5f;  // bge's, and a larger one
        c.tensors.push_back(weight_of(op, GgmlType::f32, {width}, 0.5f, 1.5f, width + 5));
        cases.push_back(std::move(c));
    }
    // Out of place: norm = layer_norm(x).
    OpCase c = cases[1];
    c.name = "width_64_out_of_place";
    c.op.dst = Buffer::norm;
    cases.push_back(std::move(c));
    return cases;
}

std::vector<OpCase> gelu_cases() {
    std::vector<OpCase> cases;
    for (const uint32_t width : {7u, 67u, 1536u, 4099u}) {
        const Op op{OpKind::gelu, Buffer::up, Buffer::up, Buffer::x, ""};
        cases.push_back(elementwise_case("width_" + std::to_string(width), encoder_hparams(64, 1, 32, width), op,
                                         width + 6, width));
    }
    return cases;
}

std::vector<OpCase> add_row_cases() {
    std::vector<OpCase> cases;
    uint32_t seed = 700;
    // Position tables (one row per position of a 64-token context) in the types a converted
    // BERT holds them in, and the fixed row of a token-type table (row 1 of 2, so that a row
    // taken from the wrong place shows).
    for (const GgmlType type : {GgmlType::f32, GgmlType::f16, GgmlType::q8_0}) {
        for (const uint32_t width : {64u, 384u}) {
            for (const bool fixed : {false, true}) {
                Op op{OpKind::add_row, Buffer::x, Buffer::x, Buffer::x,
                      fixed ? "token_types.weight" : "position_embd.weight"};
                if (fixed) op.weight_row = 1;
                OpCase c = elementwise_case(std::string(type_traits(type).name) + "_width_" + std::to_string(width) +
                                                (fixed ? "_row_1" : "_positions"),
                                            encoder_hparams(width, 1, 32, 32), op, ++seed, width);
                c.hp.n_ctx_train = 64;
                c.tensors.push_back(weight_of(op, type, {width, fixed ? 2 : 64}, -1.0f, 1.0f, seed));
                cases.push_back(std::move(c));
            }
        }
    }
    return cases;
}

std::vector<OpCase> full_attention_cases() {
    std::vector<OpCase> cases;
    uint32_t seed = 800;
    for (const uint32_t head_dim : {16u, 32u, 64u}) {
        for (const KvCacheType kv : {KvCacheType::f16, KvCacheType::q8_0}) {
            if (kv == KvCacheType::q8_0 && head_dim % 32 != 0) continue;
            OpCase c;
            c.name = std::string(kv == KvCacheType::q8_0 ? "Q8_0" : "F16") + "_head_" + std::to_string(head_dim);
            c.hp = encoder_hparams(64, 4, head_dim, 64);
            c.op = Op{OpKind::attention, Buffer::attn, Buffer::q,
                      Buffer::x,         "",           1.0f / std::sqrt(static_cast<float>(head_dim))};
            c.kv = kv;
            // Whole inputs, as an encoder takes them, and later batches that read the earlier
            // positions too (a row sees its sequence's positions up to the batch's last).
            c.n_ctx = 512;
            c.steps = {{1, 0}, {8, 1}, {33, 9}, {3, 42}, {40, 45}};
            c.seed = ++seed;
            cases.push_back(std::move(c));
        }
    }
    return cases;
}

}  // namespace powerhouse::test
