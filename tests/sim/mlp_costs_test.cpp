// Tests for sim/src/mlp_costs.cpp: FLOPs and bytes worked by hand for a tiny MLP on a device
// doing exactly 1 FLOP per ns, with and without recompute, under sgd and adam.
#include <gtest/gtest.h>

#include "sim_test_util.h"
#include "stagecraft/sim/cost_models.h"

namespace stagecraft::sim {
namespace {

// b = 8, h = 16: 2·8·256 = 4096 FLOPs per layer and pass; params 256 + 16 = 272 per layer.
TEST(MlpCosts, TinyMlp) {
  Scenario s = testing::UnitScenario(2, "gpipe", 8);
  s.model.mlp = MlpSpec{4, 16};
  CostTable t = BuildCosts(s, 2);
  EXPECT_EQ(t.source, "mlp");
  ASSERT_EQ(t.stages.size(), 2u);
  for (size_t st = 0; st < t.stages.size(); ++st) {
    const StageCost& c = t.stages[st];
    EXPECT_EQ(c.forward_ns, 2 * 4096);
    EXPECT_EQ(c.backward_input_ns, 2 * 4096);
    EXPECT_EQ(c.backward_weight_ns, 2 * 4096);
    EXPECT_EQ(c.weight_bytes, 2 * 272 * 4);
    EXPECT_EQ(c.grad_bytes, 2 * 272 * 4);
    EXPECT_EQ(c.optimizer_bytes, 2 * 272 * 4);  // sgd with momentum 0.9
    // Input and pre-activation per layer; the last stage also keeps the loss gradient (b·h).
    EXPECT_EQ(c.activation_bytes, 2 * 2 * 8 * 16 * 4 + (st == 1 ? 8 * 16 * 4 : 0));
    EXPECT_EQ(c.w_stash_bytes, 2 * 2 * 8 * 16 * 4);  // input and dz per layer
    EXPECT_EQ(c.send_bytes, 8 * 16 * 4);
  }
  s.pipeline.recompute = Recompute::kFull;
  s.has_training = true;
  s.training.optimizer = Optimizer::kAdam;
  s.training.dtype = Dtype::kBf16;  // the GEMMs' precision: the MLP's tensors stay fp32
  t = BuildCosts(s, 4);  // one layer per stage
  EXPECT_EQ(t.stages[3].forward_ns, 4096);
  EXPECT_EQ(t.stages[3].backward_input_ns, 2 * 4096);
  EXPECT_EQ(t.stages[2].activation_bytes, 8 * 16 * 4);      // the layer's input only
  EXPECT_EQ(t.stages[3].activation_bytes, 2 * 8 * 16 * 4);  // plus the loss gradient
  EXPECT_EQ(t.stages[3].recompute_bytes, 2 * 8 * 16 * 4);   // its layer's, rebuilt in the backward
  EXPECT_EQ(t.stages[3].weight_bytes, 272 * 4);
  EXPECT_EQ(t.stages[3].optimizer_bytes, 272 * 8);
}

}  // namespace
}  // namespace stagecraft::sim
