// Tests for kernels/include/stagecraft/kernels/optimizer.h through the host loops of host.cpp:
// three SGD-momentum steps worked by hand in the torch.optim.SGD convention, three Adam steps
// against Kingma & Ba (2015, Algorithm 1) with bias correction, written out in double, the
// update out of place (a STEP that keeps the old version) against the same update in place, and
// the gradient each update leaves zeroed.
#include "stagecraft/kernels/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "stagecraft/kernels/host.h"

namespace stagecraft::kernels {
namespace {

TEST(OptimizerTest, SgdMomentumThreeStepsHandWorked) {
  // torch.optim.SGD(lr=0.1, momentum=0.9, dampening=0): v ← 0.9 v + g; w ← w − 0.1 v.
  // Raw gradients are scaled by 0.5 (the microbatch average) before the update.
  //   element 0: w 1,  g = 1, 2, −1:  v = 1, 2.9, 1.61;  w = 0.9, 0.61, 0.449
  //   element 1: w −2, g = 0, 1,  1:  v = 0, 1, 1.9;      w = −2, −2.1, −2.29
  const std::vector<std::vector<float>> raw_grads = {{2.0f, 0.0f}, {4.0f, 2.0f}, {-2.0f, 2.0f}};
  const std::vector<std::vector<float>> expected_w = {{0.9f, -2.0f}, {0.61f, -2.1f}, {0.449f, -2.29f}};
  const std::vector<std::vector<float>> expected_v = {{1.0f, 0.0f}, {2.9f, 1.0f}, {1.61f, 1.9f}};
  std::vector<float> w = {1.0f, -2.0f};
  std::vector<float> velocity = {0.0f, 0.0f};
  for (size_t step = 0; step < raw_grads.size(); ++step) {
    std::vector<float> grad = raw_grads[step];
    SgdMomentum(2, w.data(), w.data(), velocity.data(), grad.data(), 0.5f, 0.1f, 0.9f);
    EXPECT_EQ(grad, std::vector<float>(2, 0.0f)) << "step " << step + 1 << " leaves its gradient zeroed";
    for (int i = 0; i < 2; ++i) {
      EXPECT_NEAR(w[i], expected_w[step][i], 1e-6) << "step " << step + 1 << " element " << i;
      EXPECT_NEAR(velocity[i], expected_v[step][i], 1e-6) << "step " << step + 1 << " element " << i;
    }
  }
}

// Kingma & Ba (2015), Algorithm 1, one scalar parameter, in double.
struct AdamReference {
  double lr, beta1, beta2, eps;
  double w, m = 0.0, v = 0.0;
  int t = 0;

  void Step(double g) {
    ++t;
    m = beta1 * m + (1.0 - beta1) * g;
    v = beta2 * v + (1.0 - beta2) * g * g;
    const double m_hat = m / (1.0 - std::pow(beta1, t));
    const double v_hat = v / (1.0 - std::pow(beta2, t));
    w -= lr * m_hat / (std::sqrt(v_hat) + eps);
  }
};

TEST(OptimizerTest, AdamThreeStepsMatchKingmaBaInDouble) {
  constexpr float kLr = 0.1f, kBeta1 = 0.9f, kBeta2 = 0.999f, kEps = 1e-8f, kGradScale = 0.25f;
  const std::vector<std::vector<float>> raw_grads = {{2.0f, -0.4f, 8.0f}, {-4.0f, 0.4f, 0.0f}, {8.0f, -0.4f, 4.0f}};
  std::vector<float> w = {1.0f, -0.5f, 3.0f};
  std::vector<float> m(3, 0.0f), v(3, 0.0f);
  std::vector<AdamReference> reference;
  for (const float w0 : w) reference.push_back({kLr, kBeta1, kBeta2, kEps, w0});

  for (int t = 1; t <= 3; ++t) {
    AdamParams params{kLr, kBeta1, kBeta2, kEps};
    params.bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(kBeta1), t));
    params.bias2 = static_cast<float>(1.0 - std::pow(static_cast<double>(kBeta2), t));
    const std::vector<float>& grad = raw_grads[t - 1];
    std::vector<float> consumed = grad;
    Adam(3, w.data(), w.data(), m.data(), v.data(), consumed.data(), kGradScale, params);
    EXPECT_EQ(consumed, std::vector<float>(3, 0.0f)) << "step " << t << " leaves its gradient zeroed";
    for (int i = 0; i < 3; ++i) {
      reference[i].Step(static_cast<double>(grad[i]) * kGradScale);
      EXPECT_NEAR(w[i], reference[i].w, 1e-6 + std::abs(reference[i].w) * 1e-5) << "step " << t << " element " << i;
      EXPECT_NEAR(m[i], reference[i].m, 1e-6) << "step " << t << " element " << i;
      EXPECT_NEAR(v[i], reference[i].v, 1e-7) << "step " << t << " element " << i;
    }
    if (t == 1) {
      // After bias correction the first step moves every weight by lr against the sign of its
      // gradient, whatever the gradient's size (m̂ / √v̂ = g / |g|).
      EXPECT_NEAR(w[0], 1.0f - kLr, 1e-6);
      EXPECT_NEAR(w[1], -0.5f + kLr, 1e-6);
      EXPECT_NEAR(w[2], 3.0f - kLr, 1e-6);
    }
  }
}

// Out of place, each update leaves w_in as it was and writes into w_out exactly what it writes
// over w_in in place, with the same optimizer state after it.
TEST(OptimizerTest, OutOfPlaceUpdatesEqualInPlaceAndKeepTheOldVersion) {
  const std::vector<float> w0 = {1.0f, -0.5f, 3.0f, 0.25f}, grad = {2.0f, -0.4f, 8.0f, 0.0f};
  AdamParams params;
  params.lr = 0.1f;
  params.bias1 = 1.0f - params.beta1;
  params.bias2 = 1.0f - params.beta2;
  const std::vector<float> zeros(4, 0.0f);
  std::vector<float> in_place = w0, m1(4, 0.1f), v1(4, 0.2f), g1 = grad;
  Adam(4, in_place.data(), in_place.data(), m1.data(), v1.data(), g1.data(), 0.5f, params);
  std::vector<float> old = w0, next(4, -7.0f), m2(4, 0.1f), v2(4, 0.2f), g2 = grad;
  Adam(4, old.data(), next.data(), m2.data(), v2.data(), g2.data(), 0.5f, params);
  EXPECT_EQ(g1, zeros);
  EXPECT_EQ(g2, zeros);
  EXPECT_EQ(old, w0);
  EXPECT_EQ(next, in_place);
  EXPECT_EQ(m2, m1);
  EXPECT_EQ(v2, v1);
  EXPECT_NE(next, w0);

  std::vector<float> sgd_in_place = w0, vel1(4, 0.3f), g3 = grad;
  SgdMomentum(4, sgd_in_place.data(), sgd_in_place.data(), vel1.data(), g3.data(), 0.5f, 0.1f, 0.9f);
  std::vector<float> sgd_old = w0, sgd_next(4, -7.0f), vel2(4, 0.3f), g4 = grad;
  SgdMomentum(4, sgd_old.data(), sgd_next.data(), vel2.data(), g4.data(), 0.5f, 0.1f, 0.9f);
  EXPECT_EQ(g3, zeros);
  EXPECT_EQ(g4, zeros);
  EXPECT_EQ(sgd_old, w0);
  EXPECT_EQ(sgd_next, sgd_in_place);
  EXPECT_EQ(vel2, vel1);
  EXPECT_NE(sgd_next, w0);
}

}  // namespace
}  // namespace stagecraft::kernels
