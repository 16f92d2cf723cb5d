// CUDA kernels and launchers for LayerNorm and its two gradients, running layernorm.h's SC_HD row
// math: one thread per row for the forward and the input gradient (the very functions the host
// loops call, so both backends sum each row in the same lanes' order), one thread per column for
// the weight gradient, summing the rows in order as the host loop does. No atomics: every result
// is written by one thread, in a fixed order, and repeats bit for bit from run to run.
#include "stagecraft/kernels/layernorm.h"

#include "launch.cuh"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::kernels {
namespace {

__global__ void LayerNormKernel(int rows, int cols, const float* x, const float* gamma, const float* beta, float* out,
                                float* mean, float* rstd) {
  for (int64_t r = FirstIndex(); r < rows; r += GridStride()) {
    const int64_t at = r * cols;
    LayerNormRow(x + at, gamma, beta, out + at, cols, mean + r, rstd + r);
  }
}

__global__ void LayerNormBackwardInputKernel(int rows, int cols, const float* dout, const float* x, const float* gamma,
                                             const float* mean, const float* rstd, float* dx, bool accumulate) {
  for (int64_t r = FirstIndex(); r < rows; r += GridStride()) {
    const int64_t at = r * cols;
    LayerNormBackwardInputRow(dout + at, x + at, gamma, mean[r], rstd[r], dx + at, cols, accumulate);
  }
}

// The host loop's expressions, column by column: neighbouring threads read neighbouring columns
// of each row (coalesced), and each column's sum runs over the rows in order.
__global__ void LayerNormBackwardWeightKernel(int rows, int cols, const float* dout, const float* x, const float* mean,
                                              const float* rstd, float* dgamma, float* dbeta, bool accumulate) {
  for (int64_t c = FirstIndex(); c < cols; c += GridStride()) {
    float sum_g = 0.0f, sum_b = 0.0f;
    for (int r = 0; r < rows; ++r) {
      const int64_t at = static_cast<int64_t>(r) * cols + c;
      const float d = dout[at];
      sum_g += d * ((x[at] - mean[r]) * rstd[r]);
      sum_b += d;
    }
    dgamma[c] = (accumulate ? dgamma[c] : 0.0f) + sum_g;
    dbeta[c] = (accumulate ? dbeta[c] : 0.0f) + sum_b;
  }
}

}  // namespace

void LaunchLayerNorm(int rows, int cols, const float* x, const float* gamma, const float* beta, float* out,
                     float* mean, float* rstd, cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchLayerNorm";
  RequirePositive(kLauncher, "rows", rows);
  RequirePositive(kLauncher, "cols", cols);
  RequireDevicePointer(kLauncher, "x", x);
  RequireDevicePointer(kLauncher, "gamma", gamma);
  RequireDevicePointer(kLauncher, "beta", beta);
  RequireDevicePointer(kLauncher, "out", out);
  RequireDevicePointer(kLauncher, "mean", mean);
  RequireDevicePointer(kLauncher, "rstd", rstd);
  LayerNormKernel<<<BlocksFor(rows), kBlockSize, 0, stream>>>(rows, cols, x, gamma, beta, out, mean, rstd);
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchLayerNormBackwardInput(int rows, int cols, const float* dout, const float* x, const float* gamma,
                                  const float* mean, const float* rstd, float* dx, bool accumulate,
                                  cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchLayerNormBackwardInput";
  RequirePositive(kLauncher, "rows", rows);
  RequirePositive(kLauncher, "cols", cols);
  RequireDevicePointer(kLauncher, "dout", dout);
  RequireDevicePointer(kLauncher, "x", x);
  RequireDevicePointer(kLauncher, "gamma", gamma);
  RequireDevicePointer(kLauncher, "mean", mean);
  RequireDevicePointer(kLauncher, "rstd", rstd);
  RequireDevicePointer(kLauncher, "dx", dx);
  LayerNormBackwardInputKernel<<<BlocksFor(rows), kBlockSize, 0, stream>>>(rows, cols, dout, x, gamma, mean, rstd, dx,
                                                                          accumulate);
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchLayerNormBackwardWeight(int rows, int cols, const float* dout, const float* x, const float* mean,
                                   const float* rstd, float* dgamma, float* dbeta, bool accumulate,
                                   cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchLayerNormBackwardWeight";
  RequirePositive(kLauncher, "rows", rows);
  RequirePositive(kLauncher, "cols", cols);
  RequireDevicePointer(kLauncher, "dout", dout);
  RequireDevicePointer(kLauncher, "x", x);
  RequireDevicePointer(kLauncher, "mean", mean);
  RequireDevicePointer(kLauncher, "rstd", rstd);
  RequireDevicePointer(kLauncher, "dgamma", dgamma);
  RequireDevicePointer(kLauncher, "dbeta", dbeta);
  LayerNormBackwardWeightKernel<<<BlocksFor(cols), kBlockSize, 0, stream>>>(rows, cols, dout, x, mean, rstd, dgamma,
                                                                           dbeta, accumulate);
  SC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace stagecraft::kernels
