// Tests for sim/src/transformer_costs.cpp: FLOPs and bytes worked by hand for a tiny transformer
// on a device doing exactly 1 FLOP per ns, its precision (training.dtype), and the parameter
// count of the shipped GPT-1.3B scenario.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/sim/cost_models.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;

// b = 2, s = 4, h = 8, a = 2, V = 10, bf16, on 2 GFLOP/s at efficiency 0.5 (one FLOP per ns).
// Per layer:
//   forward FLOPs 24·2·4·64 + 4·2·16·8 = 12288 + 1024 = 13312; LM head 2·2·4·8·10 = 1280
//   params 12·64 + 13·8 = 872; embeddings (10 + 4)·8 = 112 on the first stage; LM head 10·8 +
//   final LayerNorm 2·8 = 96 on the last
//   activations 4·2·8·(34 + 5·2·4/8) = 64·39 = 2496 bytes; w_stash 7·64·2 = 896; send 64·2 = 128;
//   the last stage's logits gradient 4·2·10·2 = 160 bytes
Scenario TinyTransformer() {
  Scenario s = testing::UnitScenario(2, "gpipe", 2);
  s.model.transformer = TransformerSpec{4, 8, 2, 4, 10};
  s.training.dtype = Dtype::kBf16;
  return s;
}

TEST(TransformerCosts, TinyTransformer) {
  const CostTable t = BuildCosts(TinyTransformer(), 2);
  EXPECT_EQ(t.source, "transformer");
  EXPECT_EQ(t.p2p_latency_ns, 0);
  ASSERT_EQ(t.stages.size(), 2u);
  const StageCost& first = t.stages[0];
  EXPECT_EQ(first.forward_ns, 2 * 13312);
  EXPECT_EQ(first.backward_input_ns, 2 * 13312);
  EXPECT_EQ(first.backward_weight_ns, 2 * 13312);
  EXPECT_EQ(first.weight_bytes, (2 * 872 + 112) * 2);
  EXPECT_EQ(first.grad_bytes, (2 * 872 + 112) * 4);  // bf16's gradients in fp32 (Megatron-LM's main_grad)
  EXPECT_EQ(first.optimizer_bytes, (2 * 872 + 112) * 12);  // adam with bf16: master + m + v
  EXPECT_EQ(first.activation_bytes, 2 * 2496);
  EXPECT_EQ(first.w_stash_bytes, 2 * 896);
  EXPECT_EQ(first.send_bytes, 128);
  const StageCost& last = t.stages[1];
  EXPECT_EQ(last.forward_ns, 2 * 13312 + 1280);
  EXPECT_EQ(last.backward_input_ns, 2 * 13312 + 1280);
  EXPECT_EQ(last.backward_weight_ns, 2 * 13312 + 1280);
  EXPECT_EQ(last.weight_bytes, (2 * 872 + 96) * 2);
  EXPECT_EQ(last.optimizer_bytes, (2 * 872 + 96) * 12);
  EXPECT_EQ(last.activation_bytes, 2 * 2496 + 160);
}

