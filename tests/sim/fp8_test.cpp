// training.fp8: the linear layers' GEMMs on the FP8 tensor cores, worked by hand on a tiny block
// (which GEMMs, their one-byte operands, the casts before F's and I's), timed at the device's FP8
// peak through the same tile model, the weights' cast once a step, and bad values one line each.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/gpt_kernels.h"
#include "stagecraft/sim/roofline.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;

// b = 1, s = 4, h = 8, a = 2, GELU of 32, bf16, unfused attention.
GptKernelShape Tiny(bool fp8) {
  GptKernelShape g;
  g.microbatch = 1, g.seq = 4, g.hidden = 8, g.heads = 2, g.vocab = 10, g.dtype_bytes = 2;
  g.fp8 = fp8;
  return g;
}

std::map<std::string, Kernel> ByName(const std::vector<Kernel>& kernels) {
  std::map<std::string, Kernel> out;
  for (const Kernel& k : kernels) out.emplace(k.name, k);
  return out;
}

TEST(Fp8, LinearGemmsRunInFp8WithTheirInputsCast) {
  const auto plain = ByName(GptBlockKernels(Tiny(false)));
  const auto fp8 = ByName(GptBlockKernels(Tiny(true)));
  for (const char* name : {"qkv", "proj", "fc", "fc2", "qkv.dX", "proj.dX", "fc.dX", "fc2.dX", "qkv.dW", "fc2.dW"}) {
    SCOPED_TRACE(name);
    ASSERT_EQ(fp8.count(name), 1U);
    EXPECT_TRUE(fp8.at(name).fp8);
    EXPECT_FALSE(plain.at(name).fp8);
    EXPECT_DOUBLE_EQ(fp8.at(name).flops, plain.at(name).flops);
  }
  for (const char* name : {"scores", "context", "scores.dQ", "context.dV"}) EXPECT_FALSE(fp8.at(name).fp8) << name;
  // qkv: [4 x 24] = [4 x 8]·[8 x 24]: operands 4·8 + 8·24 = 224 elements at one byte, the output
  // 96 at two: 416 bytes (640 in bf16). Its input cast: 32 elements read at 2, written twice at 1.
  EXPECT_DOUBLE_EQ(plain.at("qkv").bytes, 640);
  EXPECT_DOUBLE_EQ(fp8.at("qkv").bytes, 416);
  ASSERT_EQ(fp8.count("qkv.cast"), 1U);
  EXPECT_EQ(fp8.at("qkv.cast").pass, KernelPass::kF);
  EXPECT_DOUBLE_EQ(fp8.at("qkv.cast").bytes, 32 * 4);
  // fc.dX: [4 x 8] = dY[4 x 32]·W[32 x 8]: the incoming gradient, 128 elements, cast in I.
  EXPECT_DOUBLE_EQ(fp8.at("fc.dX.cast").bytes, 128 * 4);
  EXPECT_EQ(fp8.at("fc.dX.cast").pass, KernelPass::kI);
  // The weight gradients read the casts' transposed copies: nothing cast in W, nor for 16-bit GEMMs.
  for (const auto& [name, k] : fp8) {
    if (name.ends_with(".cast")) {
      EXPECT_NE(k.pass, KernelPass::kW) << name;
      EXPECT_TRUE(fp8.at(name.substr(0, name.size() - 5)).fp8) << name;
    }
  }
  EXPECT_EQ(fp8.count("scores.cast"), 0U);
  // A full recompute repeats F's casts; the LM head and the router stay 16-bit.
  const auto recompute = ByName(GptRecomputeKernels(Tiny(true), true));
  EXPECT_TRUE(recompute.at("recompute.fc").fp8);
  EXPECT_EQ(recompute.count("recompute.fc.cast"), 1U);
  for (const Kernel& k : GptHeadKernels(Tiny(true))) EXPECT_FALSE(k.fp8) << k.name;
  // Current scaling reads each cast's input once more for its maximum: 32 elements at 2 + 2 + 2.
  GptKernelShape current = Tiny(true);
  current.fp8_amax_pass = true;
  EXPECT_DOUBLE_EQ(ByName(GptBlockKernels(current)).at("qkv.cast").bytes, 32 * 6);
  EXPECT_DOUBLE_EQ(Fp8WeightCastKernels(10, 2, true).front().bytes, 10 * 6);
  EXPECT_DOUBLE_EQ(Fp8WeightCastKernels(10, 2).front().bytes, 10 * 4);
  GptKernelShape moe = Tiny(true);
  moe.experts = 4, moe.expert_ffn = 8, moe.local_experts = 2;
  const auto layer = ByName(GptBlockKernels(moe, true));
  EXPECT_FALSE(layer.at("router").fp8);
  EXPECT_TRUE(layer.at("expert.fc").fp8);
}

