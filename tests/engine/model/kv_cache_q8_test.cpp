// SmolLM2 with a Q8_0 KV cache against the same model with the default F16 cache: the
// cache takes about half the bytes, the logits stay close (the quantization error of keys
// and values, about what llama.cpp's -ctk q8_0 -ctv q8_0 adds) and along a greedy continuation the
// Q8_0 model mostly picks the same tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "powerhouse/model.h"
#include "support/test_support.h"
#include "tensor/argmax.h"

namespace powerhouse {
namespace {

Model load(KvCacheType type) {
    ModelOptions options;
    options.n_ctx = 256;
    options.n_threads = 2;
    options.kv_cache_type = type;
    Result<Model> loaded = Model::load(test::test_model_path(), options);
    EXPECT_TRUE(loaded.ok()) << loaded.error().message;
    return std::move(loaded).value();
}

TEST(KvCacheQ8, HalfTheBytesAndCloseLogits) {
    Model f16 = load(KvCacheType::f16);
    Model q8 = load(KvCacheType::q8_0);
    EXPECT_LE(q8.kv_cache_bytes() * 100, f16.kv_cache_bytes() * 55);
    EXPECT_GT(q8.kv_cache_bytes(), 0u);

    const std::vector<TokenId> prompt =
        f16.tokenizer().tokenize("The capital of France is Paris. The capital of Germany is", true, false);
    Result<std::span<const float>> a = f16.decode(prompt);
    ASSERT_TRUE(a.ok()) << a.error().message;
    const std::vector<float> want(a->begin(), a->end());
    Result<std::span<const float>> b = q8.decode(prompt);
    ASSERT_TRUE(b.ok()) << b.error().message;
    float max_diff = 0.0f;
    for (size_t i = 0; i < want.size(); ++i) max_diff = std::max(max_diff, std::fabs((*b)[i] - want[i]));
    std::printf("max |logit difference| F16 vs Q8_0 cache: %.4f\n", max_diff);
    EXPECT_LT(max_diff, 1.5f);  // the bound the llama.cpp reference test allows
    EXPECT_EQ(argmax(*b), argmax(want));

    // The F16 model's greedy continuation, fed to both (so that one near-tie does not end
    // the comparison); the Q8_0 model's choice at each step is counted.
    size_t same = 0;
    const size_t steps = 24;
    TokenId next_a = argmax(want), next_b = argmax(*b);
    for (size_t i = 0; i < steps; ++i) {
        same += next_a == next_b ? 1 : 0;
        const TokenId one[] = {next_a};
        Result<std::span<const float>> la = f16.decode(one);
        ASSERT_TRUE(la.ok());
        next_a = argmax(*la);
        Result<std::span<const float>> lb = q8.decode(one);
        ASSERT_TRUE(lb.ok());
        next_b = argmax(*lb);
    }
    std::printf("greedy tokens equal: %zu of %zu\n", same, steps);
    EXPECT_GE(same, steps * 3 / 4);
}

}  // namespace
}  // namespace powerhouse
