// CUDA kernels and launchers that fill a tensor with one value and round fp32 tensors to the
// 16-bit formats the GEMMs of a bf16 or fp16 run read (fp32 master copies stay as they are).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "launch.cuh"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::kernels {
namespace {

__global__ void FillKernel(int64_t n, float value, float* dst) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) dst[i] = value;
}

__global__ void ToBf16Kernel(int64_t n, const float* src, __nv_bfloat16* dst) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void ToFp16Kernel(int64_t n, const float* src, __half* dst) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) dst[i] = __float2half_rn(src[i]);
}

}  // namespace

void LaunchFill(int64_t n, float value, float* dst, cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchFill";
  RequireNonNegative(kLauncher, "n", n);
  if (n == 0) return;
  RequireDevicePointer(kLauncher, "dst", dst);
  FillKernel<<<BlocksFor(n), kBlockSize, 0, stream>>>(n, value, dst);
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchToHalf(HalfFormat format, int64_t n, const float* src, void* dst, cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchToHalf";
  RequireNonNegative(kLauncher, "n", n);
  if (n == 0) return;
  RequireDevicePointer(kLauncher, "src", src);
  RequireDevicePointer(kLauncher, "dst", dst);
  if (format == HalfFormat::kBf16) {
    ToBf16Kernel<<<BlocksFor(n), kBlockSize, 0, stream>>>(n, src, static_cast<__nv_bfloat16*>(dst));
  } else if (format == HalfFormat::kFp16) {
    ToFp16Kernel<<<BlocksFor(n), kBlockSize, 0, stream>>>(n, src, static_cast<__half*>(dst));
  } else {
    throw std::invalid_argument("LaunchToHalf: unknown HalfFormat " + std::to_string(static_cast<int>(format)));
  }
  SC_CUDA_CHECK(cudaGetLastError());
}

void PreloadConvertKernels() {
  PreloadKernel(FillKernel);
  PreloadKernel(ToBf16Kernel);
  PreloadKernel(ToFp16Kernel);
}

}  // namespace stagecraft::kernels
