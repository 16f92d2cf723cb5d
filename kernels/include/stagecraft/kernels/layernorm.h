// LayerNorm over the last dimension (Ba, Kiros & Hinton, 2016), as in GPT-2 and llm.c, one row
// at a time. With x a row of `cols` values, μ its mean, σ² its (biased) variance and
// rstd = 1/√(σ² + eps):
//   forward          x̂ = (x − μ)·rstd,  out = γ·x̂ + β
//   input gradient   g = dout·γ;  dx = rstd·(g − mean(g) − x̂·mean(g·x̂))
//   weight gradient  dγ = Σ_rows dout·x̂,  dβ = Σ_rows dout
// The input gradient needs γ, μ and rstd; the weight gradient x̂, which it rebuilds from x, μ
// and rstd, so F keeps x, μ and rstd and I and W each take what they need (F/I/W split).
#pragma once

#include <cmath>

#include "stagecraft/kernels/hd.h"
#include "stagecraft/kernels/loss.h"  // SumInLanes

namespace stagecraft::kernels {

inline constexpr float kLayerNormEps = 1e-5f;

// out = γ·x̂ + β for one row; writes μ and rstd.
SC_HD inline void LayerNormRow(const float* x, const float* gamma, const float* beta, float* out, int cols,
                               float* mean, float* rstd) {
  const float mu = SumInLanes(cols, [&](int c) { return x[c]; }) / static_cast<float>(cols);
  const float var = SumInLanes(cols, [&](int c) {
                      const float d = x[c] - mu;
                      return d * d;
                    }) / static_cast<float>(cols);
  const float r = 1.0f / sqrtf(var + kLayerNormEps);
  for (int c = 0; c < cols; ++c) out[c] = (x[c] - mu) * r * gamma[c] + beta[c];
  *mean = mu;
  *rstd = r;
}

// dx (+)= rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dout·γ, for one row; added to what dx holds
// when `accumulate` (the residual stream's gradient), written otherwise.
SC_HD inline void LayerNormBackwardInputRow(const float* dout, const float* x, const float* gamma, float mean,
                                            float rstd, float* dx, int cols, bool accumulate) {
  const float inv_cols = 1.0f / static_cast<float>(cols);
  const float mean_g = SumInLanes(cols, [&](int c) { return dout[c] * gamma[c]; }) * inv_cols;
  const float mean_gx = SumInLanes(cols, [&](int c) { return dout[c] * gamma[c] * (x[c] - mean) * rstd; }) * inv_cols;
  for (int c = 0; c < cols; ++c) {
    const float xhat = (x[c] - mean) * rstd;
    const float d = rstd * (dout[c] * gamma[c] - mean_g - xhat * mean_gx);
    dx[c] = accumulate ? dx[c] + d : d;
  }
}

}  // namespace stagecraft::kernels
