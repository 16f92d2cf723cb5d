// The sequential reference trainer against oracles outside it: central finite differences of
// the loss, hand-worked optimizer updates, and the staleness rules worked by hand.
#include "reference.h"

#include "gpt_reference.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace stagecraft::testing {
namespace {

using Params = std::vector<LayerParams>;
using kernels::LossKind;

exec::MlpModel Tiny(LossKind loss, bool residual) {
  return exec::MlpModel{.layers = 3, .hidden = 4, .residual = residual, .loss = loss, .seed = 7};
}

ReferenceConfig TinyConfig(int microbatches, int steps) {
  ReferenceConfig config;
  config.model = Tiny(LossKind::kMse, false);
  config.microbatch_size = 3;
  config.microbatches = microbatches;
  config.steps = steps;
  config.lr = 0.1;
  return config;
}

// |actual − expected| ≤ tol + |expected|·eps, element by element.
void ExpectClose(const std::vector<double>& actual, const std::vector<double>& expected, double tol,
                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tol + 1e-9 * std::abs(expected[i])) << what << " [" << i << "]";
  }
}

void ExpectParams(const ReferenceResult& result, const Params& expected, double tol) {
  ASSERT_EQ(result.weights.size(), expected.size());
  for (size_t l = 0; l < expected.size(); ++l) {
    ExpectClose(result.weights[l], expected[l].weight, tol, "weight of layer " + std::to_string(l));
    ExpectClose(result.biases[l], expected[l].bias, tol, "bias of layer " + std::to_string(l));
  }
}

bool SameWeights(const ReferenceResult& a, const ReferenceResult& b) {
  return a.weights == b.weights && a.biases == b.biases;
}

// p − lr·g, layer by layer.
Params SgdStep(const Params& p, const Params& g, double lr) {
  Params out = p;
  for (size_t l = 0; l < p.size(); ++l) {
    for (size_t i = 0; i < p[l].weight.size(); ++i) out[l].weight[i] -= lr * g[l].weight[i];
    for (size_t i = 0; i < p[l].bias.size(); ++i) out[l].bias[i] -= lr * g[l].bias[i];
  }
  return out;
}

Params Grad(const exec::MlpModel& model, const Params& params, const ReferenceBatch& batch, double* loss = nullptr) {
  Params grad;
  const double l = ReferenceLossAndGrad(model, params, batch, &grad);
  if (loss != nullptr) *loss = l;
  return grad;
}

// ---- (1) The analytic gradient against central finite differences.

class GradientTest : public ::testing::TestWithParam<std::tuple<LossKind, bool>> {};

TEST_P(GradientTest, MatchesCentralFiniteDifferences) {
  const auto [loss_kind, residual] = GetParam();
  const exec::MlpModel model = Tiny(loss_kind, residual);
  Params params = ReferenceInitialParams(model);
  // Non-zero biases, so that a bias missing from the forward would change the loss.
  for (size_t l = 0; l < params.size(); ++l) {
    for (size_t o = 0; o < params[l].bias.size(); ++o) params[l].bias[o] = 0.1 * exec::UniformAt(3, 50 + l, o);
  }
  const ReferenceBatch batch = ReferenceMicrobatch(model, 3, 5);
  const Params grad = Grad(model, params, batch);

  constexpr double kStep = 1e-6;
  double grad_norm = 0.0;
  auto check = [&](double* value, double analytic, const std::string& what) {
    const double saved = *value;
    *value = saved + kStep;
    const double up = ReferenceLossAndGrad(model, params, batch, nullptr);
    *value = saved - kStep;
    const double down = ReferenceLossAndGrad(model, params, batch, nullptr);
    *value = saved;
    const double numeric = (up - down) / (2.0 * kStep);
    EXPECT_NEAR(analytic, numeric, 1e-8 + 1e-6 * std::abs(numeric)) << what;
    grad_norm += analytic * analytic;
  };
  for (size_t l = 0; l < params.size(); ++l) {
    for (size_t i = 0; i < params[l].weight.size(); ++i) {
      check(&params[l].weight[i], grad[l].weight[i], "dW" + std::to_string(l) + "[" + std::to_string(i) + "]");
    }
    for (size_t i = 0; i < params[l].bias.size(); ++i) {
      check(&params[l].bias[i], grad[l].bias[i], "db" + std::to_string(l) + "[" + std::to_string(i) + "]");
    }
  }
  EXPECT_GT(grad_norm, 1e-6);  // the comparison above is not between two zeros
}

