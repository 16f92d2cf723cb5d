// Loss functions of the MLP's last stage, one row (sample) at a time: each returns the row's
// loss term and writes the gradient of the microbatch loss with respect to the row.
//   mse:            L = 1/(rows·cols) Σ (y − t)²           dL/dy = 2 (y − t) / (rows·cols)
//   cross_entropy:  L = 1/rows Σ −log softmax(y)[label]     dL/dy = (softmax(y) − onehot) / rows
#pragma once

#include <cmath>

#include "stagecraft/kernels/hd.h"

namespace stagecraft::kernels {

// Returns Σ_c (y[c] − t[c])² over the row; dy[c] = 2 (y[c] − t[c]) · scale, scale = 1/(rows·cols).
SC_HD inline float MseRow(const float* y, const float* target, float* dy, int cols, float scale) {
  float sum = 0.0f;
  for (int c = 0; c < cols; ++c) {
    const float d = y[c] - target[c];
    sum += d * d;
    dy[c] = 2.0f * d * scale;
  }
  return sum;
}

// Returns −log softmax(y)[label] (max-shifted, so large logits do not overflow);
// dy[c] = (softmax(y)[c] − [c == label]) · scale, scale = 1/rows.
SC_HD inline float CrossEntropyRow(const float* y, int label, float* dy, int cols, float scale) {
  float max_y = y[0];
  for (int c = 1; c < cols; ++c) max_y = fmaxf(max_y, y[c]);
  float denom = 0.0f;
  for (int c = 0; c < cols; ++c) denom += expf(y[c] - max_y);
  for (int c = 0; c < cols; ++c) {
    const float p = expf(y[c] - max_y) / denom;
    dy[c] = (p - (c == label ? 1.0f : 0.0f)) * scale;
  }
  return logf(denom) - (y[label] - max_y);
}

}  // namespace stagecraft::kernels
