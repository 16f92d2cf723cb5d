// What the cuda device's gpu tests share: the skip without a CUDA device, random inputs, and
// host data copied into a device's memory.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "stagecraft/exec/cuda_device.h"

namespace stagecraft::exec {

#define SKIP_WITHOUT_GPU()                                                                 \
  do {                                                                                     \
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "SKIPPED: no CUDA device on this machine"; \
  } while (0)

// `n` floats drawn uniformly from [-1, 1) with `seed`.
inline std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// `host` uploaded into memory newly allocated on `device`.
inline float* OnDevice(Device& device, const std::vector<float>& host) {
  float* data = device.memory().Allocate(static_cast<int64_t>(host.size()));
  device.memory().Upload(data, host.data(), static_cast<int64_t>(host.size()));
  return data;
}

}  // namespace stagecraft::exec
