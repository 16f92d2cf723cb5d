// CUDA kernel and launcher for the transformer's bias add (+ residual): one thread per element,
// the same expression as the host loop (transformer_host.cpp), so both backends agree bit for bit.
#include "launch.cuh"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::kernels {
namespace {

__global__ void BiasAddKernel(int64_t n, int cols, float* x, const float* bias, const float* residual) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const float b = bias[i % cols];
    // x + (bias + residual), in the host loop's order.
    x[i] += residual != nullptr ? b + residual[i] : b;
  }
}

}  // namespace

void LaunchBiasAdd(int rows, int cols, float* x, const float* bias, const float* residual, cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchBiasAdd";
  RequirePositive(kLauncher, "rows", rows);
  RequirePositive(kLauncher, "cols", cols);
  RequireDevicePointer(kLauncher, "x", x);
  RequireDevicePointer(kLauncher, "bias", bias);
  const int64_t n = static_cast<int64_t>(rows) * cols;
  BiasAddKernel<<<BlocksFor(n), kBlockSize, 0, stream>>>(n, cols, x, bias, residual);
  SC_CUDA_CHECK(cudaGetLastError());
}

void PreloadBiasAddKernels() { PreloadKernel(BiasAddKernel); }

}  // namespace stagecraft::kernels
