// The MLP layer's element-wise math: bias + activation (+ residual) forward and its backward.
// GELU is the tanh approximation of Hendrycks & Gimpel (2016), as in GPT-2 and llm.c:
//   gelu(x) = x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)));
// ReLU is max(x, 0) with gradient 1 where x > 0, else 0 (as torch.nn.ReLU).
#pragma once

#include <cmath>
#include <cstdint>

#include "stagecraft/kernels/fast_math.h"
#include "stagecraft/kernels/hd.h"

namespace stagecraft::kernels {

inline constexpr float kGeluScale = 0.7978845608028654f;  // √(2/π)
inline constexpr float kGeluCubic = 0.044715f;

// With u = √(2/π)(x + 0.044715 x³) and 1 + tanh(u) = 2σ(2u), gelu(x) = x·σ(2u). For u ≥ 0 it
// is computed as x − x·(1 − σ(2u)) so the large side never rounds 1 − σ: the result is within
// 1e-6 of the exact function over [−10, 10] (tests/kernels/activation_test.cpp).
SC_HD inline float Gelu(float x) {
  const float u = kGeluScale * (x + kGeluCubic * x * x * x);
  const Logistic l = LogisticOf(2.0f * u);
  const float right = x - x * l.sc, left = x * l.s;
  return u >= 0.0f ? right : left;
}

// d gelu / dx = ½(1 + tanh u) + ½x(1 − tanh² u)·u' = σ(2u) + 2x·σ(2u)(1 − σ(2u))·u'.
SC_HD inline float GeluGrad(float x) {
  const float u = kGeluScale * (x + kGeluCubic * x * x * x);
  const Logistic l = LogisticOf(2.0f * u);
  const float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  return l.s + 2.0f * x * l.s * l.sc * du;
}

SC_HD inline float Relu(float x) { return x > 0.0f ? x : 0.0f; }
SC_HD inline float ReluGrad(float x) { return x > 0.0f ? 1.0f : 0.0f; }

enum class Activation : uint8_t { kGelu, kRelu };

// The activation as a type, so loops are compiled once per activation with no switch inside.
struct GeluOp {
  static constexpr Activation kKind = Activation::kGelu;
  SC_HD float operator()(float x) const { return Gelu(x); }
  SC_HD float Grad(float x) const { return GeluGrad(x); }
};
struct ReluOp {
  static constexpr Activation kKind = Activation::kRelu;
  SC_HD float operator()(float x) const { return Relu(x); }
  SC_HD float Grad(float x) const { return ReluGrad(x); }
};

// Element i of a row-major [rows x cols] tensor: z += bias (per column), out = act(z), plus
// the layer input when the layer is residual (residual may be null).
// (The CPU loops in host.cpp walk rows and columns instead, with no modulo per element.)
template <typename Act>
SC_HD inline void BiasActivationAt(Act act, int64_t i, int cols, float* z, const float* bias, const float* residual,
                                   float* out) {
  const float zi = z[i] + bias[i % cols];
  z[i] = zi;
  out[i] = act(zi) + (residual != nullptr ? residual[i] : 0.0f);
}

// Element i: dz = dout · act'(z), the gradient at the pre-activation.
template <typename Act>
SC_HD inline void ActivationBackwardAt(Act act, int64_t i, const float* dout, const float* z, float* dz) {
  dz[i] = dout[i] * act.Grad(z[i]);
}

// Column c of a row-major [rows x cols] tensor: bias_grad[c] ← Σ_rows dz[r][c], added to what it
// holds when `accumulate`, else written.
SC_HD inline void BiasGradAt(int c, int rows, int cols, const float* dz, float* bias_grad, bool accumulate) {
  float sum = 0.0f;
  for (int r = 0; r < rows; ++r) sum += dz[static_cast<int64_t>(r) * cols + c];
  bias_grad[c] = (accumulate ? bias_grad[c] : 0.0f) + sum;
}

}  // namespace stagecraft::kernels
