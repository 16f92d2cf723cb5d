// Tests for sim/src/costs.cpp: FLOPs and bytes worked by hand for a tiny transformer and MLP on
// a device doing exactly 1 FLOP per ns, the chunk split of explicit costs, profiles, precedence,
// and the parameter count of the shipped GPT-1.3B scenario.
#include "stagecraft/sim/costs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "sim_test_util.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::PosOf;
using testing::ScratchDir;

// 2 GFLOP/s at efficiency 0.5: one FLOP takes one nanosecond.
Scenario Base(int ranks) { return testing::UnitScenario(ranks, "gpipe"); }

// b = 2, s = 4, h = 8, a = 2, V = 10, bf16. Per layer:
//   forward FLOPs 24·2·4·64 + 4·2·16·8 = 12288 + 1024 = 13312; LM head 2·2·4·8·10 = 1280
//   params 12·64 + 13·8 = 872; embeddings (10 + 4)·8 = 112 on the first stage; LM head 10·8 +
//   final LayerNorm 2·8 = 96 on the last
//   activations 4·2·8·(34 + 5·2·4/8) = 64·39 = 2496 bytes; w_stash 7·64·2 = 896; send 64·2 = 128;
//   the last stage's logits gradient 4·2·10·2 = 160 bytes
Scenario TinyTransformer() {
  Scenario s = Base(2);
  s.model.transformer = TransformerSpec{4, 8, 2, 4, 10, "bf16"};
  s.pipeline.microbatch_size = 2;
  return s;
}

