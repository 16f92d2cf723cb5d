// Tests for sim/src/cost_checks.cpp through the cost models: each derived time or size just at
// its limit passes and just past it is refused with one error naming the keys it came from;
// the times are hand-worked from the formulas of each cost model's file.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/scenario/limits.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::ScratchDir;

// One MLP layer per stage on a device of 2 MFLOPS at efficiency 0.5: one FLOP takes 1 us. A
// layer's forward is 2·b·h² FLOPs; its full backward twice that.
Scenario SlowMlp(int hidden) {
  Scenario s = testing::UnitScenario(2, "gpipe");
  s.topology.device.peak_flops = 2e6;
  s.model.mlp = MlpSpec{2, hidden};
  return s;
}

TEST(CostChecks, MlpBackwardAtTheLimit) {
  // h = 30000: backward 4·30000² us = 3600 s exactly, the limit itself.
  const CostTable t = BuildCosts(SlowMlp(30000), 2);
  EXPECT_EQ(t.stages[0].backward_input_ns + t.stages[0].backward_weight_ns, kMaxOpNs);
  EXPECT_EQ(t.stages[0].forward_ns, kMaxOpNs / 2);
  // h = 30001: 4·30001² us = 3600.24 s.
  EXPECT_EQ(ErrorOf([] { BuildCosts(SlowMlp(30001), 2); }),
            "test.yaml: a backward of stage 0 would take 3600.2 s (model.mlp: 1 layer of hidden 30001, microbatch 1, "
            "on topology.device: peak 2e+06 FLOPS x efficiency 0.5), above the limit of 1 h per op");
  // h = 42427: the forward alone, 2·42427² us = 3600.1 s, is refused first.
  EXPECT_EQ(ErrorOf([] { BuildCosts(SlowMlp(42427), 2); }),
            "test.yaml: a forward of stage 0 would take 3600.1 s (model.mlp: 1 layer of hidden 42427, microbatch 1, "
            "on topology.device: peak 2e+06 FLOPS x efficiency 0.5), above the limit of 1 h per op");
}

// One rank of L layers, h = 2^20, s = b = V = a = 1, fp32, SGD without momentum (no optimizer
// state), on 1 EFLOPS (each op takes ms): the weights are 4·(L·(12h² + 13h) + (V + s)h + Vh + 2h)
// bytes, over 1 PiB from L = 22.
TEST(CostChecks, TransformerWeightsOverAPebibyte) {
  const auto scenario = [](int layers) {
    Scenario s = testing::UnitScenario(1, "gpipe");
    s.topology.device.peak_flops = 1e18;
    s.topology.device.efficiency = 1;
    s.model.transformer = TransformerSpec{layers, 1 << 20, 1, 1, 1};
    s.has_training = true;
    s.training.dtype = Dtype::kFp32;
    s.training.optimizer = Optimizer::kSgd;
    s.training.momentum = 0;
    return s;
  };
  const double h = 1 << 20;
  const auto weight_bytes = [&](double layers) { return 4 * (layers * (12 * h * h + 13 * h) + 2 * h + h + 2 * h); };
  ASSERT_LE(weight_bytes(21), static_cast<double>(kMaxValueBytes));
  ASSERT_GT(weight_bytes(22), static_cast<double>(kMaxValueBytes));
  EXPECT_EQ(BuildCosts(scenario(21), 1).stages[0].weight_bytes, static_cast<int64_t>(weight_bytes(21)));
  EXPECT_EQ(ErrorOf([&] { BuildCosts(scenario(22), 1); }),
            fmt::format("test.yaml: the weights of stage 0 would need {:.2g} bytes (model.transformer: 22 layers of "
                        "hidden 1048576, heads 1, seq 1, vocab 1, microbatch 1, on topology.device: peak 1e+18 FLOPS "
                        "x efficiency 1), above the limit of 1 PiB per value",
                        weight_bytes(22)));
}

// seq 2^24 with the 1.3B model's width: the attention term 4·b·s²·h alone is 2.3e18 FLOPs a
// layer, 38 minutes on 989 TFLOPS at 0.5 before the other terms.
TEST(CostChecks, TransformerLongSequenceForward) {
  Scenario s = testing::UnitScenario(1, "gpipe");
  s.topology.device = DeviceSpec::Flat("H100", 989e12, int64_t{80} << 30, 0.5);
  s.model.transformer = TransformerSpec{1, 2048, 16, 1 << 24, 50257};
  s.training.dtype = Dtype::kBf16;
  const std::string error = ErrorOf([&] { BuildCosts(s, 1); });
  const double flops = 24.0 * (1 << 24) * 2048.0 * 2048 + 4.0 * (1 << 24) * double(1 << 24) * 2048 +
                       2.0 * (1 << 24) * 2048 * 50257;
  EXPECT_EQ(error, fmt::format("test.yaml: a forward of stage 0 would take {:.2g} s (model.transformer: 1 layer of "
                               "hidden 2048, heads 16, seq 16777216, vocab 50257, microbatch 1, on topology.device: "
                               "peak 9.89e+14 FLOPS x efficiency 0.5), above the limit of 1 h per op",
                               flops / (989e12 * 0.5)));
}

TEST(CostChecks, ExplicitBackwardAddsItsHalves) {
  Scenario s = testing::UnitScenario(2, "gpipe");
  s.model.costs = ExplicitCosts{};
  ExplicitCosts& c = *s.model.costs;
  c.forward_ns = {1, 1};
  c.backward_input_ns = {1800 * kNsPerS, 1};
  c.backward_weight_ns = {1800 * kNsPerS, 1};
  c.activation_bytes = c.weight_bytes = {0, 0};
  EXPECT_EQ(ErrorOf([&] { BuildCosts(s, 2); }), "");
  c.backward_weight_ns[0] += 1;
  EXPECT_EQ(ErrorOf([&] { BuildCosts(s, 2); }),
            "test.yaml: a backward of stage 0 would take 3600.000000001 s (model.costs: backward_input + "
            "backward_weight of rank 0), above the limit of 1 h per op");
}

// A profile's stage sums its layers: two of 30 minutes fit, two of 30 minutes and 1 ns do not;
// two layers of 1 PiB of weights are 2 PiB on one stage.
TEST(CostChecks, ProfileStageSums) {
  ScratchDir dir;
  const auto scenario = [&](const std::string& forward, const std::string& weights) {
    const std::string layer = "{forward: " + forward + ", backward_input: 0, backward_weight: 0, "
                              "activation_bytes: 0, weight_bytes: " + weights + "}";
    Scenario s = testing::UnitScenario(1, "gpipe");
    testing::ReadProfileInto(&s, dir.Write("p.yaml", "microbatch_size: 1\nlayers: [" + layer + ", " + layer + "]\n"));
    return s;
  };
  EXPECT_EQ(BuildCosts(scenario("1800s", "1KiB"), 1).stages[0].forward_ns, kMaxOpNs);
  EXPECT_EQ(ErrorOf([&] { BuildCosts(scenario("1800000000001ns", "1KiB"), 1); }),
            "test.yaml: a forward of stage 0 would take 3600.000000002 s (model.profile " + dir.Path("p.yaml") +
                ": layers 0..1 on stage 0), above the limit of 1 h per op");
  EXPECT_EQ(ErrorOf([&] { BuildCosts(scenario("1ms", "1PiB"), 1); }),
            "test.yaml: the weights of stage 0 would need 2.3e+15 bytes (model.profile " + dir.Path("p.yaml") +
                ": layers 0..1 on stage 0), above the limit of 1 PiB per value");
}

}  // namespace
}  // namespace stagecraft::sim
