// The MLP layer's element-wise math: bias + GELU (+ residual) forward and its backward.
// GELU is the tanh approximation of Hendrycks & Gimpel (2016), as in GPT-2 and llm.c:
//   gelu(x) = x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³))).
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

// Element i of a row-major [rows x cols] tensor: z += bias (per column), out = gelu(z), plus
// the layer input when the layer is residual (residual may be null).
// (The CPU loops in host.cpp walk rows and columns instead, with no modulo per element.)
SC_HD inline void BiasGeluAt(int64_t i, int cols, float* z, const float* bias, const float* residual, float* out) {
  const float zi = z[i] + bias[i % cols];
  z[i] = zi;
  out[i] = Gelu(zi) + (residual != nullptr ? residual[i] : 0.0f);
}

// Element i: dz = dout · gelu'(z), the gradient at the pre-activation.
SC_HD inline void GeluBackwardAt(int64_t i, const float* dout, const float* z, float* dz) {
  dz[i] = dout[i] * GeluGrad(z[i]);
}

// Column c of a row-major [rows x cols] tensor: bias_grad[c] += Σ_rows dz[r][c].
SC_HD inline void BiasGradAt(int c, int rows, int cols, const float* dz, float* bias_grad) {
  float sum = 0.0f;
  for (int r = 0; r < rows; ++r) sum += dz[static_cast<int64_t>(r) * cols + c];
  bias_grad[c] += sum;
}

}  // namespace stagecraft::kernels
