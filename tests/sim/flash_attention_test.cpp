// model.transformer.attention: flash (issue 56: long sequences as trained today): one fused causal
// kernel in place of the materialised scores, worked by hand on a tiny block: the causal half of
// the scores' FLOPs in F (two matmuls) and in I (five), no softmax, dropout or recompute kernels,
// and the activations of selective recompute without its repeated FLOPs.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/gpt_kernels.h"
#include "stagecraft/sim/roofline.h"

namespace stagecraft::sim {
namespace {

bool Has(const std::vector<Kernel>& kernels, const std::string& name) {
  return std::any_of(kernels.begin(), kernels.end(), [&](const Kernel& k) { return k.name == name; });
}

// b = 1, s = 4, h = 8, a = 2 (heads of 4): the unfused scores and context are 2·(2·4·4·4)·2 =
// 512 FLOPs; the fused kernel's two matmuls over the causal half 2·4·2·4·(2·2) = 256, and its
// backward's five 640.
TEST(FlashAttention, KernelsAreTheCausalHalfFused) {
  GptKernelShape g;
  g.microbatch = 1, g.seq = 4, g.hidden = 8, g.heads = 2, g.vocab = 10;
  g.flash = true;
  const std::vector<Kernel> block = GptBlockKernels(g);
  double forward = 0, backward = 0;
  for (const Kernel& k : block) {
    if (k.name == "flash_attention") forward += k.flops;
    if (k.name == "flash_attention.dX") backward += k.flops;
  }
  EXPECT_DOUBLE_EQ(forward, 256);
  EXPECT_DOUBLE_EQ(backward, 640);
  for (const char* gone : {"scores", "softmax", "attention_dropout", "context", "softmax.dX", "scores.dQ"}) {
    EXPECT_FALSE(Has(block, gone)) << gone;
  }
  EXPECT_TRUE(GptRecomputeKernels(g, false).empty());  // selective: the kernel recomputes itself
  g.flash = false;
  EXPECT_TRUE(Has(GptBlockKernels(g), "softmax"));
  EXPECT_FALSE(GptRecomputeKernels(g, false).empty());
}

// The analytical model on the same block (f = 32, GELU, one FLOP per ns): a layer's forward is
// attention's 2·8·24 + 2·8·8 = 512 a token plus its scores, 4·4·8 = 128 unfused or 64 fused, and
// the feed-forward's 2·2·8·32 = 1024: 4 tokens x 1664 = 6656, or x 1600 = 6400. Fused, the
// activations are selective recompute's (no s x s scores kept) with nothing repeated in I.
TEST(FlashAttention, AnalyticalCostsByHand) {
  Scenario s = testing::UnitScenario(1, "gpipe", 1);
  s.model.transformer = TransformerSpec{2, 8, 2, 4, 10};
  s.training.dtype = Dtype::kBf16;
  const CostTable unfused = BuildCosts(s, 1);
  s.model.transformer->attention = AttentionKernel::kFlash;
  const CostTable flash = BuildCosts(s, 1);
  const int64_t head = 2 * 4 * 8 * 10;  // the LM head, 2bshV
  EXPECT_EQ(unfused.stages[0].forward_ns, 2 * 6656 + head);
  EXPECT_EQ(flash.stages[0].forward_ns, 2 * 6400 + head);
  EXPECT_EQ(flash.stages[0].backward_input_ns, flash.stages[0].forward_ns);
  Scenario selective = s;
  selective.model.transformer->attention = AttentionKernel::kUnfused;
  selective.pipeline.recompute = Recompute::kSelective;
  const CostTable kept = BuildCosts(selective, 1);
  EXPECT_EQ(flash.stages[0].activation_bytes, kept.stages[0].activation_bytes);
  EXPECT_LT(flash.stages[0].activation_bytes, unfused.stages[0].activation_bytes);
  EXPECT_GT(kept.stages[0].backward_input_ns, kept.stages[0].forward_ns);  // selective repeats the scores
}

// The fused kernel's GEMM is the one it runs (FlashAttention's Algorithm 1): each thread block an
// output tile of 128 queries by the head's 64, reducing over the keys without writing the scores.
// b = 1, s = 1024 (512 keys a query on average), a = 2 heads of 64: F's two matmuls are
// 2·1024·512·128·2 FLOPs as 4 GEMMs of 1024 x 64 over k = 512. On 32 SMs with 128 x 64 tiles
// they fill one wave, so the GEMM model's per-tile overhead of 128 k-steps costs 128 / 512 of the
// keys' work: the kernel runs at 512 / 640 of the batched rate (charged per block of 128 keys, as
// until 2026-12-02, it halved it).
TEST(FlashAttention, TheFusedKernelReducesOverTheKeys) {
  GptKernelShape g;
  g.microbatch = 1, g.seq = 1024, g.hidden = 128, g.heads = 2, g.vocab = 10;
  g.flash = true;
  DeviceSpec d = DeviceSpec::Flat("toy", 1e12, 1LL << 30, 1.0);
  d.gemm.max_efficiency = 0.5, d.gemm.batched_efficiency = 0.8, d.gemm.k_overhead = 128, d.gemm.sms = 32;
  d.gemm.tiles = {{128, 64}};
  for (const Kernel& k : GptBlockKernels(g)) {
    if (k.name != "flash_attention") continue;
    EXPECT_EQ(k.m, 1024);
    EXPECT_EQ(k.n, 64);
    EXPECT_EQ(k.k, 512);
    EXPECT_EQ(k.batch, 4);
    EXPECT_DOUBLE_EQ(k.flops, 2.0 * 1024 * 512 * 128 * 2);
    const double rate = 1e12 * 0.5 * 0.8 * 512 / 640;
    EXPECT_NEAR(GemmComputeNs(d, 1e12, k.m, k.n, k.k, k.batch, true), k.flops / rate * 1e9, 1e-6);
  }
}

}  // namespace
}  // namespace stagecraft::sim
