// CUDA kernels and launchers for causal self-attention's own math (attention.h): the head layout
// moves, one thread per element of the heads layout [B, NH, T, hd] (the heads side is read or
// written densely, the rows side in runs of hd floats), and the causal softmax and its backward,
// one thread per score row running the SC_HD row functions the host loops call.
#include "stagecraft/kernels/attention.h"

#include "launch.cuh"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::kernels {
namespace {

// Where element i of the heads layout sits in the rows layout.
__device__ int64_t RowsOffsetOfHeadsIndex(int64_t i, int seq, int heads, int head_dim, int64_t ld) {
  const int d = static_cast<int>(i % head_dim);
  int64_t rest = i / head_dim;
  const int t = static_cast<int>(rest % seq);
  rest /= seq;
  const int h = static_cast<int>(rest % heads);
  const int b = static_cast<int>(rest / heads);
  return RowsOffset(b, t, h, d, seq, head_dim, ld);
}

__global__ void HeadsFromRowsKernel(int64_t n, int seq, int heads, int head_dim, const float* rows, int64_t ld,
                                    float* out) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    out[i] = rows[RowsOffsetOfHeadsIndex(i, seq, heads, head_dim, ld)];
  }
}

__global__ void RowsFromHeadsKernel(int64_t n, int seq, int heads, int head_dim, const float* in, float* rows,
                                    int64_t ld) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    rows[RowsOffsetOfHeadsIndex(i, seq, heads, head_dim, ld)] = in[i];
  }
}

// Row r of the stacked [matrices·seq x seq] scores is row r mod seq of its matrix.
__global__ void CausalSoftmaxKernel(int64_t rows, int seq, float* scores) {
  for (int64_t r = FirstIndex(); r < rows; r += GridStride()) {
    CausalSoftmaxRow(scores + r * seq, static_cast<int>(r % seq), seq);
  }
}

__global__ void CausalSoftmaxBackwardKernel(int64_t rows, int seq, const float* p, float* dp) {
  for (int64_t r = FirstIndex(); r < rows; r += GridStride()) {
    const int64_t at = r * seq;
    CausalSoftmaxBackwardRow(p + at, dp + at, static_cast<int>(r % seq), seq);
  }
}

// The shapes both layout moves share; returns the element count of the heads layout.
int64_t RequireHeadShapes(const char* launcher, int batch, int seq, int heads, int head_dim, int64_t ld) {
  RequirePositive(launcher, "batch", batch);
  RequirePositive(launcher, "seq", seq);
  RequirePositive(launcher, "heads", heads);
  RequirePositive(launcher, "head_dim", head_dim);
  const int64_t width = static_cast<int64_t>(heads) * head_dim;
  if (ld < width) {
    throw std::invalid_argument(std::string(launcher) + ": ld must be >= heads * head_dim = " + std::to_string(width) +
                                ", got " + std::to_string(ld));
  }
  return static_cast<int64_t>(batch) * seq * width;
}

}  // namespace

void LaunchHeadsFromRows(int batch, int seq, int heads, int head_dim, const float* rows, int64_t ld, float* out,
                         cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchHeadsFromRows";
  const int64_t n = RequireHeadShapes(kLauncher, batch, seq, heads, head_dim, ld);
  RequireDevicePointer(kLauncher, "rows", rows);
  RequireDevicePointer(kLauncher, "out", out);
  HeadsFromRowsKernel<<<BlocksFor(n), kBlockSize, 0, stream>>>(n, seq, heads, head_dim, rows, ld, out);
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchRowsFromHeads(int batch, int seq, int heads, int head_dim, const float* in, float* rows, int64_t ld,
                         cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchRowsFromHeads";
  const int64_t n = RequireHeadShapes(kLauncher, batch, seq, heads, head_dim, ld);
  RequireDevicePointer(kLauncher, "in", in);
  RequireDevicePointer(kLauncher, "rows", rows);
  RowsFromHeadsKernel<<<BlocksFor(n), kBlockSize, 0, stream>>>(n, seq, heads, head_dim, in, rows, ld);
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchCausalSoftmax(int matrices, int seq, float* scores, cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchCausalSoftmax";
  RequirePositive(kLauncher, "matrices", matrices);
  RequirePositive(kLauncher, "seq", seq);
  RequireDevicePointer(kLauncher, "scores", scores);
  const int64_t rows = static_cast<int64_t>(matrices) * seq;
  CausalSoftmaxKernel<<<BlocksFor(rows), kBlockSize, 0, stream>>>(rows, seq, scores);
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchCausalSoftmaxBackward(int matrices, int seq, const float* p, float* dp, cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchCausalSoftmaxBackward";
  RequirePositive(kLauncher, "matrices", matrices);
  RequirePositive(kLauncher, "seq", seq);
  RequireDevicePointer(kLauncher, "p", p);
  RequireDevicePointer(kLauncher, "dp", dp);
  const int64_t rows = static_cast<int64_t>(matrices) * seq;
  CausalSoftmaxBackwardKernel<<<BlocksFor(rows), kBlockSize, 0, stream>>>(rows, seq, p, dp);
  SC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace stagecraft::kernels