TEST(BuildCosts, TinyTransformer) {
  const CostTable t = BuildCosts(TinyTransformer(), 2);
  EXPECT_EQ(t.source, "transformer");
  EXPECT_EQ(t.p2p_latency_ns, 0);
  ASSERT_EQ(t.stages.size(), 2u);
  const StageCost& first = t.stages[0];
  EXPECT_EQ(first.forward_ns, 2 * 13312);
  EXPECT_EQ(first.backward_input_ns, 2 * 13312);
  EXPECT_EQ(first.backward_weight_ns, 2 * 13312);
  EXPECT_EQ(first.weight_bytes, (2 * 872 + 112) * 2);
  EXPECT_EQ(first.grad_bytes, (2 * 872 + 112) * 2);
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

TEST(BuildCosts, TransformerRecomputeOptimizerAndDtype) {
  Scenario s = TinyTransformer();
  s.pipeline.recompute = true;
  CostTable t = BuildCosts(s, 2);
  EXPECT_EQ(t.stages[0].activation_bytes, 2 * 64 * 2);  // only each layer's input
  EXPECT_EQ(t.stages[0].backward_input_ns, 2 * 13312 * 2);
  EXPECT_EQ(t.stages[1].backward_input_ns, 2 * 13312 * 2 + 1280);
  EXPECT_EQ(t.stages[1].backward_weight_ns, 2 * 13312 + 1280);

  s = TinyTransformer();
  s.has_training = true;
  s.training.optimizer = "sgd";
  s.training.momentum = 0.9;
  EXPECT_EQ(BuildCosts(s, 2).stages[1].optimizer_bytes, (2 * 872 + 96) * 8);  // master + momentum
  s.training.momentum = 0;
  EXPECT_EQ(BuildCosts(s, 2).stages[1].optimizer_bytes, (2 * 872 + 96) * 4);  // master only

  s = TinyTransformer();
  s.model.transformer->dtype = "fp32";
  t = BuildCosts(s, 2);
  EXPECT_EQ(t.stages[1].weight_bytes, (2 * 872 + 96) * 4);
  EXPECT_EQ(t.stages[1].optimizer_bytes, (2 * 872 + 96) * 8);  // adam fp32: m + v
  EXPECT_EQ(t.stages[0].activation_bytes, 2 * 2496 * 2);
  EXPECT_EQ(t.stages[0].send_bytes, 64 * 4);
}

TEST(BuildCosts, UnevenLayerSplitGivesExtrasToTheFirstStages) {
  Scenario s = TinyTransformer();
  s.model.transformer->layers = 5;
  const CostTable t = BuildCosts(s, 2);
  EXPECT_EQ(t.stages[0].forward_ns, 3 * 13312);
  EXPECT_EQ(t.stages[1].forward_ns, 2 * 13312 + 1280);
  EXPECT_EQ(ErrorOf([&] { BuildCosts(s, 6); }), "model.transformer has 5 layers; it cannot be split over 6 stages");
}

// Balanced splits worked by hand: the minimum over contiguous splits of the costliest stage.
TEST(PartitionLayers, HandWorkedSplits) {
  // [1, 1, 1, 1, 4] in 2 stages: {4, 1} costs max(4, 4) = 4; the even {3, 2} costs 5.
  EXPECT_EQ(PartitionLayers({1, 1, 1, 1, 4}, {0, 0}, "m"), (std::vector<int>{4, 1}));
  // 8 equal layers, 2 units of LM head on the last stage: {5, 3} costs max(5, 3 + 2) = 5.
  EXPECT_EQ(PartitionLayers(std::vector<double>(8, 1.0), {0, 2}, "m"), (std::vector<int>{5, 3}));
  // Uniform layers and no extras: exactly the even split, extras to the first stages.
  EXPECT_EQ(PartitionLayers(std::vector<double>(7, 1.0), {0, 0, 0}, "m"), (std::vector<int>{3, 2, 2}));
  // [5, 1, 1, 1, 1, 1] in 3 stages: the 5 alone, then {3, 2} or {2, 3}; the optimum is 5 and
  // both keep it, so the one nearer the even boundaries (2, 4) wins: {1, 3, 2}.
  EXPECT_EQ(PartitionLayers({5, 1, 1, 1, 1, 1}, {0, 0, 0}, "m"), (std::vector<int>{1, 3, 2}));
  EXPECT_EQ(ErrorOf([] { PartitionLayers({1, 1}, {0, 0, 0}, "model.mlp"); }),
            "model.mlp has 2 layers; it cannot be split over 3 stages");
}

// The tiny transformer's LM head (1280 FLOPs) is 0.096 of a layer (13312): with 5 layers on 2
// stages the balanced split is still {3, 2} (3 vs 2.096); with 4 layers it is {2, 2}.
// The GPT-1.3B head (2·V/(24h(1 + s/6h)) = 1.75 layers) moves a layer off the last stage.
TEST(StageLayers, BalancedFollowsTheLmHead) {
  Scenario s = TinyTransformer();
  s.pipeline.partition = "balanced";
  EXPECT_EQ(StageLayers(s, 2), (std::vector<int>{2, 2}));
  s.model.transformer->layers = 5;
  EXPECT_EQ(StageLayers(s, 2), (std::vector<int>{3, 2}));
  s.model.transformer = TransformerSpec{24, 2048, 16, 2048, 50257, "bf16"};
  // 8 stages of 24 layers: even is 3 each, the last costing 4.75; moving one layer to
  // stage 0.. gives a max of 4 with the last stage holding 2 (+1.75 = 3.75).
  const std::vector<int> split = StageLayers(s, 8);
  EXPECT_EQ(split.back(), 2);
  int total = 0;
  for (int n : split) {
    EXPECT_LE(n, 4);
    total += n;
  }
  EXPECT_EQ(total, 24);
  s.pipeline.partition = "even";
  EXPECT_EQ(StageLayers(s, 8), std::vector<int>(8, 3));
}

TEST(StageLayers, ExplicitCostsHaveNoLayers) {
  Scenario s = Base(2);
  s.model.costs = ExplicitCosts{};
  EXPECT_NE(ErrorOf([&] { StageLayers(s, 2); }).find("no layers to split"), std::string::npos);
}

TEST(BuildCosts, NanosecondsRoundToNearest) {
  Scenario s = TinyTransformer();
  s.topology.device.peak_flops = 3e9;  // 1.5 FLOP/ns at efficiency 0.5
  const CostTable t = BuildCosts(s, 2);
  EXPECT_EQ(t.stages[0].forward_ns, 17749);  // 26624 / 1.5 = 17749.33
  EXPECT_EQ(t.stages[1].forward_ns, 18603);  // 27904 / 1.5 = 18602.67
}

// b = 8, h = 16: 2·8·256 = 4096 FLOPs per layer and pass; params 256 + 16 = 272 per layer.
TEST(BuildCosts, TinyMlp) {
  Scenario s = Base(2);
  s.model.mlp = MlpSpec{4, 16, false, "mse"};
  s.pipeline.microbatch_size = 8;
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
  s.pipeline.recompute = true;
  s.has_training = true;
  s.training.optimizer = "adam";
  t = BuildCosts(s, 4);  // one layer per stage
  EXPECT_EQ(t.stages[3].forward_ns, 4096);
  EXPECT_EQ(t.stages[3].backward_input_ns, 2 * 4096);
  EXPECT_EQ(t.stages[2].activation_bytes, 8 * 16 * 4);      // the layer's input only
  EXPECT_EQ(t.stages[3].activation_bytes, 2 * 8 * 16 * 4);  // plus the loss gradient
  EXPECT_EQ(t.stages[3].optimizer_bytes, 272 * 8);
}

TEST(BuildCosts, ExplicitCostsSplitOverChunks) {
  Scenario s = Base(2);
  ExplicitCosts c;
  c.forward_ns = {10, 7};
  c.backward_input_ns = {3, 3};
  c.backward_weight_ns = {0, 0};
  c.activation_bytes = {1000, 1001};
  c.weight_bytes = {9, 9};
  c.p2p_latency_ns = 250;
  c.send_bytes = 4096;
  s.model.costs = c;
  CostTable t = BuildCosts(s, 2);
  EXPECT_EQ(t.source, "explicit");
  EXPECT_EQ(t.p2p_latency_ns, 250);
  EXPECT_EQ(t.stages[0].forward_ns, 10);
  EXPECT_EQ(t.stages[1].forward_ns, 7);
  EXPECT_EQ(t.stages[1].grad_bytes, 9);
  EXPECT_EQ(t.stages[1].optimizer_bytes, 0);
  EXPECT_EQ(t.stages[1].send_bytes, 4096);

  // v = 3: stage s is rank s % 2, chunk s / 2; 10 = 4 + 3 + 3, 7 = 3 + 2 + 2, 1001 = 334 + 334 + 333.
  t = BuildCosts(s, 6);
  ASSERT_EQ(t.stages.size(), 6u);
  const int64_t forward[] = {4, 3, 3, 2, 3, 2};
  const int64_t activation[] = {334, 334, 333, 334, 333, 333};
  for (int st = 0; st < 6; ++st) {
    SCOPED_TRACE(st);
    EXPECT_EQ(t.stages[st].forward_ns, forward[st]);
    EXPECT_EQ(t.stages[st].backward_input_ns, 1);
    EXPECT_EQ(t.stages[st].backward_weight_ns, 0);
    EXPECT_EQ(t.stages[st].activation_bytes, activation[st]);
    EXPECT_EQ(t.stages[st].weight_bytes, 3);
    EXPECT_EQ(t.stages[st].send_bytes, 4096);
  }
}

const char kProfile[] = R"(device: cpu-core
microbatch_size: 8
send_bytes: 512
layers:
  - {forward: 1ms, backward_input: 2ms, backward_weight: 3ms, activation_bytes: 1KiB, weight_bytes: 10KiB}
  - {forward: 10us, backward_input: 20us, backward_weight: 30us, activation_bytes: 100, weight_bytes: 1000,
     w_stash_bytes: 7, grad_bytes: 500, optimizer_bytes: 2000}
  - {forward: 5ns, backward_input: 6ns, backward_weight: 7ns, activation_bytes: 1, weight_bytes: 2}
)";

