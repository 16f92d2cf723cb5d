// Column sums over the rows of a [rows x cols] tensor in two passes, as column_sums.h plans
// them: no atomics, every addition in an order fixed by (rows, cols), so the sums repeat bit for
// bit. `Terms` says what is summed: Terms::kOutputs sums per column, and
//   __device__ void Add(int64_t r, int c, float (&sums)[kOutputs]) const
// adds row r's terms of column c. Used by the bias gradient (activation.cu) and LayerNorm's
// weight gradients (layernorm.cu).
#pragma once

#include <cstdint>
#include <string>

#include "launch.cuh"
#include "stagecraft/kernels/column_sums.h"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::kernels {

// The outputs of a column sum: out[k][c] (+)= the k-th sum of column c.
template <int kOutputs>
struct ColumnOutputs {
  float* out[kOutputs];
};

// Pass 1: block (tile, chunk) writes partials[(k · chunks + chunk) · cols + c] for the columns
// of its tile. Threads of a column past `cols` add nothing but still reach every barrier.
template <typename Terms>
__global__ void __launch_bounds__(kColumnTile* kRowLanes)
    ColumnPartialsKernel(int rows, int cols, int64_t rows_per_chunk, Terms terms, float* partials) {
  constexpr int kOutputs = Terms::kOutputs;
  __shared__ float lanes[kOutputs][kRowLanes][kColumnTile];
  const int x = static_cast<int>(threadIdx.x), y = static_cast<int>(threadIdx.y);
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnTile + x;
  const int64_t chunk = blockIdx.y;
  const int64_t begin = chunk * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  float sums[kOutputs] = {};
  if (c < cols) {
    for (int64_t r = begin + y; r < end; r += kRowLanes) terms.Add(r, static_cast<int>(c), sums);
  }
#pragma unroll
  for (int k = 0; k < kOutputs; ++k) lanes[k][y][x] = sums[k];
  __syncthreads();
  // A fixed tree over the row lanes: 8 → 4 → 2 → 1.
  for (int half = kRowLanes / 2; half > 0; half /= 2) {
    if (y < half) {
#pragma unroll
      for (int k = 0; k < kOutputs; ++k) lanes[k][y][x] += lanes[k][y + half][x];
    }
    __syncthreads();
  }
  if (y == 0 && c < cols) {
#pragma unroll
    for (int k = 0; k < kOutputs; ++k) {
      partials[(k * static_cast<int64_t>(gridDim.y) + chunk) * cols + c] = lanes[k][0][x];
    }
  }
}

// Pass 2: one thread per (output, column) adds the column's partials in chunk order, then adds
// that to the output (accumulate) or writes it, as the host loops do.
template <int kOutputs>
__global__ void ColumnFinishKernel(int cols, int64_t chunks, const float* partials, ColumnOutputs<kOutputs> outputs,
                                   bool accumulate) {
  const int64_t n = static_cast<int64_t>(kOutputs) * cols;
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const int64_t k = i / cols;
    const int64_t c = i % cols;
    float sum = 0.0f;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) sum += partials[(k * chunks + chunk) * cols + c];
    float* out = outputs.out[k];
    out[c] = (accumulate ? out[c] : 0.0f) + sum;
  }
}

// Queues both passes on `stream`; the launcher has checked rows, cols and the pointers.
template <typename Terms>
void LaunchColumnSums(const char* launcher, int rows, int cols, const Terms& terms,
                      ColumnOutputs<Terms::kOutputs> outputs, bool accumulate, ScratchSpan scratch,
                      cudaStream_t stream) {
  const ColumnSumPlan plan = PlanColumnSums(rows, cols);
  RequireScratch(launcher, scratch, ColumnSumScratchFloats(rows, cols, Terms::kOutputs));
  // gridDim.y is at most 65535: the plan keeps chunks at most kColumnSumTargetBlocks.
  const dim3 grid(static_cast<unsigned>(plan.column_tiles), static_cast<unsigned>(plan.chunks));
  const dim3 block(kColumnTile, kRowLanes);
  ColumnPartialsKernel<Terms><<<grid, block, 0, stream>>>(rows, cols, plan.rows_per_chunk, terms, scratch.data);
  SC_CUDA_CHECK(cudaGetLastError());
  const int64_t n = static_cast<int64_t>(Terms::kOutputs) * cols;
  ColumnFinishKernel<Terms::kOutputs>
      <<<BlocksFor(n), kBlockSize, 0, stream>>>(cols, plan.chunks, scratch.data, outputs, accumulate);
  SC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace stagecraft::kernels