TEST(TransformerCosts, RecomputeOptimizerAndPrecision) {
  Scenario s = TinyTransformer();
  s.pipeline.recompute = Recompute::kFull;
  CostTable t = BuildCosts(s, 2);
  EXPECT_EQ(t.stages[0].activation_bytes, 2 * 64 * 2);  // only each layer's input
  EXPECT_EQ(t.stages[0].backward_input_ns, 2 * 13312 * 2);
  EXPECT_EQ(t.stages[1].backward_input_ns, 2 * 13312 * 2 + 1280);
  EXPECT_EQ(t.stages[1].backward_weight_ns, 2 * 13312 + 1280);

  s = TinyTransformer();
  s.has_training = true;
  s.training.optimizer = Optimizer::kSgd;
  s.training.momentum = 0.9;
  EXPECT_EQ(BuildCosts(s, 2).stages[1].optimizer_bytes, (2 * 872 + 96) * 8);  // master + momentum
  s.training.momentum = 0;
  EXPECT_EQ(BuildCosts(s, 2).stages[1].optimizer_bytes, (2 * 872 + 96) * 4);  // master only

  // The run's precision sizes every tensor: fp32 and tf32 keep 4 bytes, fp16 2 like bf16.
  for (const Dtype dtype : {Dtype::kFp32, Dtype::kTf32}) {
    s = TinyTransformer();
    s.training.dtype = dtype;
    t = BuildCosts(s, 2);
    EXPECT_EQ(t.stages[1].weight_bytes, (2 * 872 + 96) * 4);
    EXPECT_EQ(t.stages[1].optimizer_bytes, (2 * 872 + 96) * 8);  // adam fp32: m + v
    EXPECT_EQ(t.stages[0].activation_bytes, 2 * 2496 * 2);
    EXPECT_EQ(t.stages[0].send_bytes, 64 * 4);
  }
  s = TinyTransformer();
  s.training.dtype = Dtype::kFp16;
  EXPECT_EQ(BuildCosts(s, 2).stages[1].weight_bytes, (2 * 872 + 96) * 2);
}

// training.grad_dtype: the first stage's 1856 parameters (2·872 + 112) over D = 2 replicas. bf16
// keeps fp32 gradients unless told (Megatron-LM's default), fp16 its own 2 bytes. The REDUCE_GRAD:
// an all-reduce of the gradients (4 bytes a parameter); with ZeRO-1 their reduce-scatter at 4 and
// the weights' all-gather at 2, as an all-reduce of 3; with param_gather_overlap the reduce-scatter
// alone, half a ring at 4: as an all-reduce of 2.
TEST(TransformerCosts, GradientPrecisionSizesTheGradientsAndTheirReduce) {
  constexpr int64_t kParams = 2 * 872 + 112;
  Scenario s = TinyTransformer();
  s.pipeline.data_parallel = 2;
  StageCost c = BuildCosts(s, 2).stages[0];
  EXPECT_EQ(c.grad_bytes, kParams * 4);
  EXPECT_EQ(c.ReduceBytes(), kParams * 4);
  s.pipeline.zero = 1;
  EXPECT_EQ(BuildCosts(s, 2).stages[0].ReduceBytes(), kParams * 3);
  s.pipeline.param_gather_overlap = true;
  EXPECT_EQ(BuildCosts(s, 2).stages[0].ReduceBytes(), kParams * 2);
  s.training.grad_dtype = Dtype::kBf16;  // --grad-reduce-in-bf16: the reduce-scatter at 2, half a ring
  c = BuildCosts(s, 2).stages[0];
  EXPECT_EQ(c.grad_bytes, kParams * 2);
  EXPECT_EQ(c.ReduceBytes(), kParams);
  s = TinyTransformer();
  s.training.dtype = Dtype::kFp16;
  EXPECT_EQ(BuildCosts(s, 2).stages[0].grad_bytes, kParams * 2);
  s.training.grad_dtype = Dtype::kFp32;  // --accumulate-allreduce-grads-in-fp32
  EXPECT_EQ(BuildCosts(s, 2).stages[0].grad_bytes, kParams * 4);
}