TEST(BuildCosts, ProfileSumsLayersPerStage) {
  ScratchDir dir;
  Scenario s = Base(2);
  s.pipeline.microbatch_size = 8;
  s.model.profile_path = dir.Write("profile.yaml", kProfile);
  CostTable t = BuildCosts(s, 2);
  EXPECT_EQ(t.source, "profile:" + s.model.profile_path);
  ASSERT_EQ(t.stages.size(), 2u);  // layers 0-1 on stage 0, layer 2 on stage 1
  EXPECT_EQ(t.stages[0].forward_ns, 1'010'000);
  EXPECT_EQ(t.stages[0].backward_input_ns, 2'020'000);
  EXPECT_EQ(t.stages[0].backward_weight_ns, 3'030'000);
  EXPECT_EQ(t.stages[0].activation_bytes, 1124);
  EXPECT_EQ(t.stages[0].weight_bytes, 11240);
  EXPECT_EQ(t.stages[0].grad_bytes, 10240 + 500);
  EXPECT_EQ(t.stages[0].optimizer_bytes, 2000);
  EXPECT_EQ(t.stages[0].w_stash_bytes, 7);
  EXPECT_EQ(t.stages[0].send_bytes, 512);
  EXPECT_EQ(t.stages[1].forward_ns, 5);
  EXPECT_EQ(t.stages[1].grad_bytes, 2);

  s.pipeline.recompute = true;
  t = BuildCosts(s, 2);
  EXPECT_EQ(t.stages[0].backward_input_ns, 2'020'000 + 1'010'000);
  // The stage's input alone is kept from F to its backward, which rebuilds both layers'.
  EXPECT_EQ(t.stages[0].activation_bytes, 512);
  EXPECT_EQ(t.stages[0].recompute_bytes, 1124);
  EXPECT_EQ(t.stages[1].activation_bytes, 512 + 512);  // and the loss gradient on the last
  EXPECT_EQ(t.stages[1].recompute_bytes, 1);
}