INSTANTIATE_TEST_SUITE_P(LossAndResidual, GradientTest,
                         ::testing::Combine(::testing::Values(LossKind::kMse, LossKind::kCrossEntropy),
                                            ::testing::Bool()));

// ---- (2) Optimizer updates worked by hand from the gradient helper.

TEST(ReferenceTest, FlushSgdOneStepIsInitMinusLrTimesMeanGradient) {
  ReferenceConfig config = TinyConfig(/*microbatches=*/2, /*steps=*/1);
  config.momentum = 0.0;
  const Params w0 = ReferenceInitialParams(config.model);
  double loss0 = 0, loss1 = 0;
  const Params g0 = Grad(config.model, w0, ReferenceMicrobatch(config.model, 3, 0), &loss0);
  const Params g1 = Grad(config.model, w0, ReferenceMicrobatch(config.model, 3, 1), &loss1);
  const Params expected = SgdStep(SgdStep(w0, g0, config.lr / 2), g1, config.lr / 2);

  const ReferenceResult result = TrainReference(config);
  ExpectParams(result, expected, 1e-14);
  ASSERT_EQ(result.losses.size(), 1u);
  EXPECT_NEAR(result.losses[0], (loss0 + loss1) / 2, 1e-14);
}

// A dataset of one microbatch: both microbatches of the step train on microbatch 0's data.
TEST(ReferenceTest, ACycledDatasetTrainsOnItsMicrobatchesAgain) {
  ReferenceConfig config = TinyConfig(/*microbatches=*/2, /*steps=*/1);
  config.momentum = 0.0;
  config.dataset_microbatches = 1;
  const Params w0 = ReferenceInitialParams(config.model);
  double loss0 = 0;
  const Params g0 = Grad(config.model, w0, ReferenceMicrobatch(config.model, 3, 0), &loss0);
  const Params expected = SgdStep(SgdStep(w0, g0, config.lr / 2), g0, config.lr / 2);
  const ReferenceResult result = TrainReference(config);
  ExpectParams(result, expected, 1e-14);
  EXPECT_NEAR(result.losses.at(0), loss0, 1e-14);
}

TEST(ReferenceTest, SgdMomentumTwoStepsByHand) {
  ReferenceConfig config = TinyConfig(/*microbatches=*/1, /*steps=*/2);
  config.momentum = 0.9;
  const Params w0 = ReferenceInitialParams(config.model);
  const Params g0 = Grad(config.model, w0, ReferenceMicrobatch(config.model, 3, 0));
  const Params w1 = SgdStep(w0, g0, config.lr);  // v1 = g0
  const Params g1 = Grad(config.model, w1, ReferenceMicrobatch(config.model, 3, 1));
  // v2 = 0.9 g0 + g1
  const Params expected = SgdStep(SgdStep(w1, g0, config.lr * 0.9), g1, config.lr);
  ExpectParams(TrainReference(config), expected, 1e-14);
}

TEST(ReferenceTest, AdamFirstStepMovesEachParameterByLrTimesSign) {
  ReferenceConfig config = TinyConfig(/*microbatches=*/1, /*steps=*/1);
  config.optimizer = "adam";
  config.lr = 1e-3;
  const Params w0 = ReferenceInitialParams(config.model);
  const Params g = Grad(config.model, w0, ReferenceMicrobatch(config.model, 3, 0));
  // Bias-corrected m̂ = g and v̂ = g² after one update: w1 = w0 − lr·g/(|g| + ε).
  Params expected = w0;
  for (size_t l = 0; l < w0.size(); ++l) {
    for (size_t i = 0; i < g[l].weight.size(); ++i) {
      expected[l].weight[i] -= config.lr * g[l].weight[i] / (std::abs(g[l].weight[i]) + 1e-8);
    }
    for (size_t i = 0; i < g[l].bias.size(); ++i) {
      expected[l].bias[i] -= config.lr * g[l].bias[i] / (std::abs(g[l].bias[i]) + 1e-8);
    }
  }
  ExpectParams(TrainReference(config), expected, 1e-12);
}

// ---- (3) Staleness semantics.

