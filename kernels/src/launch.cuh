// Shared by the kernels/ .cu files: grid sizing, a grid-stride index, and the launchers' shape
// preconditions (std::invalid_argument naming the launcher and the argument).
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace stagecraft::kernels {

inline constexpr int kBlockSize = 256;
// Enough blocks to fill any current GPU; larger tensors are covered by the grid-stride loop.
inline constexpr int64_t kMaxBlocks = 65535;

inline int BlocksFor(int64_t n) {
  return static_cast<int>(std::min((n + kBlockSize - 1) / kBlockSize, kMaxBlocks));
}

__device__ inline int64_t FirstIndex() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t GridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

inline void RequirePositive(const char* launcher, const char* name, int64_t value) {
  if (value <= 0) {
    throw std::invalid_argument(std::string(launcher) + ": " + name + " must be > 0, got " + std::to_string(value));
  }
}

inline void RequireNonNegative(const char* launcher, const char* name, int64_t value) {
  if (value < 0) {
    throw std::invalid_argument(std::string(launcher) + ": " + name + " must be >= 0, got " + std::to_string(value));
  }
}

inline void RequireDevicePointer(const char* launcher, const char* name, const void* pointer) {
  if (pointer == nullptr) throw std::invalid_argument(std::string(launcher) + ": " + name + " is null");
}

}  // namespace stagecraft::kernels