TEST(BuildCosts, PrecedenceProfileThenCostsThenModel) {
  ScratchDir dir;
  Scenario s = Base(2);
  s.pipeline.microbatch_size = 8;
  s.model.mlp = MlpSpec{3, 16, false, "mse"};
  EXPECT_EQ(BuildCosts(s, 2).source, "mlp");
  ExplicitCosts c;
  c.forward_ns = c.backward_input_ns = c.backward_weight_ns = c.activation_bytes = c.weight_bytes = {1, 1};
  s.model.costs = c;
  EXPECT_EQ(BuildCosts(s, 2).source, "explicit");
  s.model.profile_path = dir.Write("profile.yaml", kProfile);
  EXPECT_EQ(BuildCosts(s, 2).source, "profile:" + s.model.profile_path);
}

TEST(BuildCosts, ProfileMustFitTheScenario) {
  ScratchDir dir;
  Scenario s = Base(2);
  s.pipeline.microbatch_size = 4;
  s.model.profile_path = dir.Write("profile.yaml", kProfile);
  const std::string text = kProfile;
  EXPECT_EQ(ErrorOf([&] { BuildCosts(s, 2); }),
            s.model.profile_path + ":" + PosOf(text, "8\n") +
                ": microbatch_size: profile was measured at microbatch_size 8 but pipeline.microbatch_size is 4");
  s.pipeline.microbatch_size = 8;
  s.model.mlp = MlpSpec{4, 16, false, "mse"};
  EXPECT_EQ(ErrorOf([&] { BuildCosts(s, 2); }), s.model.profile_path + ":" + PosOf(text, "- {forward: 1ms") +
                                                    ": layers: expected 4 layers (the scenario's model), got 3");
  s.model.mlp.reset();
  EXPECT_EQ(ErrorOf([&] { BuildCosts(s, 4); }),
            "profile " + s.model.profile_path + " has 3 layers; it cannot be split over 4 stages");
  const std::string bad = std::string(kProfile).replace(text.find("forward: 5ns"), 12, "forwrd: 5ns");
  dir.Write("profile.yaml", bad);
  EXPECT_EQ(ErrorOf([&] {
              BuildCosts(s, 2);
            }).rfind(s.model.profile_path + ":" + PosOf(bad, "forwrd") + ": layers.2: unknown key 'forwrd'", 0),
            0u);
}

