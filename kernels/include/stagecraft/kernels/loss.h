// Loss functions of the MLP's last stage, one row (sample) at a time: each returns the row's
// loss term and writes the gradient of the microbatch loss with respect to the row.
//   mse:            L = 1/(rows·cols) Σ (y − t)²           dL/dy = 2 (y − t) / (rows·cols)
//   cross_entropy:  L = 1/rows Σ −log softmax(y)[label]     dL/dy = (softmax(y) − onehot) / rows
#pragma once

#include <cmath>

#include "stagecraft/kernels/fast_math.h"
#include "stagecraft/kernels/hd.h"

namespace stagecraft::kernels {

// Row sums are kept in kLanes partial sums (lane j takes columns j, j + kLanes, ...) that are
// added at the end: a fixed order, the same on every CPU and device, which the compiler turns
// into one vector of partial sums on the host (a plain left-to-right float sum cannot be
// vectorized without giving up its order).
inline constexpr int kLanes = 8;

// Σ_c term(c) for c < cols in the lanes' fixed order; term may also write per-column output.
template <typename Term>
SC_HD inline float SumInLanes(int cols, Term term) {
  float lanes[kLanes] = {};
  int c = 0;
  for (; c + kLanes <= cols; c += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] += term(c + j);
  }
  for (int j = 0; c < cols; ++c, ++j) lanes[j] += term(c);
  float sum = 0.0f;
  for (int j = 0; j < kLanes; ++j) sum += lanes[j];
  return sum;
}

// Returns Σ_c (y[c] − t[c])² over the row; dy[c] = 2 (y[c] − t[c]) · scale, scale = 1/(rows·cols).
SC_HD inline float MseRow(const float* y, const float* target, float* dy, int cols, float scale) {
  return SumInLanes(cols, [&](int c) {
    const float d = y[c] - target[c];
    dy[c] = 2.0f * d * scale;
    return d * d;
  });
}

// Returns −log softmax(y)[label] (max-shifted, so large logits do not overflow);
// dy[c] = (softmax(y)[c] − [c == label]) · scale, scale = 1/rows.
SC_HD inline float CrossEntropyRow(const float* y, int label, float* dy, int cols, float scale) {
  const float label_y = y[label];  // read before dy is written: dy may be y (the logits' gradient in place)
  float max_y = y[0];
  for (int c = 1; c < cols; ++c) max_y = y[c] > max_y ? y[c] : max_y;
  const float denom = SumInLanes(cols, [&](int c) { return dy[c] = ExpNonPositive(y[c] - max_y); });
  const float inv = 1.0f / denom;
  for (int c = 0; c < cols; ++c) dy[c] = dy[c] * inv * scale;
  if (label >= 0 && label < cols) dy[label] -= scale;  // callers check labels; never write outside
  return logf(denom) - (label_y - max_y);
}

}  // namespace stagecraft::kernels
