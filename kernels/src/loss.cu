// CUDA kernels and launcher for the last stage's mean loss and its gradient (loss.h's math), sized
// for a GPT's last stage, rows = B·T positions over cols = vocabulary columns (2048 x 50304 is
// ~400 MB of logits): a single block, as the MLP's few rows allowed, would stream all of it
// through one SM. Two kernels instead, on the caller's stream:
//   rows kernel: one block per row (a grid-stride loop over rows past kMaxBlocks). Thread t of
//     the block owns the column quads [4k, 4k + 4) with k = t, t + blockDim, ...; it writes the
//     row's dy at those columns and folds them into its partial (mse: Σ (y − t)²; cross entropy:
//     the running max m and Σ e^(y − m), rescaled when m grows, so the max and the denominator
//     come from one read of the logits). The partials meet in a block reduction of fixed shape
//     (a shuffle tree in each warp, then one warp over the warps' results), and thread 0 writes
//     the row's loss term into a per-row scratch array; cross entropy then reads the row again
//     to write dy = softmax / rows, minus 1/rows at the label.
//   mean kernel: one block adds the per-row terms, each thread a fixed strided set of rows in
//     order and then the same tree, and writes the mean.
// Deterministic: no atomics, and every sum runs in an order fixed by the shape alone. A quad
// loads as one float4 where the row is 16-byte aligned and as four floats elsewhere, through
// the same arithmetic, so the results do not depend on where the tensors lie either.
// The sums run in another order than the host loop's lanes, so the two agree to rounding, not
// bit for bit.
#include "stagecraft/kernels/loss.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "launch.cuh"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::kernels {
namespace {

constexpr int kWarp = 32;
// Threads per row: a quad per thread up to this many (a 50304-column row is then ~25 sweeps of
// 2048 columns), with four blocks resident per SM; narrow rows take fewer (one warp at least).
constexpr int kMaxRowThreads = 512;
constexpr int kMeanThreads = 1024;

int RowThreads(int cols) {
  const int64_t quads = (static_cast<int64_t>(cols) + 3) / 4;
  int threads = kWarp;
  while (threads < kMaxRowThreads && threads < quads) threads *= 2;
  return threads;
}

// The running max of a set of logits and Σ e^(y − max) over it.
struct MaxSum {
  float max;
  float sum;
};

// e^(x − m), taken as 1 when x equals m: a thread or warp that has seen only −∞ logits (masked
// columns) holds m = −∞, and −∞ − (−∞) would make the row NaN; a finite max later scales it to 0.
__device__ inline float ExpShifted(float x, float m) { return x == m ? 1.0f : expf(x - m); }

// The set union of two partials: both sums rescaled to the larger max.
__device__ inline MaxSum Combine(MaxSum a, MaxSum b) {
  const float max = fmaxf(a.max, b.max);
  const float sum_a = a.max == max ? a.sum : a.sum * expf(a.max - max);
  const float sum_b = b.max == max ? b.sum : b.sum * expf(b.max - max);
  return MaxSum{max, sum_a + sum_b};
}

__device__ inline float Combine(float a, float b) { return a + b; }

__device__ inline float ShuffleDown(float value, int offset) { return __shfl_down_sync(0xffffffffu, value, offset); }
__device__ inline MaxSum ShuffleDown(MaxSum value, int offset) {
  return MaxSum{ShuffleDown(value.max, offset), ShuffleDown(value.sum, offset)};
}

// Reduces one value per thread over the block (blockDim.x a multiple of 32, at most 1024) and
// returns the result to every thread: a shuffle tree in each warp, then warp 0 runs the same
// tree over the warps' results, padded with `identity`. The shape depends on blockDim.x alone,
// so the order of the operations is the same on every run. `shared` holds 32 values; every
// thread must call (it has barriers), and calls may follow one another on the same `shared`.
template <typename T>
__device__ T BlockReduce(T value, T identity, T* shared) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  for (int offset = kWarp / 2; offset > 0; offset /= 2) value = Combine(value, ShuffleDown(value, offset));
  __syncthreads();  // the previous call's readers are done with shared[0]
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < static_cast<int>(blockDim.x) / kWarp ? shared[lane] : identity;
    for (int offset = kWarp / 2; offset > 0; offset /= 2) value = Combine(value, ShuffleDown(value, offset));
    if (lane == 0) shared[0] = value;
  }
  __syncthreads();
  return shared[0];
}

