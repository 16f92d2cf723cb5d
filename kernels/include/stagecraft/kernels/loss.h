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

SC_HD inline float SumLanes(const float* lanes) {
  float sum = 0.0f;
  for (int j = 0; j < kLanes; ++j) sum += lanes[j];
  return sum;
}

// Returns Σ_c (y[c] − t[c])² over the row; dy[c] = 2 (y[c] − t[c]) · scale, scale = 1/(rows·cols).
SC_HD inline float MseRow(const float* y, const float* target, float* dy, int cols, float scale) {
  float lanes[kLanes] = {};
  int c = 0;
  for (; c + kLanes <= cols; c += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float d = y[c + j] - target[c + j];
      lanes[j] += d * d;
      dy[c + j] = 2.0f * d * scale;
    }
  }
  for (int j = 0; c < cols; ++c, ++j) {
    const float d = y[c] - target[c];
    lanes[j] += d * d;
    dy[c] = 2.0f * d * scale;
  }
  return SumLanes(lanes);
}

// Returns −log softmax(y)[label] (max-shifted, so large logits do not overflow);
// dy[c] = (softmax(y)[c] − [c == label]) · scale, scale = 1/rows.
SC_HD inline float CrossEntropyRow(const float* y, int label, float* dy, int cols, float scale) {
  float max_y = y[0];
  for (int c = 1; c < cols; ++c) max_y = y[c] > max_y ? y[c] : max_y;
  float lanes[kLanes] = {};
  int c = 0;
  for (; c + kLanes <= cols; c += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float e = ExpNonPositive(y[c + j] - max_y);
      lanes[j] += e;
      dy[c + j] = e;
    }
  }
  for (int j = 0; c < cols; ++c, ++j) {
    const float e = ExpNonPositive(y[c] - max_y);
    lanes[j] += e;
    dy[c] = e;
  }
  const float denom = SumLanes(lanes);
  const float inv = 1.0f / denom;
  for (c = 0; c < cols; ++c) dy[c] = dy[c] * inv * scale;
  if (label >= 0 && label < cols) dy[label] -= scale;  // callers check labels; never write outside
  return logf(denom) - (y[label] - max_y);
}

}  // namespace stagecraft::kernels