TEST(ReferenceTest, TwoBWEqualsFlushForStepZeroOnly) {
  ReferenceConfig flush = TinyConfig(/*microbatches=*/1, /*steps=*/1);
  ReferenceConfig two_bw = flush;
  two_bw.staleness = Staleness::kTwoBW;
  EXPECT_TRUE(SameWeights(TrainReference(flush), TrainReference(two_bw)));

  flush.steps = two_bw.steps = 3;
  const ReferenceResult f = TrainReference(flush);
  const ReferenceResult t = TrainReference(two_bw);
  EXPECT_EQ(f.losses[0], t.losses[0]);
  EXPECT_NE(f.losses[1], t.losses[1]);
  EXPECT_NE(f.losses[2], t.losses[2]);
  EXPECT_FALSE(SameWeights(f, t));
  // Step 1 of 2BW reads version 0.
  const Params w0 = ReferenceInitialParams(flush.model);
  const double loss1 = ReferenceLossAndGrad(flush.model, w0, ReferenceMicrobatch(flush.model, 3, 1), nullptr);
  EXPECT_NEAR(t.losses[1], loss1, 1e-14);
}

TEST(ReferenceTest, TwoBWTwoStepsByHand) {
  ReferenceConfig config = TinyConfig(/*microbatches=*/2, /*steps=*/2);
  config.staleness = Staleness::kTwoBW;
  config.momentum = 0.0;
  const Params w0 = ReferenceInitialParams(config.model);
  auto grads_at = [&](const Params& read, int step) {
    const Params a = Grad(config.model, read, ReferenceMicrobatch(config.model, 3, 2 * step));
    const Params b = Grad(config.model, read, ReferenceMicrobatch(config.model, 3, 2 * step + 1));
    return std::pair{a, b};
  };
  const auto [a0, b0] = grads_at(w0, 0);
  const Params w1 = SgdStep(SgdStep(w0, a0, config.lr / 2), b0, config.lr / 2);
  const auto [a1, b1] = grads_at(w0, 1);  // W(2) = W(1) − lr·grad at W(0)
  const Params w2 = SgdStep(SgdStep(w1, a1, config.lr / 2), b1, config.lr / 2);
  ExpectParams(TrainReference(config), w2, 1e-14);
}

TEST(ReferenceTest, PipeDreamWithOneStageEqualsFlushWithOneMicrobatch) {
  ReferenceConfig flush = TinyConfig(/*microbatches=*/1, /*steps=*/3);
  const ReferenceResult expected = TrainReference(flush);
  for (const std::vector<int>& stages : {std::vector<int>{}, std::vector<int>{3}}) {
    for (const bool vertical_sync : {false, true}) {
      ReferenceConfig pipedream = flush;
      pipedream.staleness = Staleness::kPipeDream;
      pipedream.layers_per_stage = stages;
      pipedream.vertical_sync = vertical_sync;
      const ReferenceResult result = TrainReference(pipedream);
      EXPECT_TRUE(SameWeights(result, expected));
      EXPECT_EQ(result.losses, expected.losses);
    }
  }
}

// Two stages {layer 0}, {layers 1, 2}; microbatches 0 and 1 form one step. Microbatch 1 reads
// stage 0's version max(0, 1 − 2 + 1) = 0 and stage 1's version 1 (vertical sync: version 0).
void CheckTwoStagePipeDream(bool vertical_sync) {
  ReferenceConfig config = TinyConfig(/*microbatches=*/2, /*steps=*/1);
  config.staleness = Staleness::kPipeDream;
  config.layers_per_stage = {1, 2};
  config.vertical_sync = vertical_sync;
  config.momentum = 0.0;
  const Params w0 = ReferenceInitialParams(config.model);
  double loss0 = 0, loss1 = 0;
  const Params g0 = Grad(config.model, w0, ReferenceMicrobatch(config.model, 3, 0), &loss0);
  const Params w1 = SgdStep(w0, g0, config.lr);
  Params read = w1;
  read[0] = w0[0];
  if (vertical_sync) read = w0;
  const Params g1 = Grad(config.model, read, ReferenceMicrobatch(config.model, 3, 1), &loss1);
  const Params w2 = SgdStep(w1, g1, config.lr);

  const ReferenceResult result = TrainReference(config);
  ExpectParams(result, w2, 1e-14);
  ASSERT_EQ(result.losses.size(), 1u);
  EXPECT_NEAR(result.losses[0], (loss0 + loss1) / 2, 1e-14);
}

TEST(ReferenceTest, PipeDreamTwoStagesByHand) { CheckTwoStagePipeDream(false); }
TEST(ReferenceTest, PipeDreamTwoStagesVerticalSyncByHand) { CheckTwoStagePipeDream(true); }

