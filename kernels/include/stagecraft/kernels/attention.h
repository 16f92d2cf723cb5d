// Causal self-attention's own math (beside the GEMMs): moving heads between the token-major
// layout of a linear layer's rows and the head-major layout the batched GEMMs read, and the
// causal softmax over one row of scores with its backward.
//   Layouts: rows [B·T, ld] with head h of token (b, t) at columns h·hd .. h·hd + hd − 1;
//   heads [B, NH, T, hd], densely packed.
//   Softmax: row t of a [T x T] score matrix keeps columns 0..t (a token sees itself and the
//   tokens before it); p = softmax over those, 0 beyond. Backward, in place on dp:
//   ds_j = p_j·(dp_j − Σ_k p_k·dp_k) for j ≤ t, 0 beyond. The 1/√hd scale is the GEMM's alpha.
#pragma once

#include <cstdint>

#include "stagecraft/kernels/fast_math.h"
#include "stagecraft/kernels/hd.h"
#include "stagecraft/kernels/loss.h"  // SumInLanes

namespace stagecraft::kernels {

// Offset in the rows layout of element d of head h of token (b, t).
SC_HD inline int64_t RowsOffset(int b, int t, int h, int d, int seq, int head_dim, int64_t ld) {
  return (static_cast<int64_t>(b) * seq + t) * ld + static_cast<int64_t>(h) * head_dim + d;
}
// Offset in the heads layout of the same element.
SC_HD inline int64_t HeadsOffset(int b, int t, int h, int d, int seq, int heads, int head_dim) {
  return ((static_cast<int64_t>(b) * heads + h) * seq + t) * head_dim + d;
}

// Row t (0-based) of a causal score matrix, in place: scores → probabilities.
SC_HD inline void CausalSoftmaxRow(float* row, int t, int seq) {
  float max_s = row[0];
  for (int j = 1; j <= t; ++j) max_s = row[j] > max_s ? row[j] : max_s;
  const float denom = SumInLanes(t + 1, [&](int j) { return row[j] = ExpNonPositive(row[j] - max_s); });
  const float inv = 1.0f / denom;
  for (int j = 0; j <= t; ++j) row[j] *= inv;
  for (int j = t + 1; j < seq; ++j) row[j] = 0.0f;
}

// Row t of the softmax backward, in place: dp → ds, given the row's probabilities p.
SC_HD inline void CausalSoftmaxBackwardRow(const float* p, float* dp, int t, int seq) {
  const float dot = SumInLanes(t + 1, [&](int j) { return p[j] * dp[j]; });
  for (int j = 0; j <= t; ++j) dp[j] = p[j] * (dp[j] - dot);
  for (int j = t + 1; j < seq; ++j) dp[j] = 0.0f;
}

}  // namespace stagecraft::kernels
