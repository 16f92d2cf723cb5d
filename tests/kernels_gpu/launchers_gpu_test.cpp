// Tests for the CUDA launchers of kernels/include/stagecraft/kernels/cuda.h: each runs on random
// data and is compared with its host.h counterpart within tol + |ref|·eps (as llm.c does). Without
// a CUDA device the comparisons are skipped; the argument checks and SC_CUDA_CHECK need none.
#include "stagecraft/kernels/cuda.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "stagecraft/kernels/cuda_check.h"
#include "stagecraft/kernels/host.h"

namespace stagecraft::kernels {
namespace {

// Empty when a CUDA device is usable, else why not. Asked once, never at static-init time, so
// listing the tests (gtest_discover_tests at build time) does not touch CUDA.
const std::string& NoDeviceReason() {
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

std::vector<float> RandomValues(size_t n, unsigned seed, float low = -3.0f, float high = 3.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

void ExpectClose(const std::vector<float>& reference, const std::vector<float>& actual, float tol, float eps,
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

constexpr float kTol = 1e-6f;
constexpr float kEps = 1e-5f;

TEST_F(LaunchersGpuTest, BiasGeluMatchesHost) {
  constexpr int kRows = 37, kCols = 129;
  const std::vector<float> z = RandomValues(kRows * kCols, 1), bias = RandomValues(kCols, 2);
  const std::vector<float> residual = RandomValues(kRows * kCols, 3);
  for (const bool with_residual : {false, true}) {
    SCOPED_TRACE(with_residual ? "with residual" : "without residual");
    std::vector<float> z_host = z, out_host(z.size());
    BiasActivation(Activation::kGelu, kRows, kCols, z_host.data(), bias.data(), with_residual ? residual.data() : nullptr, out_host.data());
    DeviceBuffer z_dev(z), bias_dev(bias), residual_dev(residual), out_dev{std::vector<float>(z.size())};
    LaunchBiasActivation(Activation::kGelu, kRows, kCols, z_dev.data(), bias_dev.data(), with_residual ? residual_dev.data() : nullptr,
                   out_dev.data(), stream_);
    Sync();
    ExpectClose(z_host, z_dev.ToHost(), kTol, kEps, "z");
    ExpectClose(out_host, out_dev.ToHost(), kTol, kEps, "out");
  }
}

TEST_F(LaunchersGpuTest, GeluBackwardMatchesHost) {
  constexpr int64_t kN = 10007;
  const std::vector<float> dout = RandomValues(kN, 4), z = RandomValues(kN, 5);
  std::vector<float> dz_host(kN);
  ActivationBackward(Activation::kGelu, kN, dout.data(), z.data(), dz_host.data());
  DeviceBuffer dout_dev(dout), z_dev(z), dz_dev{std::vector<float>(kN)};
  LaunchActivationBackward(Activation::kGelu, kN, dout_dev.data(), z_dev.data(), dz_dev.data(), stream_);
  Sync();
  ExpectClose(dz_host, dz_dev.ToHost(), kTol, kEps, "dz");
}

TEST_F(LaunchersGpuTest, BiasGradMatchesHostAccumulatingOrWriting) {
  constexpr int kRows = 65, kCols = 300;
  const std::vector<float> dz = RandomValues(kRows * kCols, 6);
  for (const bool accumulate : {true, false}) {
    std::vector<float> bias_grad_host = RandomValues(kCols, 7);
    DeviceBuffer dz_dev(dz), bias_grad_dev(bias_grad_host);
    BiasGrad(kRows, kCols, dz.data(), bias_grad_host.data(), accumulate);
    LaunchBiasGrad(kRows, kCols, dz_dev.data(), bias_grad_dev.data(), accumulate, stream_);
    Sync();
    // A sum of 65 terms of size ~3: absolute error grows with the row count.
    ExpectClose(bias_grad_host, bias_grad_dev.ToHost(), 1e-4f, kEps, accumulate ? "bias_grad +=" : "bias_grad =");
  }
}

void ExpectLossMatchesHost(LossKind kind, int rows, int cols, const std::vector<float>& targets, cudaStream_t stream) {
  const std::vector<float> y = RandomValues(static_cast<size_t>(rows) * cols, 8);
  std::vector<float> dy_host(y.size());
  const float loss_host = Loss(kind, rows, cols, y.data(), targets.data(), dy_host.data());
  DeviceBuffer y_dev(y), targets_dev(targets), dy_dev{std::vector<float>(y.size())}, loss_dev({-1.0f});
  LaunchLoss(kind, rows, cols, y_dev.data(), targets_dev.data(), dy_dev.data(), loss_dev.data(), stream);
  SC_CUDA_CHECK(cudaStreamSynchronize(stream));
  ExpectClose({loss_host}, loss_dev.ToHost(), kTol, kEps, "mean loss");
  ExpectClose(dy_host, dy_dev.ToHost(), 1e-8f, kEps, "dy");
}

TEST_F(LaunchersGpuTest, MseLossMatchesHost) {
  constexpr int kRows = 300, kCols = 17;  // more rows than threads in the loss block
  ExpectLossMatchesHost(LossKind::kMse, kRows, kCols, RandomValues(kRows * kCols, 9), stream_);
}

TEST_F(LaunchersGpuTest, CrossEntropyLossMatchesHost) {
  constexpr int kRows = 300, kCols = 17;
  std::vector<float> labels(kRows);
  for (int r = 0; r < kRows; ++r) labels[r] = static_cast<float>((r * 7) % kCols);
  ExpectLossMatchesHost(LossKind::kCrossEntropy, kRows, kCols, labels, stream_);
}

TEST_F(LaunchersGpuTest, CrossEntropyBadLabelGivesNaN) {
  const std::vector<float> y = {0.0f, 1.0f, 2.0f, 3.0f}, labels = {1.0f, 2.0f};  // label 2 of 2 columns
  DeviceBuffer y_dev(y), labels_dev(labels), dy_dev{std::vector<float>(4)}, loss_dev({0.0f});
  LaunchLoss(LossKind::kCrossEntropy, 2, 2, y_dev.data(), labels_dev.data(), dy_dev.data(), loss_dev.data(), stream_);
  Sync();
  EXPECT_TRUE(std::isnan(loss_dev.ToHost()[0]));
}

TEST_F(LaunchersGpuTest, SgdMomentumMatchesHostOverThreeSteps) {
  constexpr int64_t kN = 10007;
  std::vector<float> w_host = RandomValues(kN, 10), velocity_host(kN, 0.0f);
  DeviceBuffer w_dev(w_host), velocity_dev(velocity_host);
  for (unsigned step = 0; step < 3; ++step) {
    const std::vector<float> grad = RandomValues(kN, 20 + step);
    DeviceBuffer grad_dev(grad);
    SgdMomentum(kN, w_host.data(), w_host.data(), velocity_host.data(), grad.data(), 0.25f, 0.05f, 0.9f);
    LaunchSgdMomentum(kN, w_dev.data(), w_dev.data(), velocity_dev.data(), grad_dev.data(), 0.25f, 0.05f, 0.9f, stream_);
    Sync();
  }
  ExpectClose(w_host, w_dev.ToHost(), kTol, kEps, "w");
  ExpectClose(velocity_host, velocity_dev.ToHost(), kTol, kEps, "velocity");
}

TEST_F(LaunchersGpuTest, AdamMatchesHostOverThreeSteps) {
  constexpr int64_t kN = 10007;
  std::vector<float> w_host = RandomValues(kN, 11), m_host(kN, 0.0f), v_host(kN, 0.0f);
  DeviceBuffer w_dev(w_host), m_dev(m_host), v_dev(v_host);
  for (int t = 1; t <= 3; ++t) {
    AdamParams params;
    params.lr = 0.01f;
    params.bias1 = 1.0f - std::pow(params.beta1, static_cast<float>(t));
    params.bias2 = 1.0f - std::pow(params.beta2, static_cast<float>(t));
    const std::vector<float> grad = RandomValues(kN, 30 + t);
    DeviceBuffer grad_dev(grad);
    Adam(kN, w_host.data(), w_host.data(), m_host.data(), v_host.data(), grad.data(), 0.5f, params);
    LaunchAdam(kN, w_dev.data(), w_dev.data(), m_dev.data(), v_dev.data(), grad_dev.data(), 0.5f, params, stream_);
    Sync();
  }
  // Out of place (a STEP that keeps the old version): the old weights stay, the new ones match.
  const std::vector<float> old = w_dev.ToHost();
  DeviceBuffer next_dev{std::vector<float>(kN, 0.0f)}, grad_dev(RandomValues(kN, 40));
  AdamParams params;
  params.bias1 = 1.0f - std::pow(params.beta1, 4.0f);
  params.bias2 = 1.0f - std::pow(params.beta2, 4.0f);
  Adam(kN, w_host.data(), w_host.data(), m_host.data(), v_host.data(), RandomValues(kN, 40).data(), 0.5f, params);
  LaunchAdam(kN, w_dev.data(), next_dev.data(), m_dev.data(), v_dev.data(), grad_dev.data(), 0.5f, params, stream_);
  Sync();
  EXPECT_EQ(w_dev.ToHost(), old);
  ExpectClose(w_host, next_dev.ToHost(), kTol, kEps, "w out of place");
  ExpectClose(w_host, w_dev.ToHost(), kTol, kEps, "w");
  ExpectClose(m_host, m_dev.ToHost(), kTol, kEps, "m");
  ExpectClose(v_host, v_dev.ToHost(), kTol, kEps, "v");
}

// The checks below run before any CUDA call, so they hold with or without a device.
TEST(LaunchersArgumentsTest, BadShapesAndNullPointersThrowBeforeLaunching) {
  float* fake = reinterpret_cast<float*>(0x1000);  // never dereferenced: the launchers throw first
  EXPECT_THROW(LaunchBiasActivation(Activation::kGelu, 0, 3, fake, fake, nullptr, fake, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchBiasActivation(Activation::kGelu, 2, -1, fake, fake, nullptr, fake, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchBiasActivation(Activation::kGelu, 2, 3, fake, nullptr, nullptr, fake, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchActivationBackward(Activation::kGelu, -1, fake, fake, fake, nullptr), std::invalid_argument);
  EXPECT_NO_THROW(LaunchActivationBackward(Activation::kGelu, 0, nullptr, nullptr, nullptr, nullptr));  // nothing to do
  EXPECT_THROW(LaunchBiasGrad(2, 0, fake, fake, true, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchLoss(LossKind::kMse, 0, 3, fake, fake, fake, fake, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchLoss(LossKind::kCrossEntropy, 2, 3, fake, fake, fake, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchSgdMomentum(-5, fake, fake, fake, fake, 1.0f, 0.1f, 0.9f, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchAdam(4, fake, fake, fake, fake, fake, 1.0f, AdamParams{.bias1 = 0.0f}, nullptr),
               std::invalid_argument);
  try {
    LaunchBiasActivation(Activation::kGelu, -2, 3, fake, fake, nullptr, fake, nullptr);
    ADD_FAILURE() << "LaunchBiasActivation accepted rows = -2";
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()), "LaunchBiasActivation: rows must be > 0, got -2");
  }
}

TEST(CudaCheckTest, ErrorNamesHostFileLineAndCudaMessage) {
  try {
    SC_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "SC_CUDA_CHECK did not throw";
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("launchers_gpu_test.cpp:"), std::string::npos) << message;
    EXPECT_NE(message.find("cudaErrorInvalidValue"), std::string::npos) << message;
    EXPECT_NE(message.find(cudaGetErrorString(cudaErrorInvalidValue)), std::string::npos) << message;
    char host[256] = {};
    ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
    EXPECT_EQ(message.rfind(std::string(host) + ": ", 0), 0u) << message;
  }
  EXPECT_NO_THROW(SC_CUDA_CHECK(cudaSuccess));
}

}  // namespace
}  // namespace stagecraft::kernels
