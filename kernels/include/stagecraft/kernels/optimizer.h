// Optimizer updates of one parameter, with the conventions of torch.optim:
//   SGD with momentum μ (dampening 0):  v ← μ v + g;  w ← w − lr · v
//   Adam (Kingma & Ba, 2015):           m ← β1 m + (1 − β1) g;  v ← β2 v + (1 − β2) g²;
//                                       w ← w − lr · (m / (1 − β1ᵗ)) / (√(v / (1 − β2ᵗ)) + ε)
// `g` is the already averaged gradient; t counts this stage's updates from 1.
#pragma once

#include <cmath>

#include "stagecraft/kernels/hd.h"

namespace stagecraft::kernels {

struct AdamParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float bias1 = 1.0f;  // 1 − β1ᵗ for this update
  float bias2 = 1.0f;  // 1 − β2ᵗ
};

// An update consumes its gradient: it reads an element (times grad_scale, the average over the
// update's microbatches) and leaves 0 there, for the next update's backward to add into.
SC_HD inline float ConsumeGradient(float* grad, float grad_scale) {
  const float g = *grad * grad_scale;
  *grad = 0.0f;
  return g;
}

// Each update takes the weight's old value and returns its new one, so that a STEP can write the
// next version beside the one it reads (a schedule that keeps the old version) or over it.
SC_HD inline float SgdMomentumUpdate(float w, float* velocity, float g, float lr, float momentum) {
  *velocity = momentum * *velocity + g;
  return w - lr * *velocity;
}

SC_HD inline float AdamUpdate(float w, float* m, float* v, float g, const AdamParams& p) {
  *m = p.beta1 * *m + (1.0f - p.beta1) * g;
  *v = p.beta2 * *v + (1.0f - p.beta2) * g * g;
  const float m_hat = *m / p.bias1;
  const float v_hat = *v / p.bias2;
  return w - p.lr * m_hat / (sqrtf(v_hat) + p.eps);
}

}  // namespace stagecraft::kernels
