// What the kernels' gpu tests share: whether a CUDA device is usable, device buffers, random
// inputs, the tolerance comparison tol + |ref|·eps (as llm.c's tests) and the bit-for-bit one,
// and the fixture that skips without a device.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::kernels::gpu_test {

// Empty when a CUDA device is usable, else why not. Asked once, never at static-init time, so
// listing the tests (gtest_discover_tests at build time) does not touch CUDA.
inline const std::string& NoDeviceReason() {
  static const std::string reason = [] {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
    if (count == 0) return std::string("cudaGetDeviceCount returned 0");
    return std::string();
  }();
  return reason;
}

// One device array of floats, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<float>& host) : size_(host.size()) {
    SC_CUDA_CHECK(cudaMalloc(&data_, Bytes()));
    SC_CUDA_CHECK(cudaMemcpy(data_, host.data(), Bytes(), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  float* data() { return data_; }
  int64_t size() const { return static_cast<int64_t>(size_); }
  std::vector<float> ToHost() const {
    std::vector<float> host(size_);
    SC_CUDA_CHECK(cudaMemcpy(host.data(), data_, Bytes(), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  size_t Bytes() const { return size_ * sizeof(float); }
  float* data_ = nullptr;
  size_t size_;
};

// Scratch for a launcher, filled with NaN: a kernel that read scratch it had not written would
// carry the NaN into its result.
class Scratch {
 public:
  explicit Scratch(int64_t floats)
      : buffer_(std::vector<float>(static_cast<size_t>(floats > 0 ? floats : 1), kNaN)), floats_(floats) {}
  ScratchSpan span() { return ScratchSpan{buffer_.data(), floats_}; }

 private:
  static constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  DeviceBuffer buffer_;
  int64_t floats_;
};

inline std::vector<float> RandomValues(size_t n, unsigned seed, float low = -3.0f, float high = 3.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

// Multiples of 1/8 in [-2, 2]: products of two are multiples of 1/64 up to 4, so sums of up to
// 2^16 of them are exact in fp32 whatever their order, and any two correct summations agree bit
// for bit. A row lost or added changes the result.
inline std::vector<float> EighthsValues(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-16, 16);
  std::vector<float> values(n);
  for (float& v : values) v = static_cast<float>(dist(rng)) / 8.0f;
  return values;
}

inline void ExpectClose(const std::vector<float>& reference, const std::vector<float>& actual, float tol, float eps,
                        const char* what) {
  ASSERT_EQ(reference.size(), actual.size()) << what;
  int mismatches = 0;
  for (size_t i = 0; i < reference.size() && mismatches < 10; ++i) {
    if (!(std::abs(actual[i] - reference[i]) <= tol + std::abs(reference[i]) * eps)) {
      ADD_FAILURE() << what << "[" << i << "]: device " << actual[i] << ", host " << reference[i];
      ++mismatches;
    }
  }
}

inline void ExpectBitIdentical(const std::vector<float>& expected, const std::vector<float>& actual, const char* what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  int mismatches = 0;
  for (size_t i = 0; i < expected.size() && mismatches < 10; ++i) {
    if (std::bit_cast<uint32_t>(expected[i]) != std::bit_cast<uint32_t>(actual[i])) {
      ADD_FAILURE() << what << "[" << i << "]: " << actual[i] << " after " << expected[i];
      ++mismatches;
    }
  }
}

class LaunchersGpuTest : public testing::Test {
 protected:
  void SetUp() override {
    if (!NoDeviceReason().empty()) GTEST_SKIP() << "no CUDA device: " << NoDeviceReason();
    SC_CUDA_CHECK(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  void Sync() { SC_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  cudaStream_t stream_ = nullptr;
};

inline constexpr float kTol = 1e-6f;
inline constexpr float kEps = 1e-5f;

}  // namespace stagecraft::kernels::gpu_test
