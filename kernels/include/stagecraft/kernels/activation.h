// The MLP layer's element-wise math: bias + GELU (+ residual) forward and its backward.
// GELU is the tanh approximation of Hendrycks & Gimpel (2016), as in GPT-2 and llm.c:
//   gelu(x) = x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³))).
#pragma once

#include <cmath>
#include <cstdint>

#include "stagecraft/kernels/hd.h"

namespace stagecraft::kernels {

inline constexpr float kGeluScale = 0.7978845608028654f;  // √(2/π)
inline constexpr float kGeluCubic = 0.044715f;

SC_HD inline float Gelu(float x) {
  const float u = kGeluScale * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

// d gelu / dx.
SC_HD inline float GeluGrad(float x) {
  const float u = kGeluScale * (x + kGeluCubic * x * x * x);
  const float t = tanhf(u);
  const float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

// Element i of a row-major [rows x cols] tensor: z += bias (per column), out = gelu(z), plus
// the layer input when the layer is residual (residual may be null).
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