// Sizes near 2^63 overflowed the per-stage sums (UB); a profile's sizes are at most 1 PiB each,
// and a stage's sums are taken in double and checked (costs_test's derived-limit cases).
TEST(Profile, SizesAreBoundedSoThatStageSumsCannotOverflow) {
  const std::string text = std::string(kProfile).replace(std::string(kProfile).find("weight_bytes: 10KiB"), 19,
                                                         "weight_bytes: 6000000000000000000");
  EXPECT_EQ(ErrorOf([&] { ProfileFromYaml(text, "p.yaml"); }),
            "p.yaml:" + PosOf(text, "6000000000000000000") +
                ": layers.0.weight_bytes: expected a size of at most 1PiB (the limit per value), got "
                "'6000000000000000000'");
  EXPECT_EQ(ProfileFromYaml(std::string(kProfile).replace(std::string(kProfile).find("512"), 3, "1PiB"), "p.yaml")
                .send_bytes,
            int64_t{1} << 50);
}

TEST(Profile, YamlRoundTrip) {
  ScratchDir dir;
  const Profile p = LoadProfile(dir.Write("profile.yaml", kProfile));
  EXPECT_EQ(p.device, "cpu-core");
  ASSERT_EQ(p.layers.size(), 3u);
  EXPECT_EQ(p.layers[0].grad_bytes, 10240);  // defaults to weight_bytes
  const Profile again = LoadProfile(dir.Write("again.yaml", ProfileToYaml(p)));
  EXPECT_EQ(again.device, p.device);
  EXPECT_EQ(again.microbatch_size, p.microbatch_size);
  EXPECT_EQ(again.send_bytes, p.send_bytes);
  ASSERT_EQ(again.layers.size(), p.layers.size());
  for (size_t i = 0; i < p.layers.size(); ++i) {
    EXPECT_EQ(again.layers[i].forward_ns, p.layers[i].forward_ns);
    EXPECT_EQ(again.layers[i].backward_input_ns, p.layers[i].backward_input_ns);
    EXPECT_EQ(again.layers[i].backward_weight_ns, p.layers[i].backward_weight_ns);
    EXPECT_EQ(again.layers[i].step_ns, p.layers[i].step_ns);
    EXPECT_EQ(again.layers[i].activation_bytes, p.layers[i].activation_bytes);
    EXPECT_EQ(again.layers[i].weight_bytes, p.layers[i].weight_bytes);
    EXPECT_EQ(again.layers[i].w_stash_bytes, p.layers[i].w_stash_bytes);
    EXPECT_EQ(again.layers[i].grad_bytes, p.layers[i].grad_bytes);
    EXPECT_EQ(again.layers[i].optimizer_bytes, p.layers[i].optimizer_bytes);
  }
}

// The optional per-layer `step` (optimizer update time) sums per stage like the other times.
const char kStepProfile[] = R"(microbatch_size: 8
layers:
  - {forward: 1ms, backward_input: 1ms, backward_weight: 1ms, step: 2ms, activation_bytes: 1, weight_bytes: 1}
  - {forward: 1ms, backward_input: 1ms, backward_weight: 1ms, step: 2ms, activation_bytes: 1, weight_bytes: 1}
  - {forward: 1ms, backward_input: 1ms, backward_weight: 1ms, step: 2ms, activation_bytes: 1, weight_bytes: 1}
  - {forward: 1ms, backward_input: 1ms, backward_weight: 1ms, step: 2ms, activation_bytes: 1, weight_bytes: 1}
)";

