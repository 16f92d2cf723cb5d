// CUDA launchers of the kernels/ math, one per host.h function and with the same meaning; all
// pointers are device pointers and the stream comes last. Each launch is asynchronous on `stream`;
// bad shapes throw std::invalid_argument, CUDA errors std::runtime_error (SC_CUDA_CHECK).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "stagecraft/kernels/host.h"
#include "stagecraft/kernels/optimizer.h"

namespace stagecraft::kernels {

// z += bias, out = act(z) (+ residual). z, out, residual: [rows x cols] row-major; bias: [cols];
// residual may be null.
void LaunchBiasActivation(Activation act, int rows, int cols, float* z, const float* bias, const float* residual,
                          float* out, cudaStream_t stream);
// dz = dout · act'(z), n elements.
void LaunchActivationBackward(Activation act, int64_t n, const float* dout, const float* z, float* dz,
                              cudaStream_t stream);
// bias_grad[c] ← Σ_r dz[r][c], added to what it holds when `accumulate`, else written.
void LaunchBiasGrad(int rows, int cols, const float* dz, float* bias_grad, bool accumulate, cudaStream_t stream);
// dy ([rows x cols]) ← gradient of the mean loss; *mean_loss_device (one float) ← the mean loss.
// targets: [rows x cols] for mse, [rows] class indices (stored as float) for cross_entropy; a label
// outside [0, cols) makes that row's dy and the loss NaN instead of reading out of bounds.
void LaunchLoss(LossKind kind, int rows, int cols, const float* y, const float* targets, float* dy,
                float* mean_loss_device, cudaStream_t stream);
// w_out ← SGD-momentum(w_in, grad · grad_scale), n elements; w_out may be w_in (in place).
void LaunchSgdMomentum(int64_t n, const float* w_in, float* w_out, float* velocity, const float* grad, float grad_scale,
                       float lr, float momentum, cudaStream_t stream);
// w_out ← Adam(w_in, grad · grad_scale), n elements; w_out may be w_in; params.bias1/bias2 must be > 0.
void LaunchAdam(int64_t n, const float* w_in, float* w_out, float* m, float* v, const float* grad, float grad_scale,
                const AdamParams& params, cudaStream_t stream);

// dst[i] = value, n elements.
void LaunchFill(int64_t n, float value, float* dst, cudaStream_t stream);
// The 16-bit formats a GEMM may read: bf16 (__nv_bfloat16) or fp16 (__half).
enum class HalfFormat { kBf16, kFp16 };
// dst[i] = src[i] rounded to nearest even in `format`, n elements; dst holds n 16-bit values.
void LaunchToHalf(HalfFormat format, int64_t n, const float* src, void* dst, cudaStream_t stream);

}  // namespace stagecraft::kernels