// ---- (4) Training makes progress, and bad configs are refused.

TEST(ReferenceTest, FlushSgdLossDecreasesOverTwentySteps) {
  ReferenceConfig config;
  config.model = exec::MlpModel{.layers = 4, .hidden = 16, .loss = LossKind::kMse, .seed = 1};
  config.microbatch_size = 8;
  config.microbatches = 4;
  config.steps = 20;
  config.lr = 0.05;
  config.momentum = 0.9;
  const ReferenceResult result = TrainReference(config);
  ASSERT_EQ(result.losses.size(), 20u);
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) {
    first += result.losses[i] / 5;
    last += result.losses[15 + i] / 5;
  }
  EXPECT_LT(result.losses.back(), result.losses.front());
  EXPECT_LT(last, 0.9 * first);
  // And on microbatches it never trained on.
  Params trained(config.model.layers);
  for (int l = 0; l < config.model.layers; ++l) trained[l] = LayerParams{result.weights[l], result.biases[l]};
  const Params init = ReferenceInitialParams(config.model);
  double held_out_init = 0, held_out_trained = 0;
  for (int64_t g = 1000; g < 1004; ++g) {
    const ReferenceBatch batch = ReferenceMicrobatch(config.model, config.microbatch_size, g);
    held_out_init += ReferenceLossAndGrad(config.model, init, batch, nullptr);
    held_out_trained += ReferenceLossAndGrad(config.model, trained, batch, nullptr);
  }
  EXPECT_LT(held_out_trained, 0.9 * held_out_init);
}

TEST(ReferenceTest, RejectsBadConfigs) {
  ReferenceConfig config = TinyConfig(1, 1);
  config.optimizer = "adagrad";
  EXPECT_THROW(TrainReference(config), std::invalid_argument);
  config = TinyConfig(1, 1);
  config.staleness = Staleness::kPipeDream;
  config.layers_per_stage = {1, 1};
  EXPECT_THROW(TrainReference(config), std::invalid_argument);
  config.layers_per_stage = {3, 0};
  EXPECT_THROW(TrainReference(config), std::invalid_argument);
}

// The executor suite's transformer cases are well conditioned: a 1e-7 change of the initial
// weights (rounding's size) moves the trained weights by under a quarter of the fp32 tolerance
// (1e-5), so a device that sums in another order (the GPU) passes or fails on its training, not
// on chaos. Each policy at the Adam rate the suite gives it (gpt_reference.h), 3 steps of 8.
TEST(GptReferenceConditioning, TheSuitesAdamRatesKeepRoundingSmall) {
  struct Policy {
    const char* name;
    Staleness staleness;
    float lr;
    std::vector<int> split;
  };
  for (const Policy& p : {Policy{"flush", Staleness::kFlush, kAdamLr, {2, 2, 2, 2}},
                          Policy{"flush, a block per stage", Staleness::kFlush, kAdamLr, {1, 1, 1, 1, 1, 1, 1, 1}},
                          Policy{"2bw", Staleness::kTwoBW, kAdamLr, {2, 2, 2, 2}},
                          Policy{"pipedream", Staleness::kPipeDream, kAdamLrPerMicrobatch, {2, 2, 2, 2}}}) {
    exec::TrainingConfig config;
    config.gpt = kTestGpt;
    config.microbatch_size = 2;
    config.optimizer = "adam";
    config.lr = p.lr;
    config.layers_per_stage = p.split;
    const GptReferenceResult a = TrainGptReference(config, 8, 3, p.staleness, false);
    const GptReferenceResult b = TrainGptReference(config, 8, 3, p.staleness, false, 1e-7);
    for (size_t s = 0; s < a.stage_params.size(); ++s) {
      double initial2 = 0, final2 = 0, ref2 = 0;
      for (size_t i = 0; i < a.stage_params[s].size(); ++i) {
        const double d0 = a.initial_params[s][i] - b.initial_params[s][i], d = a.stage_params[s][i] - b.stage_params[s][i];
        initial2 += d0 * d0, final2 += d * d, ref2 += double{a.stage_params[s][i]} * a.stage_params[s][i];
      }
      EXPECT_GT(std::sqrt(initial2 / ref2), 1e-8) << p.name << " stage " << s << ": the change was made";
      EXPECT_LE(std::sqrt(final2 / ref2), 2.5e-6) << p.name << " stage " << s << ": the trained weights' change";
    }
  }
}

}  // namespace
}  // namespace stagecraft::testing
