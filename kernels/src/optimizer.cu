// CUDA kernels and launchers for the SGD-momentum and Adam updates, one thread per parameter,
// running optimizer.h's SC_HD math; each leaves its gradient zeroed, as the host loops do.
#include "stagecraft/kernels/optimizer.h"

#include "launch.cuh"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::kernels {
namespace {

__global__ void SgdMomentumKernel(int64_t n, const float* w_in, float* w_out, float* velocity, float* grad,
                                  float grad_scale, float lr, float momentum) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    w_out[i] = SgdMomentumUpdate(w_in[i], velocity + i, ConsumeGradient(grad + i, grad_scale), lr, momentum);
  }
}

__global__ void AdamKernel(int64_t n, const float* w_in, float* w_out, float* m, float* v, float* grad,
                           float grad_scale, AdamParams params) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    w_out[i] = AdamUpdate(w_in[i], m + i, v + i, ConsumeGradient(grad + i, grad_scale), params);
  }
}

}  // namespace

void LaunchSgdMomentum(int64_t n, const float* w_in, float* w_out, float* velocity, float* grad, float grad_scale,
                       float lr, float momentum, cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchSgdMomentum";
  RequireNonNegative(kLauncher, "n", n);
  if (n == 0) return;
  RequireDevicePointer(kLauncher, "w_in", w_in);
  RequireDevicePointer(kLauncher, "w_out", w_out);
  RequireDevicePointer(kLauncher, "velocity", velocity);
  RequireDevicePointer(kLauncher, "grad", grad);
  SgdMomentumKernel<<<BlocksFor(n), kBlockSize, 0, stream>>>(n, w_in, w_out, velocity, grad, grad_scale, lr, momentum);
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchAdam(int64_t n, const float* w_in, float* w_out, float* m, float* v, float* grad, float grad_scale,
                const AdamParams& params, cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchAdam";
  RequireNonNegative(kLauncher, "n", n);
  if (n == 0) return;
  RequireDevicePointer(kLauncher, "w_in", w_in);
  RequireDevicePointer(kLauncher, "w_out", w_out);
  RequireDevicePointer(kLauncher, "m", m);
  RequireDevicePointer(kLauncher, "v", v);
  RequireDevicePointer(kLauncher, "grad", grad);
  // A zero bias correction (t = 0, or a forgotten update of bias1/bias2) would turn every weight into NaN.
  if (!(params.bias1 > 0.0f && params.bias2 > 0.0f)) {
    throw std::invalid_argument("LaunchAdam: params.bias1 and params.bias2 must be > 0 (1 - beta^t, t >= 1), got " +
                                std::to_string(params.bias1) + " and " + std::to_string(params.bias2));
  }
  AdamKernel<<<BlocksFor(n), kBlockSize, 0, stream>>>(n, w_in, w_out, m, v, grad, grad_scale, params);
  SC_CUDA_CHECK(cudaGetLastError());
}

void PreloadOptimizerKernels() {
  PreloadKernel(SgdMomentumKernel);
  PreloadKernel(AdamKernel);
}

}  // namespace stagecraft::kernels