TEST(TransformerCosts, GradientPrecisionAndGatherOverlapBadValuesAreOneLine) {
  const std::string yaml =
      "name: g\ntopology: {device: H100-SXM, nodes: 1, devices_per_node: 1}\n"
      "model: {transformer: {layers: 2, hidden: 512, heads: 8, seq: 128, vocab: 1000}}\n"
      "pipeline: {schedule: 1f1b, ranks: 1, microbatches: 2, zero: 1}\n"
      "training: {optimizer: adam, lr: 0.0001, dtype: bf16}\n";
  const auto error = [&](const std::vector<std::string>& sets) {
    return ErrorOf([&] { LoadScenarioFromText(yaml, "g.yaml", sets); });
  };
  EXPECT_EQ(error({"training.grad_dtype=fp32", "pipeline.param_gather_overlap=true"}), "");
  EXPECT_EQ(error({"training.grad_dtype=bf16"}), "");
  EXPECT_NE(error({"training.grad_dtype=fp16"}).find("training.grad_dtype: expected fp32 or the run's dtype (bf16), got fp16"),
            std::string::npos);
  EXPECT_NE(error({"training.grad_dtype=fp8"}).find("training.grad_dtype"), std::string::npos);
  EXPECT_NE(error({"pipeline.zero=0", "pipeline.param_gather_overlap=true"})
                .find("pipeline.param_gather_overlap: overlaps ZeRO's all-gather of the updated weights with the next "
                      "step: it needs pipeline.zero 1 or 2, got 0"),
            std::string::npos);
}

TEST(TransformerCosts, UnevenLayerSplitGivesExtrasToTheFirstStages) {
  Scenario s = TinyTransformer();
  s.model.transformer->layers = 5;
  const CostTable t = BuildCosts(s, 2);
  EXPECT_EQ(t.stages[0].forward_ns, 3 * 13312);
  EXPECT_EQ(t.stages[1].forward_ns, 2 * 13312 + 1280);
  EXPECT_EQ(ErrorOf([&] { BuildCosts(s, 6); }), "model.transformer has 5 layers; it cannot be split over 6 stages");
}

TEST(TransformerCosts, NanosecondsRoundToNearest) {
  Scenario s = TinyTransformer();
  s.topology.device.peak_flops = 3e9;  // 1.5 FLOP/ns at efficiency 0.5
  const CostTable t = BuildCosts(s, 2);
  EXPECT_EQ(t.stages[0].forward_ns, 17749);  // 26624 / 1.5 = 17749.33
  EXPECT_EQ(t.stages[1].forward_ns, 18603);  // 27904 / 1.5 = 18602.67
}

// GPT-3 XL (Brown et al. 2020): 24·(12h² + 13h) + V·h with h = 2048, V = 50257 is
// 24·50,358,272 + 102,926,336 = 1,311,524,864 parameters.
TEST(TransformerCosts, ShippedGptScenarioHoldsGpt3XlsParametersAndTheHeadsCopy) {
  const std::string path = std::string(STAGECRAFT_SOURCE_DIR) + "/scenarios/gpt-1.3b-8xh100.yaml";
  // On the flat FLOPs model's H100 (the scenario's library device runs the roofline model).
  const Scenario s =
      LoadScenario(path, {"topology.device={name: H100-SXM, peak: 989TFLOPS, memory: 80GiB, efficiency: 0.5}"});
  const CostTable t = BuildCosts(s, 8);
  int64_t weight_bytes = 0;
  for (const StageCost& c : t.stages) weight_bytes += c.weight_bytes;
  // GPT-3 XL's parameters (24 layers of 12h² + 13h, token and position embeddings, the final
  // LayerNorm: 1.32B) plus the LM head's own copy of the token embedding on the last stage.
  constexpr int64_t h = 2048, V = 50257, seq = 2048;
  constexpr int64_t unique = 24 * (12 * h * h + 13 * h) + (V + seq) * h + 2 * h;
  static_assert(unique == 1'315'723'264LL);
  EXPECT_EQ(weight_bytes, (unique + V * h) * 2);
  // 3 layers of 24·4·2048·2048²·(1 + 2048/12288) FLOPs at 989e12 · 0.5 FLOP/s.
  EXPECT_EQ(t.stages[0].forward_ns,
            std::llround(3 * 24.0 * 4 * 2048 * 2048 * 2048 * (1 + 2048.0 / 12288) / 494.5e12 * 1e9));
}

}  // namespace
}  // namespace stagecraft::sim
