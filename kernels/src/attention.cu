// CUDA kernels and launchers for causal self-attention's own math (attention.h): the head layout
// moves, one thread per element of the heads layout [B, NH, T, hd] (the heads side is read or
// written densely, the rows side in runs of hd floats), and the causal softmax and its backward,
// one warp per score row (lane l takes columns l, l + 32, ...; the row's max and sums meet in
// warp_rows.cuh's shuffle butterfly), with CausalSoftmaxRow's expressions (the forward online:
// its sum gathered in the read that finds the max). B·NH·T rows keep a GPU
// busy with a warp each, where a thread each left whole warps reading 32 rows far apart.
#include "stagecraft/kernels/attention.h"

#include "launch.cuh"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"
#include "warp_rows.cuh"

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

// Row r of the stacked [matrices·seq x seq] scores is row t = r mod seq of its matrix: columns
// 0..t become softmax probabilities, the rest 0. Each lane reads and writes only its own columns.
// Online (Milakov and Gimelshein, 2018): one read of the causal half gives each lane its running
// max and the sum of exp(x − max) rescaled as the max grows; the lanes' pairs meet at the warp's
// max; a second read writes exp(x − max) · (1 / sum), as CausalSoftmaxRow's e · inv. Two reads
// and one write of the causal half, where a pass for the max, one for the sum and one to scale
// took three and two.
__global__ void CausalSoftmaxKernel(int64_t rows, int seq, float* scores) {
  const int lane = Lane();
  for (int64_t r = FirstWarpRow(); r < rows; r += WarpRowStride()) {
    float* row = scores + r * seq;
    const int t = static_cast<int>(r % seq);
    float max_s = -INFINITY, sum = 0.0f;  // a lane with no column keeps (−∞, 0)
    for (int j = lane; j <= t; j += kWarpSize) {
      const float x = row[j];
      if (x > max_s) {
        sum = sum * ExpNonPositive(max_s - x) + 1.0f;  // exp(−∞) = 0: the first column starts the sum
        max_s = x;
      } else if (x != -INFINITY) {  // −∞ adds nothing (and is not −∞ − −∞); a NaN makes the row NaN
        sum += ExpNonPositive(x - max_s);
      }
    }
    const float row_max = WarpMax(max_s);  // column 0 is always in: a finite row has a finite max
    const float inv = 1.0f / WarpSum(sum * ExpNonPositive(max_s - row_max));  // −∞ − max: a lane's 0 stays 0
    for (int j = lane; j <= t; j += kWarpSize) row[j] = ExpNonPositive(row[j] - row_max) * inv;
    for (int j = t + 1 + lane; j < seq; j += kWarpSize) row[j] = 0.0f;
  }
}

// Row t of the backward, in place on dp: ds_j = p_j·(dp_j − Σ_k p_k·dp_k) for j ≤ t, 0 beyond.
__global__ void CausalSoftmaxBackwardKernel(int64_t rows, int seq, const float* p, float* dp) {
  const int lane = Lane();
  for (int64_t r = FirstWarpRow(); r < rows; r += WarpRowStride()) {
    const int64_t at = r * seq;
    const float* p_row = p + at;
    float* dp_row = dp + at;
    const int t = static_cast<int>(r % seq);
    float dot = 0.0f;
    for (int j = lane; j <= t; j += kWarpSize) dot += p_row[j] * dp_row[j];
    dot = WarpSum(dot);
    for (int j = lane; j <= t; j += kWarpSize) dp_row[j] = p_row[j] * (dp_row[j] - dot);
    for (int j = t + 1 + lane; j < seq; j += kWarpSize) dp_row[j] = 0.0f;
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
  CausalSoftmaxKernel<<<BlocksForWarpRows(rows), kBlockSize, 0, stream>>>(rows, seq, scores);
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchCausalSoftmaxBackward(int matrices, int seq, const float* p, float* dp, cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchCausalSoftmaxBackward";
  RequirePositive(kLauncher, "matrices", matrices);
  RequirePositive(kLauncher, "seq", seq);
  RequireDevicePointer(kLauncher, "p", p);
  RequireDevicePointer(kLauncher, "dp", dp);
  const int64_t rows = static_cast<int64_t>(matrices) * seq;
  CausalSoftmaxBackwardKernel<<<BlocksForWarpRows(rows), kBlockSize, 0, stream>>>(rows, seq, p, dp);
  SC_CUDA_CHECK(cudaGetLastError());
}

void PreloadAttentionKernels() {
  PreloadKernel(HeadsFromRowsKernel);
  PreloadKernel(RowsFromHeadsKernel);
  PreloadKernel(CausalSoftmaxKernel);
  PreloadKernel(CausalSoftmaxBackwardKernel);
}

}  // namespace stagecraft::kernels
