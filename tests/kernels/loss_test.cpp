// Tests for kernels/include/stagecraft/kernels/loss.h through the host Loss() of host.cpp: mean
// squared error and cross-entropy on hand-worked tiny cases, their gradients against central
// finite differences of the mean loss evaluated in double, and cross-entropy with logits ~1e4.
#include "stagecraft/kernels/loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "finite_difference.h"
#include "stagecraft/kernels/host.h"

namespace stagecraft::kernels {
namespace {

// Mean losses written from their definitions, in double, as the finite-difference oracle.
double MseReference(const std::vector<double>& y, const std::vector<float>& targets) {
  double sum = 0.0;
  for (size_t i = 0; i < y.size(); ++i) sum += (y[i] - targets[i]) * (y[i] - targets[i]);
  return sum / static_cast<double>(y.size());
}

double CrossEntropyReference(const std::vector<double>& y, const std::vector<float>& labels, int cols) {
  const int rows = static_cast<int>(labels.size());
  double sum = 0.0;
  for (int r = 0; r < rows; ++r) {
    double denom = 0.0;
    for (int c = 0; c < cols; ++c) denom += std::exp(y[r * cols + c]);
    sum += -std::log(std::exp(y[r * cols + static_cast<int>(labels[r])]) / denom);
  }
  return sum / rows;
}

// Central differences of `mean_loss` at y, one coordinate at a time.
template <typename MeanLoss>
std::vector<double> FiniteDifferenceGradient(const std::vector<float>& y, MeanLoss mean_loss) {
  return testing::CentralDifferences(std::vector<double>(y.begin(), y.end()), mean_loss);
}

std::vector<float> RandomValues(size_t n, unsigned seed, float low, float high) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

TEST(LossTest, MseHandWorked) {
  // y − t = [[1, 0], [−2, 3]]: L = (1 + 0 + 4 + 9) / 4 = 3.5; dL/dy = 2 (y − t) / 4.
  const std::vector<float> y = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> targets = {0.0f, 2.0f, 5.0f, 1.0f};
  std::vector<float> dy(4, -99.0f);
  EXPECT_FLOAT_EQ(Loss(LossKind::kMse, 2, 2, y.data(), targets.data(), dy.data()), 3.5f);
  EXPECT_EQ(dy, (std::vector<float>{0.5f, 0.0f, -1.0f, 1.5f}));
}

TEST(LossTest, CrossEntropyHandWorked) {
  // Row 0: logits [0, 0, 0], label 2: softmax 1/3 each, loss ln 3.
  // Row 1: logits [0, ln 2, ln 5], label 1: softmax [1/8, 2/8, 5/8], loss −ln(2/8) = ln 4.
  // Mean (ln 3 + ln 4) / 2 = ln(12) / 2; dL/dy = (softmax − onehot) / 2.
  const std::vector<float> y = {0.0f, 0.0f, 0.0f, 0.0f, std::log(2.0f), std::log(5.0f)};
  const std::vector<float> labels = {2.0f, 1.0f};
  std::vector<float> dy(6, -99.0f);
  EXPECT_NEAR(Loss(LossKind::kCrossEntropy, 2, 3, y.data(), labels.data(), dy.data()), std::log(12.0) / 2.0, 1e-6);
  const std::vector<double> expected = {1.0 / 6, 1.0 / 6, -1.0 / 3, 1.0 / 16, -3.0 / 8, 5.0 / 16};
  for (size_t i = 0; i < dy.size(); ++i) EXPECT_NEAR(dy[i], expected[i], 1e-7) << "at " << i;
}

// The runtime writes the gradient over the output it reads (exec/src/runtime.cpp): in place, each
// loss gives the loss and gradient it gives out of place, to the bit (a row's label logit is read
// before any of the row is written).
TEST(LossTest, InPlaceGivesWhatOutOfPlaceGives) {
  constexpr int kRows = 5, kCols = 7;
  const std::vector<float> y = RandomValues(kRows * kCols, 11, -4.0f, 4.0f);
  const std::vector<float> targets = RandomValues(kRows * kCols, 12, -1.0f, 1.0f);
  const std::vector<float> labels = {6.0f, 0.0f, 3.0f, 6.0f, 2.0f};
  for (const LossKind kind : {LossKind::kMse, LossKind::kCrossEntropy}) {
    const float* t = kind == LossKind::kMse ? targets.data() : labels.data();
    std::vector<float> dy(y.size(), -99.0f), in_place = y;
    const float apart = Loss(kind, kRows, kCols, y.data(), t, dy.data());
    EXPECT_EQ(Loss(kind, kRows, kCols, in_place.data(), t, in_place.data()), apart);
    EXPECT_EQ(in_place, dy);
  }
}

TEST(LossTest, MseGradientMatchesFiniteDifferenceOfMeanLoss) {
  constexpr int kRows = 3, kCols = 4;
  const std::vector<float> y = RandomValues(kRows * kCols, 1, -2.0f, 2.0f);
  const std::vector<float> targets = RandomValues(kRows * kCols, 2, -2.0f, 2.0f);
  std::vector<float> dy(y.size());
  std::vector<double> y_double(y.begin(), y.end());
  EXPECT_NEAR(Loss(LossKind::kMse, kRows, kCols, y.data(), targets.data(), dy.data()), MseReference(y_double, targets),
              1e-6);
  const std::vector<double> grad =
      FiniteDifferenceGradient(y, [&](const std::vector<double>& at) { return MseReference(at, targets); });
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(dy[i], grad[i], 1e-6 + std::abs(grad[i]) * 1e-5) << "at " << i;
}

TEST(LossTest, CrossEntropyGradientMatchesFiniteDifferenceOfMeanLoss) {
  constexpr int kRows = 3, kCols = 5;
  const std::vector<float> y = RandomValues(kRows * kCols, 3, -3.0f, 3.0f);
  const std::vector<float> labels = {4.0f, 0.0f, 2.0f};
  std::vector<float> dy(y.size());
  std::vector<double> y_double(y.begin(), y.end());
  EXPECT_NEAR(Loss(LossKind::kCrossEntropy, kRows, kCols, y.data(), labels.data(), dy.data()),
              CrossEntropyReference(y_double, labels, kCols), 1e-6);
  const std::vector<double> grad = FiniteDifferenceGradient(
      y, [&](const std::vector<double>& at) { return CrossEntropyReference(at, labels, kCols); });
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(dy[i], grad[i], 1e-6 + std::abs(grad[i]) * 1e-5) << "at " << i;
}

TEST(LossTest, CrossEntropyStableForLogitsAroundTenThousand) {
  // exp(1e4) overflows even in double. Shifted by the row maximum, row 0 ([1e4, 1e4+1, 1e4−2],
  // label 0) is [−1, 0, −3]: loss 1 + ln(1 + e⁻¹ + e⁻³); row 1 (all −1e4, label 1) is ln 3.
  const std::vector<float> y = {1e4f, 1e4f + 1.0f, 1e4f - 2.0f, -1e4f, -1e4f, -1e4f};
  const std::vector<float> labels = {0.0f, 1.0f};
  std::vector<float> dy(6, -99.0f);
  const float loss = Loss(LossKind::kCrossEntropy, 2, 3, y.data(), labels.data(), dy.data());
  const double denom = 1.0 + std::exp(-1.0) + std::exp(-3.0);
  ASSERT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, (1.0 + std::log(denom) + std::log(3.0)) / 2.0, 1e-6);
  const std::vector<double> expected = {(std::exp(-1.0) / denom - 1.0) / 2, (1.0 / denom) / 2, (std::exp(-3.0) / denom) / 2,
                                        1.0 / 6, -1.0 / 3, 1.0 / 6};
  for (size_t i = 0; i < dy.size(); ++i) {
    ASSERT_TRUE(std::isfinite(dy[i])) << "at " << i;
    EXPECT_NEAR(dy[i], expected[i], 1e-7) << "at " << i;
  }
}

// loss_scale multiplies dy and only dy: the hand-worked CE gradient of the test above (row 1:
// [1/6, −1/3, 1/6]) times 1024, and the MSE hand-worked dy times 8, with the losses unchanged.
TEST(LossTest, LossScaleScalesTheGradientOnly) {
  const std::vector<float> y = {1e4f, 1e4f + 1.0f, 1e4f - 2.0f, -1e4f, -1e4f, -1e4f};
  const std::vector<float> labels = {0.0f, 1.0f};
  std::vector<float> dy(6), scaled(6);
  const float loss = Loss(LossKind::kCrossEntropy, 2, 3, y.data(), labels.data(), dy.data());
  EXPECT_EQ(Loss(LossKind::kCrossEntropy, 2, 3, y.data(), labels.data(), scaled.data(), 1024.0f), loss);
  EXPECT_NEAR(scaled[3], 1024.0 / 6, 1e-4);
  EXPECT_NEAR(scaled[4], -1024.0 / 3, 1e-4);
  for (size_t i = 0; i < dy.size(); ++i) EXPECT_EQ(scaled[i], dy[i] * 1024.0f) << "at " << i;  // exact
  const std::vector<float> ym = {1.0f, 2.0f, 3.0f, 4.0f}, tm = {0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> dm(4);
  EXPECT_FLOAT_EQ(Loss(LossKind::kMse, 2, 2, ym.data(), tm.data(), dm.data(), 8.0f), 7.5f);  // (1+4+9+16)/4
  for (size_t i = 0; i < dm.size(); ++i) EXPECT_FLOAT_EQ(dm[i], 8.0f * 2.0f * ym[i] / 4.0f) << "at " << i;
}

}  // namespace
}  // namespace stagecraft::kernels
