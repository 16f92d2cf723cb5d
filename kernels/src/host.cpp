// Host loops over the SC_HD kernels math (see host.h).
#include "stagecraft/kernels/host.h"

#include "stagecraft/kernels/activation.h"
#include "stagecraft/kernels/loss.h"

namespace stagecraft::kernels {

void BiasGelu(int rows, int cols, float* z, const float* bias, const float* residual, float* out) {
  const int64_t n = static_cast<int64_t>(rows) * cols;
  for (int64_t i = 0; i < n; ++i) BiasGeluAt(i, cols, z, bias, residual, out);
}

void GeluBackward(int64_t n, const float* dout, const float* z, float* dz) {
  for (int64_t i = 0; i < n; ++i) GeluBackwardAt(i, dout, z, dz);
}

void BiasGrad(int rows, int cols, const float* dz, float* bias_grad) {
  for (int c = 0; c < cols; ++c) BiasGradAt(c, rows, cols, dz, bias_grad);
}

float Loss(LossKind kind, int rows, int cols, const float* y, const float* targets, float* dy) {
  float sum = 0.0f;
  if (kind == LossKind::kMse) {
    const float scale = 1.0f / (static_cast<float>(rows) * cols);
    for (int r = 0; r < rows; ++r) {
      const int64_t at = static_cast<int64_t>(r) * cols;
      sum += MseRow(y + at, targets + at, dy + at, cols, scale);
    }
    return sum * scale;
  }
  const float scale = 1.0f / static_cast<float>(rows);
  for (int r = 0; r < rows; ++r) {
    const int64_t at = static_cast<int64_t>(r) * cols;
    sum += CrossEntropyRow(y + at, static_cast<int>(targets[r]), dy + at, cols, scale);
  }
  return sum * scale;
}

void SgdMomentum(int64_t n, float* w, float* velocity, const float* grad, float grad_scale, float lr, float momentum) {
  for (int64_t i = 0; i < n; ++i) SgdMomentumUpdate(w + i, velocity + i, grad[i] * grad_scale, lr, momentum);
}

void Adam(int64_t n, float* w, float* m, float* v, const float* grad, float grad_scale, const AdamParams& params) {
  for (int64_t i = 0; i < n; ++i) AdamUpdate(w + i, m + i, v + i, grad[i] * grad_scale, params);
}

}  // namespace stagecraft::kernels