// Columns [c, c + 4) of a row clipped to its end: fills v and returns how many (1 to 4). `vector`
// (the row is 16-byte aligned) lets a whole quad load as one float4; the values are the same.
__device__ inline int LoadQuad(const float* row, int64_t c, int64_t cols, bool vector, float (&v)[4]) {
  if (vector && c + 4 <= cols) {
    const float4 q = *reinterpret_cast<const float4*>(row + c);
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
    return 4;
  }
  const int n = cols - c < 4 ? static_cast<int>(cols - c) : 4;
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = j < n ? row[c + j] : 0.0f;
  return n;
}

__device__ inline void StoreQuad(float* row, int64_t c, int n, bool vector, const float (&v)[4]) {
  if (vector && n == 4) {
    *reinterpret_cast<float4*>(row + c) = make_float4(v[0], v[1], v[2], v[3]);
    return;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (j < n) row[c + j] = v[j];
  }
}

__device__ inline bool Aligned16(const float* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// loss.h's MseRow: dy = 2 (y − t) · scale, row_terms[r] = Σ (y − t)².
__global__ void __launch_bounds__(kMaxRowThreads)
    MseRowsKernel(int rows, int cols, const float* y, const float* targets, float* dy, float* row_terms, float scale) {
  __shared__ float shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t at = r * cols;
    const bool vector = Aligned16(y + at) && Aligned16(targets + at) && Aligned16(dy + at);
    float sum = 0.0f;
    for (int64_t c = 4 * static_cast<int64_t>(threadIdx.x); c < cols; c += 4 * static_cast<int64_t>(blockDim.x)) {
      float yv[4], tv[4], out[4];
      const int n = LoadQuad(y + at, c, cols, vector, yv);
      LoadQuad(targets + at, c, cols, vector, tv);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float d = yv[j] - tv[j];
        out[j] = 2.0f * d * scale;
        if (j < n) sum += d * d;
      }
      StoreQuad(dy + at, c, n, vector, out);
    }
    sum = BlockReduce(sum, 0.0f, shared);
    if (threadIdx.x == 0) row_terms[r] = sum;
  }
}

// loss.h's CrossEntropyRow: dy = (softmax(y) − onehot) · scale, row_terms[r] = −log softmax(y)[label].
__global__ void __launch_bounds__(kMaxRowThreads)
    CrossEntropyRowsKernel(int rows, int cols, const float* y, const float* labels, float* dy, float* row_terms,
                           float scale) {
  __shared__ MaxSum shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t at = r * cols;
    const float* y_row = y + at;
    float* dy_row = dy + at;
    // Every thread reads the label, so the branch is the block's as a whole (the reduction's
    // barriers are reached by all or none). A bad label would read out of bounds and poison the
    // whole CUDA context; it makes the row NaN, which the mean then carries to the caller.
    const float label_value = labels[r];
    if (!(label_value >= 0.0f && label_value < static_cast<float>(cols))) {
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dy_row[c] = nanf("");
      if (threadIdx.x == 0) row_terms[r] = nanf("");
      continue;
    }
    const int label = static_cast<int>(label_value);
    // Read before the reduction's barriers, hence before any thread writes this row's dy.
    const float label_logit = threadIdx.x == 0 ? y_row[label] : 0.0f;
    const bool vector = Aligned16(y_row) && Aligned16(dy_row);

    // One read of the row for its max and its denominator.
    MaxSum part{-INFINITY, 0.0f};
    for (int64_t c = 4 * static_cast<int64_t>(threadIdx.x); c < cols; c += 4 * static_cast<int64_t>(blockDim.x)) {
      float v[4];
      const int n = LoadQuad(y_row, c, cols, vector, v);
      float quad_max = v[0];
#pragma unroll
      for (int j = 1; j < 4; ++j) {
        if (j < n) quad_max = fmaxf(quad_max, v[j]);
      }
      // quad_max > part.max strictly, so the exponent is negative (or −∞) and never NaN.
      if (quad_max > part.max) {
        part.sum *= expf(part.max - quad_max);
        part.max = quad_max;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (j < n) part.sum += ExpShifted(v[j], part.max);
      }
    }
    const MaxSum row = BlockReduce(part, MaxSum{-INFINITY, 0.0f}, shared);
    if (threadIdx.x == 0) row_terms[r] = logf(row.sum) - (label_logit - row.max);

    // The second read writes dy, rounded as the host's (e · inv) · scale: __fmul_rn keeps the
    // product from fusing with the label's subtraction.
    const float inv = 1.0f / row.sum;
    for (int64_t c = 4 * static_cast<int64_t>(threadIdx.x); c < cols; c += 4 * static_cast<int64_t>(blockDim.x)) {
      float v[4];
      const int n = LoadQuad(y_row, c, cols, vector, v);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[j] = __fmul_rn(expf(v[j] - row.max) * inv, scale);
        if (c + j == label) v[j] -= scale;
      }
      StoreQuad(dy_row, c, n, vector, v);
    }
  }
}

