// Tests for kernels/include/stagecraft/kernels/activation.h and the host loops of host.cpp:
// GELU against the tanh formula evaluated independently in double, its gradient against central
// finite differences, and bias + GELU (+ residual) and the bias gradient on hand-worked 2x3 cases.
#include "stagecraft/kernels/activation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <vector>

#include "stagecraft/kernels/fast_math.h"
#include "stagecraft/kernels/host.h"

namespace stagecraft::kernels {
namespace {

// Hendrycks & Gimpel (2016), tanh form, in double: 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))).
double GeluReference(double x) {
  const double scale = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(scale * (x + 0.044715 * x * x * x)));
}

double GeluSlopeByFiniteDifference(double x) {
  constexpr double kStep = 1e-5;
  return (GeluReference(x + kStep) - GeluReference(x - kStep)) / (2.0 * kStep);
}

// float result vs double oracle: tol + |ref|·eps.
void ExpectNear(double expected, float actual, double tol, double eps) {
  EXPECT_NEAR(actual, expected, tol + std::abs(expected) * eps);
}

TEST(ActivationTest, GeluMatchesTanhFormulaInDouble) {
  for (const double x : {-6.0, -3.0, -1.0, -0.5, -0.1, 0.0, 0.1, 0.5, 1.0, 2.0, 3.0, 6.0}) {
    SCOPED_TRACE(x);
    ExpectNear(GeluReference(x), Gelu(static_cast<float>(x)), 1e-7, 1e-6);
  }
}

TEST(ActivationTest, GeluKnownValues) {
  // gelu_tanh(1) = 0.841192, gelu_tanh(-1) = -0.158808 (as torch.nn.functional.gelu(approximate="tanh")).
  ExpectNear(0.8411919906082768, Gelu(1.0f), 1e-7, 1e-6);
  ExpectNear(-0.15880800939172324, Gelu(-1.0f), 1e-7, 1e-6);
  EXPECT_EQ(Gelu(0.0f), 0.0f);
  // Far from 0 GELU is the identity on the right and 0 on the left.
  ExpectNear(20.0, Gelu(20.0f), 0.0, 1e-7);
  ExpectNear(0.0, Gelu(-20.0f), 1e-7, 0.0);
}

TEST(ActivationTest, GeluGradMatchesCentralFiniteDifference) {
  for (double x = -5.0; x <= 5.0; x += 0.25) {
    SCOPED_TRACE(x);
    ExpectNear(GeluSlopeByFiniteDifference(x), GeluGrad(static_cast<float>(x)), 1e-6, 1e-5);
  }
}

TEST(ActivationTest, GeluBackwardScalesUpstreamGradientBySlope) {
  const std::vector<float> z = {-2.0f, -0.5f, 0.0f, 1.5f};
  const std::vector<float> dout = {2.0f, -1.0f, 3.0f, 0.5f};
  std::vector<float> dz(z.size(), -99.0f);
  ActivationBackward(Activation::kGelu, static_cast<int64_t>(z.size()), dout.data(), z.data(), dz.data());
  for (size_t i = 0; i < z.size(); ++i) {
    SCOPED_TRACE(i);
    ExpectNear(dout[i] * GeluSlopeByFiniteDifference(z[i]), dz[i], 1e-6, 1e-5);
  }
  EXPECT_FLOAT_EQ(dz[2], 1.5f);  // gelu'(0) = 1/2, times 3
}

// z = [[0, 1, -1], [2, -2, 0.5]] + bias [1, -1, 0.5] per column = [[1, 0, -0.5], [3, -3, 1]].
struct BiasGeluCase {
  std::vector<float> z = {0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f};
  std::vector<float> bias = {1.0f, -1.0f, 0.5f};
  std::vector<float> biased = {1.0f, 0.0f, -0.5f, 3.0f, -3.0f, 1.0f};
  std::vector<float> out = std::vector<float>(6, -99.0f);
};

TEST(ActivationTest, BiasGeluAddsBiasPerColumnAndKeepsPreActivation) {
  BiasGeluCase c;
  BiasActivation(Activation::kGelu, 2, 3, c.z.data(), c.bias.data(), nullptr, c.out.data());
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(i);
    EXPECT_FLOAT_EQ(c.z[i], c.biased[i]);  // z now holds the pre-activation the backward needs
    ExpectNear(GeluReference(c.biased[i]), c.out[i], 1e-7, 1e-6);
  }
  ExpectNear(0.8411919906082768, c.out[0], 1e-7, 1e-6);   // gelu(1)
  ExpectNear(2.996362607918227, c.out[3], 1e-7, 1e-6);    // gelu(3)
  ExpectNear(-0.0036373920817730, c.out[4], 1e-7, 1e-5);  // gelu(-3)
}

TEST(ActivationTest, BiasGeluAddsResidualAfterActivation) {
  BiasGeluCase c;
  const std::vector<float> residual = {10.0f, 20.0f, 30.0f, 40.0f, 50.0f, 60.0f};
  BiasActivation(Activation::kGelu, 2, 3, c.z.data(), c.bias.data(), residual.data(), c.out.data());
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(i);
    EXPECT_FLOAT_EQ(c.z[i], c.biased[i]);
    ExpectNear(GeluReference(c.biased[i]) + residual[i], c.out[i], 1e-6, 1e-6);
  }
  ExpectNear(20.0, c.out[1], 1e-6, 0.0);  // gelu(0) + 20
}