// training.fp8_dispatch: 4 tokens, top-2 over 4 experts, 2 of them local (GptKernelShape::routed
// 2): 8 routed rows of 8. The up-projection's input is cast before the dispatch, on the 4 tokens
// (32 elements read at 2, written twice at 1: 128 bytes, against 256 for the 8 routed rows), and
// so is the combine's gradient, the down-projection's in I; the permutation moves the FP8 rows,
// 64 elements read and written at 1 + 4/128 bytes (132 bytes, against 256 at bf16). The other
// casts are where they were.
TEST(Fp8, DispatchCastsTheTokensBeforeTheAllToAll) {
  GptKernelShape moe = Tiny(true);
  moe.experts = 4, moe.routed = 2, moe.expert_ffn = 8, moe.local_experts = 2;
  const auto after = ByName(GptBlockKernels(moe, true));
  moe.fp8_dispatch = true;
  const auto before = ByName(GptBlockKernels(moe, true));
  EXPECT_DOUBLE_EQ(after.at("expert.fc.cast").bytes, 64 * 4);
  EXPECT_DOUBLE_EQ(before.at("expert.fc.cast").bytes, 32 * 4);
  EXPECT_DOUBLE_EQ(after.at("expert.fc2.dX.cast").bytes, 64 * 4);
  EXPECT_DOUBLE_EQ(before.at("expert.fc2.dX.cast").bytes, 32 * 4);
  EXPECT_DOUBLE_EQ(after.at("permute").bytes, 64 * 4);
  EXPECT_DOUBLE_EQ(before.at("permute").bytes, 64 * 2 * (1 + 4.0 / 128));
  for (const char* same : {"qkv.cast", "expert.fc2.cast", "expert.fc.dX.cast", "unpermute"}) {
    EXPECT_DOUBLE_EQ(before.at(same).bytes, after.at(same).bytes) << same;
  }
  const auto recomputed = ByName(GptRecomputeKernels(moe, true, true));
  EXPECT_DOUBLE_EQ(recomputed.at("recompute.expert.fc.cast").bytes, 32 * 4);
}