// *mean = Σ_r row_terms[r] · scale, as the host's Loss() scales its sum.
__global__ void __launch_bounds__(kMeanThreads) MeanKernel(int rows, const float* row_terms, float scale, float* mean) {
  __shared__ float shared[kWarp];
  float sum = 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) sum += row_terms[r];
  sum = BlockReduce(sum, 0.0f, shared);
  if (threadIdx.x == 0) *mean = sum * scale;
}

}  // namespace

// The per-row terms live in the caller's scratch (rows floats, LossScratchFloats): a device keeps
// one buffer that grows and serves every launch on its stream, so a call allocates nothing (it
// took a cudaMallocAsync and a cudaFreeAsync per microbatch before).
void LaunchLoss(LossKind kind, int rows, int cols, const float* y, const float* targets, float* dy,
                float* mean_loss_device, float loss_scale, ScratchSpan scratch, cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchLoss";
  RequirePositive(kLauncher, "rows", rows);
  RequirePositive(kLauncher, "cols", cols);
  if (!(loss_scale > 0.0f) || !std::isfinite(loss_scale)) {
    throw std::invalid_argument("LaunchLoss: loss_scale must be finite and > 0, got " + std::to_string(loss_scale));
  }
  RequireDevicePointer(kLauncher, "y", y);
  RequireDevicePointer(kLauncher, "targets", targets);
  RequireDevicePointer(kLauncher, "dy", dy);
  RequireDevicePointer(kLauncher, "mean_loss_device", mean_loss_device);
  if (kind != LossKind::kMse && kind != LossKind::kCrossEntropy) {
    throw std::invalid_argument("LaunchLoss: unknown LossKind " + std::to_string(static_cast<int>(kind)));
  }
  // The same scales as the host Loss(), so both backends round alike.
  const float scale =
      kind == LossKind::kMse ? 1.0f / (static_cast<float>(rows) * cols) : 1.0f / static_cast<float>(rows);
  RequireScratch(kLauncher, scratch, LossScratchFloats(rows));
  const int blocks = static_cast<int>(std::min<int64_t>(rows, kMaxBlocks));
  const int threads = RowThreads(cols);
  float* row_terms = scratch.data;
  if (kind == LossKind::kMse) {
    MseRowsKernel<<<blocks, threads, 0, stream>>>(rows, cols, y, targets, dy, row_terms, scale * loss_scale);
  } else {
    CrossEntropyRowsKernel<<<blocks, threads, 0, stream>>>(rows, cols, y, targets, dy, row_terms, scale * loss_scale);
  }
  SC_CUDA_CHECK(cudaGetLastError());
  MeanKernel<<<1, kMeanThreads, 0, stream>>>(rows, row_terms, scale, mean_loss_device);
  SC_CUDA_CHECK(cudaGetLastError());
}

void PreloadLossKernels() {
  PreloadKernel(MseRowsKernel);
  PreloadKernel(CrossEntropyRowsKernel);
  PreloadKernel(MeanKernel);
}

}  // namespace stagecraft::kernels
