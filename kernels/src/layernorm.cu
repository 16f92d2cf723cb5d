// CUDA kernels and launchers for LayerNorm, the residual stream's update fused before it, and
// LayerNorm's two gradients (layernorm.h's math). The
// forward and the input gradient give each row to one warp (as llm.c does), its columns kept in
// registers for rows up to 1024 wide (one read of the row): lane l takes
// columns l, l + 32, ... and the row's sums meet in a shuffle butterfly (warp_rows.cuh), so a
// GPT's 8192 rows keep every SM busy where a thread per row ran 32 blocks. The weight gradient
// sums over the rows in column_sums.h's two passes. No atomics: every result is written by one
// thread after additions in an order fixed by the shape, and repeats bit for bit from run to
// run. The sums run in another order than the host loop's lanes, so the two agree to rounding.
#include "stagecraft/kernels/layernorm.h"

#include "column_sum.cuh"
#include "launch.cuh"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"
#include "warp_rows.cuh"

namespace stagecraft::kernels {
namespace {

// LayerNormRow's expressions: the mean, then the variance about it (two reads of the row, as
// the host does, rather than E[x²] − μ², which cancels), then the output.
__global__ void LayerNormKernel(int rows, int cols, const float* x, const float* gamma, const float* beta, float* out,
                                float* mean, float* rstd) {
  const int lane = Lane();
  for (int64_t r = FirstWarpRow(); r < rows; r += WarpRowStride()) {
    const float* xr = x + r * cols;
    float sum = 0.0f;
    for (int c = lane; c < cols; c += kWarpSize) sum += xr[c];
    const float mu = WarpSum(sum) / static_cast<float>(cols);
    float squares = 0.0f;
    for (int c = lane; c < cols; c += kWarpSize) {
      const float d = xr[c] - mu;
      squares += d * d;
    }
    const float var = WarpSum(squares) / static_cast<float>(cols);
    const float rs = 1.0f / sqrtf(var + kLayerNormEps);
    float* out_r = out + r * cols;
    for (int c = lane; c < cols; c += kWarpSize) out_r[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
    if (lane == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
}

// Row r of the input gradient's operands: its dout, x and dx rows and its statistics.
struct BackwardRow {
  const float* d;
  const float* x;
  float* dx;
  float mean, rstd;
};
__device__ inline BackwardRow RowOf(int64_t r, int cols, const float* dout, const float* x, const float* mean,
                                    const float* rstd, float* dx) {
  const int64_t at = r * cols;
  return BackwardRow{dout + at, x + at, dx + at, mean[r], rstd[r]};
}

// LayerNormBackwardInputRow's expressions; both means come from one read of the row. Each lane
// reads and writes only its own columns, so dx may be dout (in place).
__global__ void LayerNormBackwardInputKernel(int rows, int cols, const float* dout, const float* x, const float* gamma,
                                             const float* mean, const float* rstd, float* dx, bool accumulate) {
  const int lane = Lane();
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (int64_t r = FirstWarpRow(); r < rows; r += WarpRowStride()) {
    const BackwardRow row = RowOf(r, cols, dout, x, mean, rstd, dx);
    const float *d = row.d, *xr = row.x;
    const float m = row.mean, rs = row.rstd;
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int c = lane; c < cols; c += kWarpSize) {
      sum_g += d[c] * gamma[c];
      sum_gx += d[c] * gamma[c] * (xr[c] - m) * rs;
    }
    const float mean_g = WarpSum(sum_g) * inv_cols;
    const float mean_gx = WarpSum(sum_gx) * inv_cols;
    float* dx_r = row.dx;
    for (int c = lane; c < cols; c += kWarpSize) {
      const float xhat = (xr[c] - m) * rs;
      const float grad = rs * (d[c] * gamma[c] - mean_g - xhat * mean_gx);
      dx_r[c] = accumulate ? dx_r[c] + grad : grad;
    }
  }
}

// Rows up to kCachedCols wide are read once: each lane keeps its columns in registers (fully
// unrolled, so the arrays stay there) and the same expressions run on them in the same order (the
// uncached kernels' results to rounding, should the compiler contract them otherwise), still
// repeating bit for bit from run to run. A GPT's 768 (up to 1024) columns: the forward
// reads x once where it read it three times, the input gradient dout and x once where twice.
constexpr int kCachedPerLane = 32;
constexpr int kCachedCols = kCachedPerLane * kWarpSize;

// With `bias` (the residual stream's update, ResidualLayerNorm): x += bias + residual first, in
// the same read, the sum written back to x (BiasAdd's x + (bias + residual)).
__global__ void __launch_bounds__(kBlockSize)
    LayerNormCachedKernel(int rows, int cols, const float* x, const float* gamma, const float* beta, float* out,
                          float* mean, float* rstd, float* sum_out, const float* bias, const float* residual) {
  const int lane = Lane();
  for (int64_t r = FirstWarpRow(); r < rows; r += WarpRowStride()) {
    const float* xr = x + r * cols;
    float v[kCachedPerLane];
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kCachedPerLane; ++i) {
      const int c = lane + i * kWarpSize;
      v[i] = c < cols ? xr[c] : 0.0f;
      if (bias != nullptr && c < cols) {
        v[i] += bias[c] + residual[r * cols + c];
        sum_out[r * cols + c] = v[i];
      }
      if (c < cols) sum += v[i];
    }
    const float mu = WarpSum(sum) / static_cast<float>(cols);
    float squares = 0.0f;
#pragma unroll
    for (int i = 0; i < kCachedPerLane; ++i) {
      const float d = v[i] - mu;
      if (lane + i * kWarpSize < cols) squares += d * d;
    }
    const float var = WarpSum(squares) / static_cast<float>(cols);
    const float rs = 1.0f / sqrtf(var + kLayerNormEps);
    float* out_r = out + r * cols;
#pragma unroll
    for (int i = 0; i < kCachedPerLane; ++i) {
      const int c = lane + i * kWarpSize;
      if (c < cols) out_r[c] = (v[i] - mu) * rs * gamma[c] + beta[c];
    }
    if (lane == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
}

// g = dout·γ and x − mean kept from the first read; the sums and dx as the uncached kernel's
// expressions ((g · (x − m)) · rstd, x̂ = (x − m) · rstd).
__global__ void __launch_bounds__(kBlockSize)
    LayerNormBackwardInputCachedKernel(int rows, int cols, const float* dout, const float* x, const float* gamma,
                                       const float* mean, const float* rstd, float* dx, bool accumulate) {
  const int lane = Lane();
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (int64_t r = FirstWarpRow(); r < rows; r += WarpRowStride()) {
    const BackwardRow row = RowOf(r, cols, dout, x, mean, rstd, dx);
    const float *d = row.d, *xr = row.x;
    const float m = row.mean, rs = row.rstd;
    float g[kCachedPerLane], xm[kCachedPerLane];
    float sum_g = 0.0f, sum_gx = 0.0f;
#pragma unroll
    for (int i = 0; i < kCachedPerLane; ++i) {
      const int c = lane + i * kWarpSize;
      g[i] = c < cols ? d[c] * gamma[c] : 0.0f;
      xm[i] = c < cols ? xr[c] - m : 0.0f;
      if (c < cols) {
        sum_g += g[i];
        sum_gx += g[i] * xm[i] * rs;
      }
    }
    const float mean_g = WarpSum(sum_g) * inv_cols;
    const float mean_gx = WarpSum(sum_gx) * inv_cols;
    float* dx_r = row.dx;
#pragma unroll
    for (int i = 0; i < kCachedPerLane; ++i) {
      const int c = lane + i * kWarpSize;
      if (c < cols) {
        const float xhat = xm[i] * rs;
        const float grad = rs * (g[i] - mean_g - xhat * mean_gx);
        dx_r[c] = accumulate ? dx_r[c] + grad : grad;
      }
    }
  }
}

// Row r's terms of column c: dout·x̂ (dgamma) and dout (dbeta), as the host loop writes them.
struct LayerNormWeightTerms {
  static constexpr int kOutputs = 2;
  const float* dout;
  const float* x;
  const float* mean;
  const float* rstd;
  int cols;
  __device__ void Add(int64_t r, int c, float (&sums)[kOutputs]) const {
    const int64_t at = r * cols + c;
    const float d = dout[at];
    sums[0] += d * ((x[at] - mean[r]) * rstd[r]);
    sums[1] += d;
  }
};

}  // namespace

namespace {

// LayerNorm's checks and launch, with the residual stream's update before it where `bias` is
// given (rows kept in registers; LaunchResidualLayerNorm sends wider ones to two launches).
void LayerNormPass(const char* launcher, int rows, int cols, const float* x, const float* gamma, const float* beta,
                   float* out, float* mean, float* rstd, float* sum_out, const float* bias, const float* residual,
                   cudaStream_t stream) {
  RequirePositive(launcher, "rows", rows);
  RequirePositive(launcher, "cols", cols);
  RequireDevicePointer(launcher, "x", x);
  RequireDevicePointer(launcher, "gamma", gamma);
  RequireDevicePointer(launcher, "beta", beta);
  RequireDevicePointer(launcher, "out", out);
  RequireDevicePointer(launcher, "mean", mean);
  RequireDevicePointer(launcher, "rstd", rstd);
  if (cols <= kCachedCols) {
    LayerNormCachedKernel<<<BlocksForWarpRows(rows), kBlockSize, 0, stream>>>(rows, cols, x, gamma, beta, out, mean,
                                                                             rstd, sum_out, bias, residual);
  } else {
    LayerNormKernel<<<BlocksForWarpRows(rows), kBlockSize, 0, stream>>>(rows, cols, x, gamma, beta, out, mean, rstd);
  }
  SC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void LaunchLayerNorm(int rows, int cols, const float* x, const float* gamma, const float* beta, float* out,
                     float* mean, float* rstd, cudaStream_t stream) {
  LayerNormPass("LaunchLayerNorm", rows, cols, x, gamma, beta, out, mean, rstd, nullptr, nullptr, nullptr, stream);
}

void LaunchResidualLayerNorm(int rows, int cols, float* x, const float* bias, const float* residual,
                             const float* gamma, const float* beta, float* out, float* mean, float* rstd,
                             cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchResidualLayerNorm";
  RequirePositive(kLauncher, "cols", cols);
  RequireDevicePointer(kLauncher, "bias", bias);
  RequireDevicePointer(kLauncher, "residual", residual);
  if (cols > kCachedCols) {  // the two passes, each checking the rest
    LaunchBiasAdd(rows, cols, x, bias, residual, stream);
    LaunchLayerNorm(rows, cols, x, gamma, beta, out, mean, rstd, stream);
    return;
  }
  LayerNormPass(kLauncher, rows, cols, x, gamma, beta, out, mean, rstd, x, bias, residual, stream);
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
  if (cols <= kCachedCols) {
    LayerNormBackwardInputCachedKernel<<<BlocksForWarpRows(rows), kBlockSize, 0, stream>>>(
        rows, cols, dout, x, gamma, mean, rstd, dx, accumulate);
  } else {
    LayerNormBackwardInputKernel<<<BlocksForWarpRows(rows), kBlockSize, 0, stream>>>(rows, cols, dout, x, gamma, mean,
                                                                                    rstd, dx, accumulate);
  }
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchLayerNormBackwardWeight(int rows, int cols, const float* dout, const float* x, const float* mean,
                                   const float* rstd, float* dgamma, float* dbeta, bool accumulate,
                                   ScratchSpan scratch, cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchLayerNormBackwardWeight";
  RequirePositive(kLauncher, "rows", rows);
  RequirePositive(kLauncher, "cols", cols);
  RequireDevicePointer(kLauncher, "dout", dout);
  RequireDevicePointer(kLauncher, "x", x);
  RequireDevicePointer(kLauncher, "mean", mean);
  RequireDevicePointer(kLauncher, "rstd", rstd);
  RequireDevicePointer(kLauncher, "dgamma", dgamma);
  RequireDevicePointer(kLauncher, "dbeta", dbeta);
  LaunchColumnSums(kLauncher, rows, cols, LayerNormWeightTerms{dout, x, mean, rstd, cols},
                   ColumnOutputs<2>{{dgamma, dbeta}}, accumulate, scratch, stream);
}

void PreloadLayerNormKernels() {
  PreloadKernel(LayerNormKernel);
  PreloadKernel(LayerNormBackwardInputKernel);
  PreloadKernel(LayerNormCachedKernel);
  PreloadKernel(LayerNormBackwardInputCachedKernel);
  PreloadKernel(ColumnPartialsKernel<LayerNormWeightTerms>);
  PreloadKernel(ColumnFinishKernel<LayerNormWeightTerms::kOutputs>);
}

}  // namespace stagecraft::kernels
