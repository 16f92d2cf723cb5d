// CUDA kernels and launchers for bias + activation (+ residual), its backward and the bias gradient:
// one thread per element running activation.h's SC_HD math, or per four elements moved as float4
// where the tensors allow (aligned, whole quads per row); the bias gradient sums over the rows
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

// The same math four elements at a time, each tensor moved as float4 (128-bit loads and stores):
// where every pointer is 16-byte aligned and the columns a multiple of 4, so a quad lies in one
// row and its bias is bias[c .. c + 3]. Each element as BiasActivationAt and
// ActivationBackwardAt compute it, in the same order. A quad is read whole before it is written,
// so dz may be dout and out may be z or the residual; the residual may not be z (the scalar path
// would read z after adding the bias).
template <typename Act>
__device__ inline float BiasActivationOf(Act act, float& z, float bias, const float* residual, int j) {
  z += bias;
  return act(z) + (residual != nullptr ? residual[j] : 0.0f);
}

template <typename Act>
__global__ void BiasActivationQuadKernel(int64_t quads, int col_quads, float4* z, const float4* bias,
                                         const float4* residual, float4* out) {
  for (int64_t q = FirstIndex(); q < quads; q += GridStride()) {
    float4 zq = z[q];
    const float4 b = bias[q % col_quads];
    float r[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (residual != nullptr) {
      const float4 rq = residual[q];
      r[0] = rq.x, r[1] = rq.y, r[2] = rq.z, r[3] = rq.w;
    }
    const float* rp = residual != nullptr ? r : nullptr;
    float4 o;
    o.x = BiasActivationOf(Act{}, zq.x, b.x, rp, 0);
    o.y = BiasActivationOf(Act{}, zq.y, b.y, rp, 1);
    o.z = BiasActivationOf(Act{}, zq.z, b.z, rp, 2);
    o.w = BiasActivationOf(Act{}, zq.w, b.w, rp, 3);
    z[q] = zq;
    out[q] = o;
  }
}

template <typename Act>
__global__ void ActivationBackwardQuadKernel(int64_t quads, const float4* dout, const float4* z, float4* dz) {
  const Act act{};
  for (int64_t q = FirstIndex(); q < quads; q += GridStride()) {
    const float4 d = dout[q], zq = z[q];
    dz[q] = make_float4(d.x * act.Grad(zq.x), d.y * act.Grad(zq.y), d.z * act.Grad(zq.z), d.w * act.Grad(zq.w));
  }
}

bool Aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

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
  if (cols % 4 == 0 && Aligned16(z) && Aligned16(bias) && Aligned16(residual) && Aligned16(out)) {
    const int64_t quads = n / 4;
    auto* z4 = reinterpret_cast<float4*>(z);
    auto* out4 = reinterpret_cast<float4*>(out);
    const auto* bias4 = reinterpret_cast<const float4*>(bias);
    const auto* residual4 = reinterpret_cast<const float4*>(residual);
    if (act == Activation::kRelu) {
      BiasActivationQuadKernel<ReluOp><<<BlocksFor(quads), kBlockSize, 0, stream>>>(quads, cols / 4, z4, bias4,
                                                                                   residual4, out4);
    } else {
      BiasActivationQuadKernel<GeluOp><<<BlocksFor(quads), kBlockSize, 0, stream>>>(quads, cols / 4, z4, bias4,
                                                                                   residual4, out4);
    }
  } else if (act == Activation::kRelu) {
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
  if (n % 4 == 0 && Aligned16(dout) && Aligned16(z) && Aligned16(dz)) {
    const int64_t quads = n / 4;
    const auto* dout4 = reinterpret_cast<const float4*>(dout);
    const auto* z4 = reinterpret_cast<const float4*>(z);
    auto* dz4 = reinterpret_cast<float4*>(dz);
    if (act == Activation::kRelu) {
      ActivationBackwardQuadKernel<ReluOp><<<BlocksFor(quads), kBlockSize, 0, stream>>>(quads, dout4, z4, dz4);
    } else {
      ActivationBackwardQuadKernel<GeluOp><<<BlocksFor(quads), kBlockSize, 0, stream>>>(quads, dout4, z4, dz4);
    }
  } else if (act == Activation::kRelu) {
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
  PreloadKernel(BiasActivationQuadKernel<ReluOp>);
  PreloadKernel(BiasActivationQuadKernel<GeluOp>);
  PreloadKernel(ActivationBackwardQuadKernel<ReluOp>);
  PreloadKernel(ActivationBackwardQuadKernel<GeluOp>);
  PreloadKernel(ColumnPartialsKernel<BiasGradTerms>);
  PreloadKernel(ColumnFinishKernel<BiasGradTerms::kOutputs>);
}

}  // namespace stagecraft::kernels
