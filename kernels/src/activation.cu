// CUDA kernels and launchers for bias + activation (+ residual), its backward and the bias gradient:
// one thread per element running activation.h's SC_HD math; the bias gradient sums over the rows
// in column_sums.h's two passes (deterministic, tiled over the rows so that a few hundred columns
// still fill the GPU).
#include "stagecraft/kernels/activation.h"

#include "column_sum.cuh"
#include "launch.cuh"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::kernels {
namespace {

template <typename Act>
__global__ void BiasActivationKernel(int64_t n, int cols, float* z, const float* bias, const float* residual,
                                     float* out) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) BiasActivationAt(Act{}, i, cols, z, bias, residual, out);
}

template <typename Act>
__global__ void ActivationBackwardKernel(int64_t n, const float* dout, const float* z, float* dz) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) ActivationBackwardAt(Act{}, i, dout, z, dz);
}

// Row r's term of column c: dz[r][c] (BiasGradAt's sum, in column_sums.h's order).
struct BiasGradTerms {
  static constexpr int kOutputs = 1;
  const float* dz;
  int cols;
  __device__ void Add(int64_t r, int c, float (&sums)[kOutputs]) const { sums[0] += dz[r * cols + c]; }
};

}  // namespace

void LaunchBiasActivation(Activation act, int rows, int cols, float* z, const float* bias, const float* residual,
                          float* out, cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchBiasActivation";
  RequirePositive(kLauncher, "rows", rows);
  RequirePositive(kLauncher, "cols", cols);
  RequireDevicePointer(kLauncher, "z", z);
  RequireDevicePointer(kLauncher, "bias", bias);
  RequireDevicePointer(kLauncher, "out", out);
  const int64_t n = static_cast<int64_t>(rows) * cols;
  if (act == Activation::kRelu) {
    BiasActivationKernel<ReluOp><<<BlocksFor(n), kBlockSize, 0, stream>>>(n, cols, z, bias, residual, out);
  } else {
    BiasActivationKernel<GeluOp><<<BlocksFor(n), kBlockSize, 0, stream>>>(n, cols, z, bias, residual, out);
  }
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchActivationBackward(Activation act, int64_t n, const float* dout, const float* z, float* dz,
                              cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchActivationBackward";
  RequireNonNegative(kLauncher, "n", n);
  if (n == 0) return;
  RequireDevicePointer(kLauncher, "dout", dout);
  RequireDevicePointer(kLauncher, "z", z);
  RequireDevicePointer(kLauncher, "dz", dz);
  if (act == Activation::kRelu) {
    ActivationBackwardKernel<ReluOp><<<BlocksFor(n), kBlockSize, 0, stream>>>(n, dout, z, dz);
  } else {
    ActivationBackwardKernel<GeluOp><<<BlocksFor(n), kBlockSize, 0, stream>>>(n, dout, z, dz);
  }
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchBiasGrad(int rows, int cols, const float* dz, float* bias_grad, bool accumulate, ScratchSpan scratch,
                    cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchBiasGrad";
  RequirePositive(kLauncher, "rows", rows);
  RequirePositive(kLauncher, "cols", cols);
  RequireDevicePointer(kLauncher, "dz", dz);
  RequireDevicePointer(kLauncher, "bias_grad", bias_grad);
  LaunchColumnSums(kLauncher, rows, cols, BiasGradTerms{dz, cols}, ColumnOutputs<1>{{bias_grad}}, accumulate, scratch,
                   stream);
}

void PreloadActivationKernels() {
  PreloadKernel(BiasActivationKernel<ReluOp>);
  PreloadKernel(BiasActivationKernel<GeluOp>);
  PreloadKernel(ActivationBackwardKernel<ReluOp>);
  PreloadKernel(ActivationBackwardKernel<GeluOp>);
  PreloadKernel(ColumnPartialsKernel<BiasGradTerms>);
  PreloadKernel(ColumnFinishKernel<BiasGradTerms::kOutputs>);
}

}  // namespace stagecraft::kernels
