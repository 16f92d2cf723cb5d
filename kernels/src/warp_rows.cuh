// Shared by the kernels that give each row of a tensor to one warp (layernorm.cu, attention.cu):
// the warp's rows in a grid-stride loop, and warp-wide sum and max. The reductions are a
// butterfly of __shfl_xor_sync over the 32 lanes: its shape is fixed, so a row's result repeats
// bit for bit from run to run, and both partners of each exchange add the same two values
// (a + b == b + a in IEEE arithmetic), so every lane ends with the same, identical result.
#pragma once

#include <cstdint>

#include "launch.cuh"

namespace stagecraft::kernels {

inline constexpr int kWarpSize = 32;
// Rows per block: kBlockSize threads, one warp per row.
inline constexpr int kWarpsPerBlock = kBlockSize / kWarpSize;
static_assert(kBlockSize % kWarpSize == 0, "whole warps per block");

// Blocks of kBlockSize threads (kWarpsPerBlock rows each) that cover `rows` rows; larger
// tensors are covered by the grid-stride loop over rows.
inline int BlocksForWarpRows(int64_t rows) {
  return static_cast<int>(std::min((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks));
}

__device__ inline int Lane() { return static_cast<int>(threadIdx.x) % kWarpSize; }
// This warp's first row and the stride to its next; the same for all 32 lanes, so the lanes
// of a warp enter and leave each row together (the shuffles need all of them).
__device__ inline int64_t FirstWarpRow() {
  return static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
}
__device__ inline int64_t WarpRowStride() { return static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarpSize); }

__device__ inline float WarpSum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ inline float WarpMax(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

}  // namespace stagecraft::kernels
