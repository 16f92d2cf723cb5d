// CUDA kernel and launcher for the last stage's mean loss and its gradient, running loss.h's
// per-row SC_HD math: one block, each thread a strided set of rows, then a fixed-order tree sum.
#include "stagecraft/kernels/loss.h"

#include "launch.cuh"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::kernels {
namespace {

// One block keeps the reduction deterministic (same order every run, no atomics) and needs no
// scratch buffer; a microbatch has few rows, so correctness wins over speed here.
constexpr int kLossThreads = 256;  // a power of two, for the tree sum

__device__ float RowLoss(LossKind kind, int r, int cols, const float* y, const float* targets, float* dy, float scale) {
  const int64_t at = static_cast<int64_t>(r) * cols;
  if (kind == LossKind::kMse) return MseRow(y + at, targets + at, dy + at, cols, scale);
  // A bad label on the device would read out of bounds and poison the whole CUDA context; make
  // it a NaN the caller sees instead.
  const float label = targets[r];
  if (!(label >= 0.0f && label < static_cast<float>(cols))) {
    for (int c = 0; c < cols; ++c) dy[at + c] = nanf("");
    return nanf("");
  }
  return CrossEntropyRow(y + at, static_cast<int>(label), dy + at, cols, scale);
}

__global__ void LossKernel(LossKind kind, int rows, int cols, const float* y, const float* targets, float* dy,
                           float* mean_loss) {
  __shared__ float partial[kLossThreads];
  // The same scales as the host Loss(), so both backends round alike.
  const float scale = kind == LossKind::kMse ? 1.0f / (static_cast<float>(rows) * cols) : 1.0f / static_cast<float>(rows);
  float sum = 0.0f;
  for (int r = threadIdx.x; r < rows; r += blockDim.x) sum += RowLoss(kind, r, cols, y, targets, dy, scale);
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *mean_loss = partial[0] * scale;
}

}  // namespace

void LaunchLoss(LossKind kind, int rows, int cols, const float* y, const float* targets, float* dy,
                float* mean_loss_device, cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchLoss";
  RequirePositive(kLauncher, "rows", rows);
  RequirePositive(kLauncher, "cols", cols);
  RequireDevicePointer(kLauncher, "y", y);
  RequireDevicePointer(kLauncher, "targets", targets);
  RequireDevicePointer(kLauncher, "dy", dy);
  RequireDevicePointer(kLauncher, "mean_loss_device", mean_loss_device);
  if (kind != LossKind::kMse && kind != LossKind::kCrossEntropy) {
    throw std::invalid_argument("LaunchLoss: unknown LossKind " + std::to_string(static_cast<int>(kind)));
  }
  LossKernel<<<1, kLossThreads, 0, stream>>>(kind, rows, cols, y, targets, dy, mean_loss_device);
  SC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace stagecraft::kernels
