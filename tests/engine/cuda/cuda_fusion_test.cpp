// Which ops of the real architectures' step programs the CUDA stage fuses (fusion.h): the
// programs as the architecture files write them, with the blocks of blocks.h, and a few
// programs written here where fusing would change what a later op reads. Pure functions:
// runs without a GPU. (That a fused launch gives the unfused launches' bits is checked on
// the GPU: tests/kernels/matmul_q8_kernel_test.cpp, FusedLaunches.)
#include <gtest/gtest.h>

#include <vector>

#include "arch/blocks.h"
#include "backend/cuda/fusion.h"

namespace powerhouse {
namespace {

using arch::Buffer;
using arch::Op;
using arch::OpKind;

std::vector<const Op*> pointers(const std::vector<Op>& ops) {
    std::vector<const Op*> out;
    for (const Op& op : ops) out.push_back(&op);
    return out;
}

cuda::FusionPlan plan_of(const arch::StepProgram& p) {
    return cuda::plan_fusions(pointers(p.layer), pointers(p.head));
}

// The indices of the ops of `kind` in the layer, in order.
std::vector<int> indices(const arch::StepProgram& p, OpKind kind) {
    std::vector<int> out;
    for (size_t i = 0; i < p.layer.size(); ++i) {
        if (p.layer[i].kind == kind) out.push_back(static_cast<int>(i));
    }
    return out;
}

arch::Hparams hparams() {
    arch::Hparams hp;
    hp.head_dim = 64;
    return hp;
}

TEST(CudaFusion, LlamaFusesBothNormsTheGateAndBothResidualAdds) {
    const arch::Hparams hp = hparams();
    arch::StepProgram p = arch::start_program(hp);
    arch::add_attention(p, hp, arch::AttentionBlock{});
    arch::add_gated_ffn(p, arch::GateActivation::silu);
    arch::add_output_head(p, hp);
    const cuda::FusionPlan plan = plan_of(p);
    const std::vector<int> norms = indices(p, OpKind::rms_norm);
    const std::vector<int> products = indices(p, OpKind::matmul);  // q k v o gate up down
    ASSERT_EQ(norms.size(), 2u);
    ASSERT_EQ(products.size(), 7u);
    EXPECT_EQ(plan.quantize_for[static_cast<size_t>(norms[0])], products[0]);  // attn_norm -> Q
    EXPECT_EQ(plan.quantize_for[static_cast<size_t>(norms[1])], products[4]);  // ffn_norm -> gate
    const int gate = indices(p, OpKind::swiglu).at(0);
    EXPECT_EQ(plan.quantize_for[static_cast<size_t>(gate)], products[6]);  // SwiGLU -> down
    const std::vector<int> ropes = indices(p, OpKind::rope);  // Q, then K: one launch
    ASSERT_EQ(ropes.size(), 2u);
    EXPECT_TRUE(plan.rope_pair_next[static_cast<size_t>(ropes[0])]);
    EXPECT_FALSE(plan.rope_pair_next[static_cast<size_t>(ropes[1])]);
    int fused_norms = 0;
    for (const int q : plan.quantize_for) fused_norms += q >= 0 ? 1 : 0;
    EXPECT_EQ(fused_norms, 3);
    for (size_t i = 0; i < p.layer.size(); ++i) {
        const bool output_product = static_cast<int>(i) == products[3] || static_cast<int>(i) == products[6];
        EXPECT_EQ(plan.residual_next[i], output_product) << "op " << i;
        // Q before K before V, gate before up: one launch each where the types agree.
        const bool before_same_input =
            static_cast<int>(i) == products[0] || static_cast<int>(i) == products[1] || static_cast<int>(i) == products[4];
        EXPECT_EQ(plan.same_input_next[i], before_same_input) << "op " << i;
    }
}

TEST(CudaFusion, APostNormBetweenProductAndAddKeepsTheAddApart) {
    // Gemma 3: the output products' results are normed before the residual add, and the
    // gate is GeGLU.
    const arch::Hparams hp = hparams();
    arch::StepProgram p = arch::start_program(hp);
    arch::add_attention(p, hp, arch::AttentionBlock{.qk_norm = true, .post_norm = true, .query_scale = 0.5f});
    arch::add_gated_ffn(p, arch::GateActivation::gelu, /*post_norm=*/true);
    arch::add_output_head(p, hp);
    const cuda::FusionPlan plan = plan_of(p);
    for (size_t i = 0; i < p.layer.size(); ++i) EXPECT_FALSE(plan.residual_next[i]) << "op " << i;
    const std::vector<int> products = indices(p, OpKind::matmul);
    EXPECT_EQ(plan.quantize_for[static_cast<size_t>(indices(p, OpKind::geglu).at(0))], products.back());
    // The post norms write the buffer the add reads next: nothing to quantize for.
    for (const int i : indices(p, OpKind::rms_norm)) {
        if (p.layer[static_cast<size_t>(i)].dst == Buffer::tmp) {
            EXPECT_EQ(plan.quantize_for[static_cast<size_t>(i)], -1);
        }
    }
}

TEST(CudaFusion, BiasesAfterTheProductsKeepTheirOps) {
    // Qwen 2's Q/K/V biases come after the products (the norm still quantizes for Q);
    // gpt-oss's output bias sits between the output product and the add.
    const arch::Hparams hp = hparams();
    arch::StepProgram p = arch::start_program(hp);
    arch::add_attention(p, hp, arch::AttentionBlock{.qkv_bias = true, .output_bias = true});
    arch::add_gated_ffn(p, arch::GateActivation::silu);
    arch::add_output_head(p, hp);
    const cuda::FusionPlan plan = plan_of(p);
    const std::vector<int> products = indices(p, OpKind::matmul);
    EXPECT_EQ(plan.quantize_for[static_cast<size_t>(indices(p, OpKind::rms_norm).at(0))], products[0]);
    EXPECT_FALSE(plan.residual_next[static_cast<size_t>(products[3])]);  // attn_output, then its bias
    EXPECT_TRUE(plan.residual_next[static_cast<size_t>(products[6])]);   // ffn_down, then the add
}

TEST(CudaFusion, MixtureOfExpertsAddsItsOwnResult) {
    // The routed experts are not a product: their add stays; the norm before them is read
    // by the router's product first.
    arch::Hparams hp = hparams();
    hp.experts.count = 8;
    hp.experts.used = 2;
    hp.experts.n_ff = 64;
    arch::StepProgram p = arch::start_program(hp);
    arch::add_attention(p, hp, arch::AttentionBlock{.qk_norm = true});
    arch::add_moe_ffn(p, arch::routed_experts(hp, arch::ExpertGating::softmax, true));
    arch::add_output_head(p, hp);
    const cuda::FusionPlan plan = plan_of(p);
    const std::vector<int> products = indices(p, OpKind::matmul);  // q k v o router
    ASSERT_EQ(products.size(), 5u);
    EXPECT_EQ(plan.quantize_for[static_cast<size_t>(indices(p, OpKind::rms_norm).at(1))], products[4]);
    EXPECT_TRUE(plan.residual_next[static_cast<size_t>(products[3])]);
    EXPECT_FALSE(plan.residual_next[static_cast<size_t>(products[4])]);
}

TEST(CudaFusion, AProductWhoseResultIsReadAgainIsNotFused) {
    // tmp is read after the add (by a later product, by the next layer's first op, or by
    // the head): the add must leave it written.
    const std::vector<Op> read_later = {
        {OpKind::rms_norm, Buffer::norm, Buffer::x, Buffer::x, "n"},
        {OpKind::matmul, Buffer::tmp, Buffer::norm, Buffer::x, "w"},
        {OpKind::add, Buffer::x, Buffer::x, Buffer::tmp, ""},
        {OpKind::matmul, Buffer::q, Buffer::tmp, Buffer::x, "w2"},
    };
    EXPECT_FALSE(cuda::plan_fusions(pointers(read_later), {}).residual_next[1]);

    const std::vector<Op> read_by_next_layer = {
        {OpKind::add, Buffer::norm, Buffer::x, Buffer::tmp, ""},
        {OpKind::matmul, Buffer::tmp, Buffer::norm, Buffer::x, "w"},
        {OpKind::add, Buffer::x, Buffer::x, Buffer::tmp, ""},
    };
    EXPECT_FALSE(cuda::plan_fusions(pointers(read_by_next_layer), {}).residual_next[1]);

    const std::vector<Op> layer = {
        {OpKind::rms_norm, Buffer::norm, Buffer::x, Buffer::x, "n"},
        {OpKind::matmul, Buffer::tmp, Buffer::norm, Buffer::x, "w"},
        {OpKind::add, Buffer::x, Buffer::x, Buffer::tmp, ""},
    };
    const std::vector<Op> head_reads = {{OpKind::add, Buffer::x, Buffer::x, Buffer::tmp, ""}};
    EXPECT_FALSE(cuda::plan_fusions(pointers(layer), pointers(head_reads)).residual_next[1]);
    EXPECT_TRUE(cuda::plan_fusions(pointers(layer), {}).residual_next[1]);

    // The add must put the sum where one of its operands was (x = x + tmp, or tmp + x).
    const std::vector<Op> elsewhere = {
        {OpKind::matmul, Buffer::tmp, Buffer::norm, Buffer::x, "w"},
        {OpKind::add, Buffer::up, Buffer::x, Buffer::tmp, ""},
    };
    EXPECT_FALSE(cuda::plan_fusions(pointers(elsewhere), {}).residual_next[0]);
    const std::vector<Op> swapped = {
        {OpKind::matmul, Buffer::tmp, Buffer::norm, Buffer::x, "w"},
        {OpKind::add, Buffer::x, Buffer::tmp, Buffer::x, ""},
    };
    EXPECT_TRUE(cuda::plan_fusions(pointers(swapped), {}).residual_next[0]);
}

TEST(CudaFusion, ProductsShareALaunchOnlyOverTheSameUnchangedInput) {
    const std::vector<Op> ops = {
        {OpKind::matmul, Buffer::q, Buffer::norm, Buffer::x, "a"},
        {OpKind::matmul, Buffer::k, Buffer::norm, Buffer::x, "b"},
        {OpKind::matmul, Buffer::v, Buffer::x, Buffer::x, "c"},     // another input...
        {OpKind::matmul, Buffer::norm, Buffer::x, Buffer::x, "d"},  // ...shared with d, which writes e's
        {OpKind::matmul, Buffer::up, Buffer::norm, Buffer::x, "e"},
        {OpKind::matmul, Buffer::up, Buffer::norm, Buffer::x, "f"},  // the same output as e
    };
    const cuda::FusionPlan plan = cuda::plan_fusions(pointers(ops), {});
    EXPECT_EQ(plan.same_input_next, (std::vector<bool>{true, false, true, false, false, false}));
}

TEST(CudaFusion, ANormWhoseResultIsRewrittenFirstQuantizesNothing) {
    const std::vector<Op> rewritten = {
        {OpKind::rms_norm, Buffer::norm, Buffer::x, Buffer::x, "n"},
        {OpKind::scale, Buffer::norm, Buffer::x, Buffer::x, "", 2.0f},
        {OpKind::matmul, Buffer::q, Buffer::norm, Buffer::x, "w"},
    };
    EXPECT_EQ(cuda::plan_fusions(pointers(rewritten), {}).quantize_for[0], -1);
    const std::vector<Op> biased_first = {
        {OpKind::swiglu, Buffer::gate, Buffer::gate, Buffer::up, ""},
        {OpKind::add_bias, Buffer::gate, Buffer::gate, Buffer::x, "b"},
        {OpKind::matmul, Buffer::tmp, Buffer::gate, Buffer::x, "w"},
    };
    EXPECT_EQ(cuda::plan_fusions(pointers(biased_first), {}).quantize_for[0], -1);
}

}  // namespace
}  // namespace powerhouse
