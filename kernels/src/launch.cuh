// Shared by the kernels/ .cu files: grid sizing, a grid-stride index, and the launchers' shape
// and scratch preconditions (std::invalid_argument naming the launcher and the argument).
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

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

// The scratch a launcher needs: at least `floats` floats of device memory.
inline void RequireScratch(const char* launcher, ScratchSpan scratch, int64_t floats) {
  if (scratch.data == nullptr || scratch.floats < floats) {
    const std::string got = scratch.data == nullptr ? std::string("none") : std::to_string(scratch.floats);
    throw std::invalid_argument(std::string(launcher) + ": scratch must hold " + std::to_string(floats) +
                                " floats, got " + got);
  }
}

// Loads `kernel` now rather than at its first launch (cuda.h's PreloadKernels): querying a
// kernel's attributes loads it, as the CUDA programming guide's lazy-loading notes advise.
template <typename Kernel>
void PreloadKernel(Kernel* kernel) {
  cudaFuncAttributes attributes{};
  SC_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
}

// Each .cu file's kernels, every instantiation its launchers use, through PreloadKernel.
void PreloadActivationKernels();
void PreloadAttentionKernels();
void PreloadBiasAddKernels();
void PreloadConvertKernels();
void PreloadEmbeddingKernels();
void PreloadLayerNormKernels();
void PreloadLossKernels();
void PreloadOptimizerKernels();

}  // namespace stagecraft::kernels
