// exec/model.cpp: the counter-based data is deterministic, in range, and the batched target
// generator agrees with the one-microbatch form; the teacher's targets are what its definition
// in model.h says (checked with a naive double loop).
#include "stagecraft/exec/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace stagecraft::exec {
namespace {

TEST(ModelTest, UniformIsDeterministicInRangeAndSpread) {
  std::set<float> seen;
  double sum = 0;
  for (uint64_t i = 0; i < 10000; ++i) {
    const float u = UniformAt(3, 5, i);
    ASSERT_EQ(u, UniformAt(3, 5, i));
    ASSERT_GE(u, -1.0f);
    ASSERT_LT(u, 1.0f);
    seen.insert(u);
    sum += u;
  }
  EXPECT_GT(seen.size(), 9900u);
  EXPECT_NEAR(sum / 10000, 0.0, 0.03);  // mean of U(-1, 1): 0, std error 0.006
  EXPECT_NE(UniformAt(3, 5, 0), UniformAt(4, 5, 0));
  EXPECT_NE(UniformAt(3, 5, 0), UniformAt(3, 6, 0));
}

TEST(ModelTest, InitLayerScaleAndZeroBias) {
  MlpModel m{.layers = 2, .hidden = 16, .seed = 9};
  std::vector<float> w(256), b(16, 1.0f);
  InitLayer(m, 1, w.data(), b.data());
  const float bound = std::sqrt(6.0f / 16);
  for (float x : w) EXPECT_LE(std::abs(x), bound);
  for (float x : b) EXPECT_EQ(x, 0.0f);
  EXPECT_EQ(w[5], bound * UniformAt(9, kWeightStream + 1, 5));
}

TEST(ModelTest, TargetsFollowTheTeacherDefinition) {
  for (auto loss : {kernels::LossKind::kMse, kernels::LossKind::kCrossEntropy}) {
    MlpModel m{.layers = 1, .hidden = 8, .loss = loss, .seed = 2};
    const int rows = 3;
    std::vector<float> batched(TargetFloats(m, rows) * 4);
    MicrobatchTargets(m, rows, 5, 4, batched.data());
    for (int k = 0; k < 4; ++k) {
      std::vector<float> one(TargetFloats(m, rows)), x(rows * 8);
      MicrobatchTarget(m, rows, 5 + k, one.data());
      MicrobatchInput(m, rows, 5 + k, x.data());
      for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(one[i], batched[k * one.size() + i]);
      for (int r = 0; r < rows; ++r) {
        std::vector<double> y(8);
        for (int o = 0; o < 8; ++o) {
          double z = 0.1 * UniformAt(2, kTeacherStream + 1, o);
          for (int i = 0; i < 8; ++i) z += 2 * std::sqrt(3.0 / 8) * UniformAt(2, kTeacherStream, o * 8 + i) * x[r * 8 + i];
          y[o] = 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
        }
        if (loss == kernels::LossKind::kMse) {
          for (int o = 0; o < 8; ++o) EXPECT_NEAR(one[r * 8 + o], y[o], 1e-5);
        } else {
          int best = 0;
          for (int o = 1; o < 8; ++o) best = y[o] > y[best] ? o : best;
          EXPECT_EQ(one[r], static_cast<float>(best));
        }
      }
    }
  }
}

}  // namespace
}  // namespace stagecraft::exec