// On the device library's H100 (989.4 TFLOP/s bf16, 1978.9 fp8) an FP8 GEMM's compute time is the
// 16-bit one's at the ratio of the two peaks: the same tiles and waves. A block-scaled one takes
// its file's constants for them (gemm.fp8_blockwise: max_efficiency 0.73 against 0.80,
// k_overhead 416 against 128; the tile chosen is the same, each tile's time scaled alike).
TEST(Fp8, GemmsAtTheDevicesFp8Peak) {
  const Scenario sc = LoadScenarioFromText(
      "name: f\ntopology: {device: H100-SXM, nodes: 1, devices_per_node: 1}\n"
      "model: {transformer: {layers: 2, hidden: 4096, heads: 32, seq: 4096, vocab: 32000, attention: flash}}\n"
      "pipeline: {schedule: 1f1b, ranks: 1, microbatches: 2}\n"
      "training: {optimizer: adam, lr: 0.0001, dtype: bf16, fp8: true}\n",
      "f.yaml", {});
  Kernel gemm;
  gemm.kind = KernelClass::kGemm;
  gemm.m = 4096, gemm.n = 12288, gemm.k = 4096;
  const double bf16 = TimeKernel(gemm, sc.topology.device, 1, 0, 0).compute_ns;
  gemm.fp8 = true;
  EXPECT_NEAR(TimeKernel(gemm, sc.topology.device, 1, 0, 0).compute_ns, bf16 * 989.4 / 1978.9, 1e-6 * bf16);
  gemm.fp8_blockwise = true;
  EXPECT_NEAR(TimeKernel(gemm, sc.topology.device, 1, 0, 0).compute_ns,
              bf16 * 989.4 / 1978.9 * 0.80 / 0.73 * (4096.0 + 416) / (4096 + 128), 1e-6 * bf16);
  // A stage: its F faster; its STEP longer by the cast of its layers' weights (not the embedding's
  // or the LM head's, which stay 16-bit), one memory-bound kernel.
  const Scenario plain = LoadScenarioFromText(
      "name: f\ntopology: {device: H100-SXM, nodes: 1, devices_per_node: 1}\n"
      "model: {transformer: {layers: 2, hidden: 4096, heads: 32, seq: 4096, vocab: 32000, attention: flash}}\n"
      "pipeline: {schedule: 1f1b, ranks: 1, microbatches: 2}\n"
      "training: {optimizer: adam, lr: 0.0001, dtype: bf16}\n",
      "f.yaml", {});
  const StageCost a = BuildCosts(plain, 1).stages[0], b = BuildCosts(sc, 1).stages[0];
  EXPECT_LT(b.forward_ns, a.forward_ns);
  const double params = 2.0 * static_cast<double>(TransformerBlockParams(*sc.model.transformer));
  ASSERT_LT(params, static_cast<double>(a.weight_bytes) / 2);
  double cast = 0;
  for (const TimedKernel& k : TimeKernels(sc, 0, sc.topology.device, Fp8WeightCastKernels(params, 2))) {
    cast += k.time.ns();
  }
  EXPECT_NEAR(static_cast<double>(b.step_ns - a.step_ns), cast, 2);
}

TEST(Fp8, BadValuesAreOneLineAtTheirKey) {
  const std::string yaml =
      "name: f\ntopology: {device: H100-SXM, nodes: 1, devices_per_node: 1}\n"
      "model: {transformer: {layers: 2, hidden: 512, heads: 8, seq: 128, vocab: 1000}}\n"
      "pipeline: {schedule: 1f1b, ranks: 1, microbatches: 2}\n"
      "training: {optimizer: adam, lr: 0.0001, dtype: bf16, fp8: true}\n";
  EXPECT_EQ(ErrorOf([&] { LoadScenarioFromText(yaml, "f.yaml", {}); }), "");
  const auto error = [&](const std::string& set) {
    return ErrorOf([&] { LoadScenarioFromText(yaml, "f.yaml", {set}); });
  };
  EXPECT_NE(error("topology.device=A100-SXM-80GB").find("training.fp8: device A100-SXM-80GB states no fp8 peak"),
            std::string::npos);
  EXPECT_NE(error("training.dtype=fp32").find("training.fp8: casts 16-bit tensors"), std::string::npos);
  EXPECT_NE(error("training.dtype=fp8").find("fp8 stores no tensors"), std::string::npos);
  EXPECT_NE(error("training.fp8=maybe").find("training.fp8"), std::string::npos);
  EXPECT_EQ(error("training.fp8_scaling=current"), "");
  EXPECT_NE(error("training.fp8_scaling=tensorwise").find("training.fp8_scaling"), std::string::npos);
  EXPECT_NE(ErrorOf([&] {
              LoadScenarioFromText(yaml, "f.yaml", {"training.fp8=false", "training.fp8_scaling=current"});
            }).find("training.fp8_scaling: applies to training.fp8: true"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] {
              LoadScenarioFromText(yaml, "f.yaml", {"training.fp8=false", "training.fp8_dispatch=true"});
            }).find("training.fp8_dispatch: applies to training.fp8: true"),
            std::string::npos);
  EXPECT_NE(error("training.fp8_dispatch=true").find("training.fp8_dispatch: sends a MoE layer's tokens to their experts "
                                                     "in FP8: the model has no mixture-of-experts layers"),
            std::string::npos);
  EXPECT_EQ(ErrorOf([&] {
              LoadScenarioFromText(yaml, "f.yaml",
                                   {"model.transformer.moe={experts: 4, top_k: 2}", "training.fp8_dispatch=true"});
            }),
            "");
}

}  // namespace
}  // namespace stagecraft::sim
