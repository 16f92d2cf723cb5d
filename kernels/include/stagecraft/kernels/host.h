// Whole-tensor versions of the kernels/ math for the CPU backend: plain loops over the same
// SC_HD functions the CUDA launchers (cuda.h) run, one element (or row) per iteration.
#pragma once

#include <cstdint>

#include "stagecraft/kernels/activation.h"
#include "stagecraft/kernels/optimizer.h"

namespace stagecraft::kernels {

enum class LossKind { kMse, kCrossEntropy };

// z += bias per column, out = act(z) (+ residual). z, out, residual: [rows x cols] row-major;
// bias: [cols]; residual may be null.
void BiasActivation(Activation act, int rows, int cols, float* z, const float* bias, const float* residual,
                    float* out);
// dz = dout · act'(z), n elements.
void ActivationBackward(Activation act, int64_t n, const float* dout, const float* z, float* dz);
// bias_grad[c] ← Σ_r dz[r][c], added to what bias_grad holds when `accumulate`, else written.
void BiasGrad(int rows, int cols, const float* dz, float* bias_grad, bool accumulate);
// Mean loss of a microbatch and its gradient dy ([rows x cols]). targets: [rows x cols] for
// mse, [rows] class indices (stored as float) for cross_entropy.
float Loss(LossKind kind, int rows, int cols, const float* y, const float* targets, float* dy);
// w_out ← SGD-momentum(w_in, grad · grad_scale), n elements; w_out may be w_in (in place).
void SgdMomentum(int64_t n, const float* w_in, float* w_out, float* velocity, const float* grad, float grad_scale,
                 float lr, float momentum);
// w_out ← Adam(w_in, grad · grad_scale), n elements; w_out may be w_in (in place).
void Adam(int64_t n, const float* w_in, float* w_out, float* m, float* v, const float* grad, float grad_scale,
          const AdamParams& params);

}  // namespace stagecraft::kernels