TEST(BuildCosts, ProfileStepSumsPerStage) {
  ScratchDir dir;
  Scenario s = Base(2);
  s.pipeline.microbatch_size = 8;
  s.model.profile_path = dir.Write("profile.yaml", kStepProfile);
  CostTable t = BuildCosts(s, 2);  // two layers per stage
  ASSERT_EQ(t.stages.size(), 2u);
  for (const StageCost& c : t.stages) {
    EXPECT_EQ(c.step_ns, 4'000'000);
    EXPECT_EQ(c.forward_ns, 2'000'000);
  }
  t = BuildCosts(s, 4);  // one layer per stage (two chunks per rank)
  ASSERT_EQ(t.stages.size(), 4u);
  for (const StageCost& c : t.stages) EXPECT_EQ(c.step_ns, 2'000'000);
}

TEST(BuildCosts, ProfileWithoutStepCostsNoStepTime) {
  ScratchDir dir;
  Scenario s = Base(2);
  s.pipeline.microbatch_size = 8;
  s.model.profile_path = dir.Write("profile.yaml", kProfile);
  for (const StageCost& c : BuildCosts(s, 2).stages) EXPECT_EQ(c.step_ns, 0);
  for (const LayerProfile& l : LoadProfile(s.model.profile_path).layers) EXPECT_EQ(l.step_ns, 0);
}

// ProfileToYaml writes step in exact nanoseconds, so odd values and 0 survive a round trip.
TEST(Profile, YamlRoundTripKeepsStep) {
  ScratchDir dir;
  Profile p = LoadProfile(dir.Write("profile.yaml", kStepProfile));
  ASSERT_EQ(p.layers.size(), 4u);
  EXPECT_EQ(p.layers[0].step_ns, 2'000'000);
  p.layers[1].step_ns = 1'234'567'891;
  p.layers[2].step_ns = 1;
  p.layers[3].step_ns = 0;
  const Profile again = LoadProfile(dir.Write("again.yaml", ProfileToYaml(p)));
  ASSERT_EQ(again.layers.size(), p.layers.size());
  for (size_t i = 0; i < p.layers.size(); ++i) EXPECT_EQ(again.layers[i].step_ns, p.layers[i].step_ns) << "layer " << i;

  Scenario s = Base(2);
  s.pipeline.microbatch_size = 8;
  s.model.profile_path = dir.Path("again.yaml");
  const CostTable t = BuildCosts(s, 2);
  EXPECT_EQ(t.stages[0].step_ns, 2'000'000 + 1'234'567'891);
  EXPECT_EQ(t.stages[1].step_ns, 1);
}

// GPT-3 XL (Brown et al. 2020): 24·(12h² + 13h) + V·h with h = 2048, V = 50257 is
// 24·50,358,272 + 102,926,336 = 1,311,524,864 parameters.
TEST(BuildCosts, ShippedGptScenarioHoldsGpt3XlsParametersAndTheHeadsCopy) {
  const std::string path = std::string(STAGECRAFT_SOURCE_DIR) + "/scenarios/gpt-1.3b-8xh100.yaml";
  const Scenario s = LoadScenario(path, {});
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

TEST(BuildCosts, EveryShippedScenarioHasCosts) {
  const std::filesystem::path scenarios = std::filesystem::path(STAGECRAFT_SOURCE_DIR) / "scenarios";
  for (const auto& entry : std::filesystem::directory_iterator(scenarios)) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    const Scenario s = LoadScenario(entry.path().string(), {});
    const int stages = s.pipeline.ranks * s.pipeline.chunks;
    const CostTable t = BuildCosts(s, stages);
    ASSERT_EQ(static_cast<int>(t.stages.size()), stages);
    for (const StageCost& c : t.stages) EXPECT_GT(c.forward_ns, 0);
  }
}

}  // namespace
}  // namespace stagecraft::sim