TEST(ActivationTest, BiasGradSumsRowsPerColumnAndAccumulates) {
  const std::vector<float> dz = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};  // [[1, 2, 3], [4, 5, 6]]
  std::vector<float> bias_grad = {0.5f, 0.0f, -1.0f};
  BiasGrad(2, 3, dz.data(), bias_grad.data(), true);
  EXPECT_EQ(bias_grad, (std::vector<float>{5.5f, 7.0f, 8.0f}));
  BiasGrad(2, 3, dz.data(), bias_grad.data(), true);  // a second microbatch adds on
  EXPECT_EQ(bias_grad, (std::vector<float>{10.5f, 14.0f, 17.0f}));
}

TEST(ActivationTest, BiasGradWithoutAccumulateOverwritesWhatWasThere) {
  const std::vector<float> dz = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};  // [[1, 2, 3], [4, 5, 6]]
  std::vector<float> bias_grad(3, std::numeric_limits<float>::quiet_NaN());  // a reused buffer's leftovers
  BiasGrad(2, 3, dz.data(), bias_grad.data(), false);
  EXPECT_EQ(bias_grad, (std::vector<float>{5.0f, 7.0f, 9.0f}));
}

// Every 61st float in [-10, 10] (about 35 million values, all exponents and the tails), run
// through the vectorized host loop: within 1e-6 absolute of the formula in double.
TEST(ActivationTest, FastGeluWithin1e6OfDoubleOverMinusTenToTen) {
  std::vector<float> z;
  for (float x : {-10.0f, 10.0f}) {
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    const uint32_t limit = bits;
    for (uint32_t b = x < 0 ? 0x80000000u : 0u; b <= limit; b += 61) {
      float v;
      std::memcpy(&v, &b, sizeof v);
      z.push_back(v);
    }
  }
  z.push_back(-10.0f);
  z.push_back(10.0f);
  const std::vector<float> zero_bias(z.size(), 0.0f);
  std::vector<float> out(z.size());
  BiasActivation(Activation::kGelu, 1, static_cast<int>(z.size()), z.data(), zero_bias.data(), nullptr, out.data());
  double worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    const double err = std::abs(out[i] - GeluReference(z[i]));
    if (err > worst) {
      worst = err;
      worst_x = z[i];
    }
  }
  EXPECT_LE(worst, 1e-6) << "at x = " << worst_x;
  EXPECT_GT(z.size(), 30'000'000u);
}

TEST(ActivationTest, FastGeluGradMatchesTheDerivativeInDouble) {
  const double scale = std::sqrt(2.0 / std::numbers::pi);
  for (double x = -10.0; x <= 10.0; x += 1.0 / 64) {
    const double u = scale * (x + 0.044715 * x * x * x);
    const double t = std::tanh(u);
    const double exact = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * scale * (1 + 3 * 0.044715 * x * x);
    SCOPED_TRACE(x);
    ExpectNear(exact, GeluGrad(static_cast<float>(x)), 2e-6, 1e-6);
  }
}

TEST(FastMathTest, ExpNonPositiveWithinTwoTenthsOfAMillionth) {
  for (double x = -87.0; x <= 0.0; x += 1.0 / 1024) {
    const double exact = std::exp(static_cast<float>(x));
    SCOPED_TRACE(x);
    EXPECT_LE(std::abs(ExpNonPositive(static_cast<float>(x)) - exact), 2e-7 * exact);
  }
  EXPECT_EQ(ExpNonPositive(0.0f), 1.0f);
  EXPECT_GT(ExpNonPositive(-1000.0f), 0.0f);  // clamped, never 0 or denormal garbage
}

TEST(FastMathTest, LogisticHalvesAreAccurateOnBothSides) {
  for (double y = -40.0; y <= 40.0; y += 0.125) {
    const Logistic l = LogisticOf(static_cast<float>(y));
    const double s = 1.0 / (1.0 + std::exp(-y));
    const double sc = 1.0 / (1.0 + std::exp(y));
    SCOPED_TRACE(y);
    EXPECT_LE(std::abs(l.s - s), 4e-7 * s);    // relative: the small side keeps its digits
    EXPECT_LE(std::abs(l.sc - sc), 4e-7 * sc);
  }
}

TEST(ActivationTest, ReluForwardAndBackwardHandWorked) {
  // z = [[0, 1, -1], [2, -2, 0.5]] + bias [1, -1, 0.5] = [[1, 0, -0.5], [3, -3, 1]].
  BiasGeluCase c;
  const std::vector<float> residual = {10.0f, 20.0f, 30.0f, 40.0f, 50.0f, 60.0f};
  BiasActivation(Activation::kRelu, 2, 3, c.z.data(), c.bias.data(), residual.data(), c.out.data());
  EXPECT_EQ(c.z, c.biased);
  EXPECT_EQ(c.out, (std::vector<float>{11.0f, 20.0f, 30.0f, 43.0f, 50.0f, 61.0f}));
  // The gradient passes where z > 0 only (0 at z = 0, as torch.nn.ReLU).
  const std::vector<float> dout = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  std::vector<float> dz(6, -99.0f);
  ActivationBackward(Activation::kRelu, 6, dout.data(), c.z.data(), dz.data());
  EXPECT_EQ(dz, (std::vector<float>{1.0f, 0.0f, 0.0f, 4.0f, 0.0f, 6.0f}));
}

}  // namespace
}  // namespace stagecraft::kernels
