// Tests for the CUDA launchers of kernels/include/stagecraft/kernels/cuda.h: each runs on random
// data and is compared with its host.h counterpart within tol + |ref|·eps (as llm.c does). Without
// a CUDA device the comparisons are skipped; the argument checks and SC_CUDA_CHECK need none.
#include "stagecraft/kernels/cuda.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
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

// With a loss scale too (a power of two: dy scales exactly on both sides, the loss not at all).
void ExpectLossMatchesHost(LossKind kind, int rows, int cols, const std::vector<float>& targets, cudaStream_t stream) {
  const std::vector<float> y = RandomValues(static_cast<size_t>(rows) * cols, 8);
  for (const float loss_scale : {1.0f, 4096.0f}) {
    std::vector<float> dy_host(y.size());
    const float loss_host = Loss(kind, rows, cols, y.data(), targets.data(), dy_host.data(), loss_scale);
    DeviceBuffer y_dev(y), targets_dev(targets), dy_dev{std::vector<float>(y.size())}, loss_dev({-1.0f});
    LaunchLoss(kind, rows, cols, y_dev.data(), targets_dev.data(), dy_dev.data(), loss_dev.data(), stream, loss_scale);
    SC_CUDA_CHECK(cudaStreamSynchronize(stream));
    ExpectClose({loss_host}, loss_dev.ToHost(), kTol, kEps, "mean loss");
    ExpectClose(dy_host, dy_dev.ToHost(), 1e-8f * loss_scale, kEps, "dy");
  }
}

TEST_F(LaunchersGpuTest, MseLossMatchesHost) {
  constexpr int kRows = 300, kCols = 17;  // narrow rows: a warp per row, its last quad one column wide
  ExpectLossMatchesHost(LossKind::kMse, kRows, kCols, RandomValues(kRows * kCols, 9), stream_);
}

TEST_F(LaunchersGpuTest, CrossEntropyLossMatchesHost) {
  constexpr int kRows = 300, kCols = 17;
  std::vector<float> labels(kRows);
  for (int r = 0; r < kRows; ++r) labels[r] = static_cast<float>((r * 7) % kCols);
  ExpectLossMatchesHost(LossKind::kCrossEntropy, kRows, kCols, labels, stream_);
}

TEST_F(LaunchersGpuTest, CrossEntropyBadLabelGivesNaN) {
  const std::vector<float> y = {0.0f, 1.0f, 2.0f, 3.0f};
  // Row 1's label: one past the 2 columns, negative, NaN; row 0 stays a proper row.
  for (const float bad : {2.0f, -1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    SCOPED_TRACE("label " + std::to_string(bad));
    const std::vector<float> labels = {1.0f, bad};
    DeviceBuffer y_dev(y), labels_dev(labels), dy_dev{std::vector<float>(4)}, loss_dev({0.0f});
    LaunchLoss(LossKind::kCrossEntropy, 2, 2, y_dev.data(), labels_dev.data(), dy_dev.data(), loss_dev.data(), stream_);
    Sync();
    EXPECT_TRUE(std::isnan(loss_dev.ToHost()[0]));
    const std::vector<float> dy = dy_dev.ToHost();
    EXPECT_FALSE(std::isnan(dy[0]) || std::isnan(dy[1])) << dy[0] << " " << dy[1];
    EXPECT_TRUE(std::isnan(dy[2]) && std::isnan(dy[3])) << dy[2] << " " << dy[3];
  }
}

// A GPT's last stage: vocabulary-wide rows, 50304 columns (a multiple of 4: whole float4 quads)
// and 50257 (most rows off 16-byte alignment, a partial last quad), logits up to ±30 so that the
// max shift matters, labels anywhere.
// Tolerance: both sides compute each e^(y − max) to ~2e-7 (the host's polynomial, CUDA's expf)
// and differ mainly in the denominator's summation order. The host adds each row in 8 lanes of
// ~6300 positive terms one after another, whose rounding errors (random in sign) grow like
// √6300·2^-24 ≈ 5e-6 relative, ~1e-6 after the 8 lanes are added (the strict bound, 6300·2^-24 ≈
// 4e-4, needs every rounding to go the same way); the device's trees add ~log2(n) roundings. A
// denominator's error becomes the same relative error in its row's dy and an absolute one in
// its loss term (~37 here), and the 300 row terms add ~√300 roundings more. So 5e-5 relative
// leaves 10x room over the expected ~4e-6 worst row. The absolute 1e-20 only spares the far
// tail (dy ~ e^-60/(838·300) ≈ 3e-32 for the lowest logits) from a purely relative test.
TEST_F(LaunchersGpuTest, CrossEntropyLossMatchesHostAtVocabularyWidth) {
  constexpr int kRows = 300;
  for (const int cols : {50304, 50257}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    const size_t n = static_cast<size_t>(kRows) * cols;
    const std::vector<float> y = RandomValues(n, 12, -30.0f, 30.0f);
    std::vector<float> labels(kRows);
    std::mt19937 rng(13);
    std::uniform_int_distribution<int> label(0, cols - 1);
    for (float& l : labels) l = static_cast<float>(label(rng));
    std::vector<float> dy_host(n);
    const float loss_host = Loss(LossKind::kCrossEntropy, kRows, cols, y.data(), labels.data(), dy_host.data());
    DeviceBuffer y_dev(y), labels_dev(labels), dy_dev{std::vector<float>(n)}, loss_dev({-1.0f});
    LaunchLoss(LossKind::kCrossEntropy, kRows, cols, y_dev.data(), labels_dev.data(), dy_dev.data(), loss_dev.data(),
               stream_);
    Sync();
    ExpectClose({loss_host}, loss_dev.ToHost(), 0.0f, 5e-5f, "mean loss");
    ExpectClose(dy_host, dy_dev.ToHost(), 1e-20f, 5e-5f, "dy");
  }
}

void ExpectBitIdentical(const std::vector<float>& expected, const std::vector<float>& actual, const char* what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  int mismatches = 0;
  for (size_t i = 0; i < expected.size() && mismatches < 10; ++i) {
    if (std::bit_cast<uint32_t>(expected[i]) != std::bit_cast<uint32_t>(actual[i])) {
      ADD_FAILURE() << what << "[" << i << "]: " << actual[i] << " after " << expected[i];
      ++mismatches;
    }
  }
}

// No atomics and fixed summation orders: a second launch repeats the first bit for bit, and so
// does a launch on the same values stored one float further on (rows off 16-byte alignment, so
// the quads load as single floats rather than float4).
TEST_F(LaunchersGpuTest, LossIsBitIdenticalRunToRunAndWhereverTheRowsLie) {
  constexpr int kRows = 64, kCols = 50304;
  constexpr size_t kN = static_cast<size_t>(kRows) * kCols;
  const std::vector<float> y = RandomValues(kN, 14, -30.0f, 30.0f), mse_targets = RandomValues(kN, 15);
  std::vector<float> labels(kRows);
  for (int r = 0; r < kRows; ++r) labels[r] = static_cast<float>((r * 7919) % kCols);
  // The same values after one leading float.
  const auto shifted = [](const std::vector<float>& values) {
    std::vector<float> out(values.size() + 1, 0.0f);
    std::copy(values.begin(), values.end(), out.begin() + 1);
    return out;
  };
  for (const LossKind kind : {LossKind::kMse, LossKind::kCrossEntropy}) {
    SCOPED_TRACE(kind == LossKind::kMse ? "mse" : "cross_entropy");
    const std::vector<float>& targets = kind == LossKind::kMse ? mse_targets : labels;
    DeviceBuffer y_dev(y), targets_dev(targets), y_off(shifted(y)), targets_off(shifted(targets));
    DeviceBuffer dy_first{std::vector<float>(kN)}, dy_second{std::vector<float>(kN)};
    DeviceBuffer dy_off{std::vector<float>(kN + 1)};
    DeviceBuffer loss_first({-1.0f}), loss_second({-2.0f}), loss_off({-3.0f});
    LaunchLoss(kind, kRows, kCols, y_dev.data(), targets_dev.data(), dy_first.data(), loss_first.data(), stream_);
    LaunchLoss(kind, kRows, kCols, y_dev.data(), targets_dev.data(), dy_second.data(), loss_second.data(), stream_);
    LaunchLoss(kind, kRows, kCols, y_off.data() + 1, targets_off.data() + 1, dy_off.data() + 1, loss_off.data(),
               stream_);
    Sync();
    const std::vector<float> dy = dy_first.ToHost(), loss = loss_first.ToHost();
    ASSERT_TRUE(std::isfinite(loss[0])) << loss[0];
    ExpectBitIdentical(loss, loss_second.ToHost(), "second mean loss");
    ExpectBitIdentical(dy, dy_second.ToHost(), "second dy");
    ExpectBitIdentical(loss, loss_off.ToHost(), "unaligned mean loss");
    const std::vector<float> off = dy_off.ToHost();
    ExpectBitIdentical(dy, std::vector<float>(off.begin() + 1, off.end()), "unaligned dy");
  }
}

TEST_F(LaunchersGpuTest, SgdMomentumMatchesHostOverThreeSteps) {
  constexpr int64_t kN = 10007;
  std::vector<float> w_host = RandomValues(kN, 10), velocity_host(kN, 0.0f);
  DeviceBuffer w_dev(w_host), velocity_dev(velocity_host);
  for (unsigned step = 0; step < 3; ++step) {
    std::vector<float> grad = RandomValues(kN, 20 + step);
    DeviceBuffer grad_dev(grad);
    SgdMomentum(kN, w_host.data(), w_host.data(), velocity_host.data(), grad.data(), 0.25f, 0.05f, 0.9f);
    LaunchSgdMomentum(kN, w_dev.data(), w_dev.data(), velocity_dev.data(), grad_dev.data(), 0.25f, 0.05f, 0.9f, stream_);
    Sync();
    EXPECT_EQ(grad_dev.ToHost(), std::vector<float>(kN, 0.0f)) << "the update leaves its gradient zeroed";
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
    std::vector<float> grad = RandomValues(kN, 30 + t);
    DeviceBuffer grad_dev(grad);
    Adam(kN, w_host.data(), w_host.data(), m_host.data(), v_host.data(), grad.data(), 0.5f, params);
    LaunchAdam(kN, w_dev.data(), w_dev.data(), m_dev.data(), v_dev.data(), grad_dev.data(), 0.5f, params, stream_);
    Sync();
    EXPECT_EQ(grad_dev.ToHost(), std::vector<float>(kN, 0.0f)) << "the update leaves its gradient zeroed";
  }
  // Out of place (a STEP that keeps the old version): the old weights stay, the new ones match.
  const std::vector<float> old = w_dev.ToHost();
  DeviceBuffer next_dev{std::vector<float>(kN, 0.0f)}, grad_dev(RandomValues(kN, 40));
  AdamParams params;
  params.bias1 = 1.0f - std::pow(params.beta1, 4.0f);
  params.bias2 = 1.0f - std::pow(params.beta2, 4.0f);
  std::vector<float> grad = RandomValues(kN, 40);
  Adam(kN, w_host.data(), w_host.data(), m_host.data(), v_host.data(), grad.data(), 0.5f, params);
  LaunchAdam(kN, w_dev.data(), next_dev.data(), m_dev.data(), v_dev.data(), grad_dev.data(), 0.5f, params, stream_);
  Sync();
  EXPECT_EQ(w_dev.ToHost(), old);
  ExpectClose(w_host, next_dev.ToHost(), kTol, kEps, "w out of place");
  ExpectClose(m_host, m_dev.ToHost(), kTol, kEps, "m");
  ExpectClose(v_host, v_dev.ToHost(), kTol, kEps, "v");
}

// The transformer's launchers, on awkward sizes: columns not a multiple of a warp or of the row
// functions' 8 lanes, a sequence length that is no power of two, odd heads and head sizes.
constexpr int kRowsT = 37, kColsT = 75;
constexpr int kBatchT = 2, kSeqT = 13, kHeadsT = 3, kHeadDimT = 5, kVocabT = 11;

TEST_F(LaunchersGpuTest, BiasAddMatchesHostExactly) {
  const std::vector<float> x = RandomValues(kRowsT * kColsT, 50), bias = RandomValues(kColsT, 51);
  const std::vector<float> residual = RandomValues(kRowsT * kColsT, 52);
  for (const bool with_residual : {false, true}) {
    SCOPED_TRACE(with_residual ? "with residual" : "without residual");
    std::vector<float> x_host = x;
    BiasAdd(kRowsT, kColsT, x_host.data(), bias.data(), with_residual ? residual.data() : nullptr);
    DeviceBuffer x_dev(x), bias_dev(bias), residual_dev(residual);
    LaunchBiasAdd(kRowsT, kColsT, x_dev.data(), bias_dev.data(), with_residual ? residual_dev.data() : nullptr,
                  stream_);
    Sync();
    ExpectClose(x_host, x_dev.ToHost(), 0.0f, 0.0f, "x");  // the same additions in the same order
  }
}

// Rows with a mean away from zero, as a residual stream has.
std::vector<float> LayerNormInput(unsigned seed) {
  std::vector<float> x = RandomValues(kRowsT * kColsT, seed);
  for (int r = 0; r < kRowsT; ++r) {
    for (int c = 0; c < kColsT; ++c) x[r * kColsT + c] += 0.25f * static_cast<float>(r % 5);
  }
  return x;
}

TEST_F(LaunchersGpuTest, LayerNormMatchesHost) {
  const std::vector<float> x = LayerNormInput(53), gamma = RandomValues(kColsT, 54), beta = RandomValues(kColsT, 55);
  std::vector<float> out_host(x.size()), mean_host(kRowsT), rstd_host(kRowsT);
  LayerNorm(kRowsT, kColsT, x.data(), gamma.data(), beta.data(), out_host.data(), mean_host.data(), rstd_host.data());
  DeviceBuffer x_dev(x), gamma_dev(gamma), beta_dev(beta), out_dev{std::vector<float>(x.size())};
  DeviceBuffer mean_dev{std::vector<float>(kRowsT)}, rstd_dev{std::vector<float>(kRowsT)};
  LaunchLayerNorm(kRowsT, kColsT, x_dev.data(), gamma_dev.data(), beta_dev.data(), out_dev.data(), mean_dev.data(),
                  rstd_dev.data(), stream_);
  Sync();
  ExpectClose(mean_host, mean_dev.ToHost(), kTol, kEps, "mean");
  ExpectClose(rstd_host, rstd_dev.ToHost(), kTol, kEps, "rstd");
  // out = x̂·γ + β: the device contracts the products into FMAs, the host does not, so terms of
  // size |x̂·γ| up to ~5 leave a few ulp of that size behind in an out near zero.
  ExpectClose(out_host, out_dev.ToHost(), 1e-5f, kEps, "out");
}

TEST_F(LaunchersGpuTest, LayerNormBackwardInputMatchesHostAccumulatingOrWriting) {
  const std::vector<float> x = LayerNormInput(56), gamma = RandomValues(kColsT, 57), beta = RandomValues(kColsT, 58);
  const std::vector<float> dout = RandomValues(kRowsT * kColsT, 59);
  std::vector<float> out(x.size()), mean(kRowsT), rstd(kRowsT);
  LayerNorm(kRowsT, kColsT, x.data(), gamma.data(), beta.data(), out.data(), mean.data(), rstd.data());
  for (const bool accumulate : {true, false}) {
    SCOPED_TRACE(accumulate ? "dx +=" : "dx =");
    std::vector<float> dx_host = RandomValues(x.size(), 60);
    DeviceBuffer dout_dev(dout), x_dev(x), gamma_dev(gamma), mean_dev(mean), rstd_dev(rstd), dx_dev(dx_host);
    LayerNormBackwardInput(kRowsT, kColsT, dout.data(), x.data(), gamma.data(), mean.data(), rstd.data(),
                           dx_host.data(), accumulate);
    LaunchLayerNormBackwardInput(kRowsT, kColsT, dout_dev.data(), x_dev.data(), gamma_dev.data(), mean_dev.data(),
                                 rstd_dev.data(), dx_dev.data(), accumulate, stream_);
    Sync();
    // dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) cancels terms of size |g| ~ 10: ulps of that size.
    ExpectClose(dx_host, dx_dev.ToHost(), 1e-5f, kEps, "dx");
  }
}

TEST_F(LaunchersGpuTest, LayerNormBackwardWeightMatchesHostAccumulatingOrWriting) {
  const std::vector<float> x = LayerNormInput(61), gamma = RandomValues(kColsT, 62), beta = RandomValues(kColsT, 63);
  const std::vector<float> dout = RandomValues(kRowsT * kColsT, 64);
  std::vector<float> out(x.size()), mean(kRowsT), rstd(kRowsT);
  LayerNorm(kRowsT, kColsT, x.data(), gamma.data(), beta.data(), out.data(), mean.data(), rstd.data());
  for (const bool accumulate : {true, false}) {
    SCOPED_TRACE(accumulate ? "+=" : "=");
    std::vector<float> dgamma_host = RandomValues(kColsT, 65), dbeta_host = RandomValues(kColsT, 66);
    DeviceBuffer dout_dev(dout), x_dev(x), mean_dev(mean), rstd_dev(rstd), dgamma_dev(dgamma_host),
        dbeta_dev(dbeta_host);
    LayerNormBackwardWeight(kRowsT, kColsT, dout.data(), x.data(), mean.data(), rstd.data(), dgamma_host.data(),
                            dbeta_host.data(), accumulate);
    LaunchLayerNormBackwardWeight(kRowsT, kColsT, dout_dev.data(), x_dev.data(), mean_dev.data(), rstd_dev.data(),
                                  dgamma_dev.data(), dbeta_dev.data(), accumulate, stream_);
    Sync();
    // dbeta: the same additions in the same order. dgamma: sums of 37 terms of size ~5, each
    // product contracted into an FMA on the device (as the bias gradient's tolerance).
    ExpectClose(dbeta_host, dbeta_dev.ToHost(), 0.0f, 0.0f, "dbeta");
    ExpectClose(dgamma_host, dgamma_dev.ToHost(), 1e-4f, kEps, "dgamma");
  }
}

TEST_F(LaunchersGpuTest, HeadLayoutsMatchHostExactlyAndLeaveTheRowsPaddingAlone) {
  constexpr int64_t kLd = kHeadsT * kHeadDimT + 7;  // rows wider than the heads: q of a fused qkv, say
  constexpr int64_t kTokens = kBatchT * kSeqT, kHeadsSize = kTokens * kHeadsT * kHeadDimT;
  const std::vector<float> rows = RandomValues(kTokens * kLd, 67);
  std::vector<float> heads_host(kHeadsSize);
  HeadsFromRows(kBatchT, kSeqT, kHeadsT, kHeadDimT, rows.data(), kLd, heads_host.data());
  DeviceBuffer rows_dev(rows), heads_dev{std::vector<float>(kHeadsSize)};
  LaunchHeadsFromRows(kBatchT, kSeqT, kHeadsT, kHeadDimT, rows_dev.data(), kLd, heads_dev.data(), stream_);
  Sync();
  ExpectClose(heads_host, heads_dev.ToHost(), 0.0f, 0.0f, "heads");

  const std::vector<float> heads = RandomValues(kHeadsSize, 68);
  std::vector<float> back_host = RandomValues(kTokens * kLd, 69);  // the padding columns must survive
  DeviceBuffer in_dev(heads), back_dev(back_host);
  RowsFromHeads(kBatchT, kSeqT, kHeadsT, kHeadDimT, heads.data(), back_host.data(), kLd);
  LaunchRowsFromHeads(kBatchT, kSeqT, kHeadsT, kHeadDimT, in_dev.data(), back_dev.data(), kLd, stream_);
  Sync();
  ExpectClose(back_host, back_dev.ToHost(), 0.0f, 0.0f, "rows");
}

TEST_F(LaunchersGpuTest, CausalSoftmaxAndItsBackwardMatchHost) {
  constexpr int kMatrices = kBatchT * kHeadsT;
  constexpr int64_t kSize = static_cast<int64_t>(kMatrices) * kSeqT * kSeqT;
  const std::vector<float> scores = RandomValues(kSize, 70, -8.0f, 8.0f);
  std::vector<float> p_host = scores;
  CausalSoftmax(kMatrices, kSeqT, p_host.data());
  DeviceBuffer p_dev(scores);
  LaunchCausalSoftmax(kMatrices, kSeqT, p_dev.data(), stream_);
  Sync();
  // Above the diagonal both write 0; on it the device's expf and the host's polynomial each lie
  // within 2e-7 of e^x.
  ExpectClose(p_host, p_dev.ToHost(), kTol, kEps, "p");

  // The backward from the host's probabilities, so only the backward is compared.
  const std::vector<float> dp = RandomValues(kSize, 71);
  std::vector<float> ds_host = dp;
  CausalSoftmaxBackward(kMatrices, kSeqT, p_host.data(), ds_host.data());
  DeviceBuffer p_in_dev(p_host), ds_dev(dp);
  LaunchCausalSoftmaxBackward(kMatrices, kSeqT, p_in_dev.data(), ds_dev.data(), stream_);
  Sync();
  ExpectClose(ds_host, ds_dev.ToHost(), kTol, kEps, "ds");
}

// Token ids of a [kBatchT x kSeqT] microbatch: every id of the vocabulary, most of them repeated.
std::vector<float> Tokens() {
  std::vector<float> tokens(kBatchT * kSeqT);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<float>((i * 7 + i / 5) % kVocabT);
  return tokens;
}

TEST_F(LaunchersGpuTest, EmbeddingMatchesHostExactly) {
  const std::vector<float> tokens = Tokens(), wte = RandomValues(kVocabT * kColsT, 72);
  const std::vector<float> wpe = RandomValues(kSeqT * kColsT, 73);
  std::vector<float> out_host(tokens.size() * kColsT);
  Embedding(kBatchT, kSeqT, kColsT, tokens.data(), wte.data(), wpe.data(), out_host.data());
  DeviceBuffer tokens_dev(tokens), wte_dev(wte), wpe_dev(wpe), out_dev{std::vector<float>(out_host.size())};
  LaunchEmbedding(kBatchT, kSeqT, kColsT, tokens_dev.data(), wte_dev.data(), wpe_dev.data(), out_dev.data(), stream_);
  Sync();
  ExpectClose(out_host, out_dev.ToHost(), 0.0f, 0.0f, "out");
}

// The gradients are sums of dout rows in the host's order (b, t) with no products, so they match
// exactly, and again on a second run (no atomics).
TEST_F(LaunchersGpuTest, EmbeddingBackwardMatchesHostExactlyAccumulatingOrWriting) {
  const std::vector<float> tokens = Tokens(), dout = RandomValues(tokens.size() * kColsT, 74);
  for (const bool accumulate : {true, false}) {
    SCOPED_TRACE(accumulate ? "+=" : "=");
    std::vector<float> dwte_host = RandomValues(kVocabT * kColsT, 75), dwpe_host = RandomValues(kSeqT * kColsT, 76);
    const std::vector<float> dwte0 = dwte_host, dwpe0 = dwpe_host;
    EmbeddingBackward(kBatchT, kSeqT, kColsT, kVocabT, tokens.data(), dout.data(), dwte_host.data(), dwpe_host.data(),
                      accumulate);
    for (int run = 0; run < 2; ++run) {
      DeviceBuffer tokens_dev(tokens), dout_dev(dout), dwte_dev(dwte0), dwpe_dev(dwpe0);
      LaunchEmbeddingBackward(kBatchT, kSeqT, kColsT, kVocabT, tokens_dev.data(), dout_dev.data(), dwte_dev.data(),
                              dwpe_dev.data(), accumulate, stream_);
      Sync();
      ExpectClose(dwte_host, dwte_dev.ToHost(), 0.0f, 0.0f, "dwte");
      ExpectClose(dwpe_host, dwpe_dev.ToHost(), 0.0f, 0.0f, "dwpe");
    }
  }
}

// A token id outside the vocabulary (the caller's to reject) adds nothing on the device rather
// than writing out of bounds.
TEST_F(LaunchersGpuTest, EmbeddingBackwardSkipsTokensOutsideTheVocabulary) {
  const std::vector<float> tokens = {1.0f, -1.0f, static_cast<float>(kVocabT), std::nanf("")};  // batch 1, seq 4
  const std::vector<float> dout = RandomValues(tokens.size() * kColsT, 77);
  DeviceBuffer tokens_dev(tokens), dout_dev(dout), dwte_dev{std::vector<float>(kVocabT * kColsT, 5.0f)};
  DeviceBuffer dwpe_dev{std::vector<float>(tokens.size() * kColsT, 5.0f)};
  LaunchEmbeddingBackward(1, static_cast<int>(tokens.size()), kColsT, kVocabT, tokens_dev.data(), dout_dev.data(),
                          dwte_dev.data(), dwpe_dev.data(), false, stream_);
  Sync();
  std::vector<float> dwte_expected(kVocabT * kColsT, 0.0f);
  for (int c = 0; c < kColsT; ++c) dwte_expected[kColsT + c] = dout[c];  // only token 1, at t = 0
  ExpectClose(dwte_expected, dwte_dev.ToHost(), 0.0f, 0.0f, "dwte");
  ExpectClose(dout, dwpe_dev.ToHost(), 0.0f, 0.0f, "dwpe");  // batch 1: dwpe is dout
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

TEST(LaunchersArgumentsTest, TransformerLaunchersCheckShapesAndPointersBeforeLaunching) {
  float* fake = reinterpret_cast<float*>(0x1000);  // never dereferenced: the launchers throw first
  EXPECT_THROW(LaunchBiasAdd(0, 3, fake, fake, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchBiasAdd(2, 3, fake, nullptr, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchLayerNorm(2, 0, fake, fake, fake, fake, fake, fake, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchLayerNorm(2, 3, fake, fake, fake, fake, nullptr, fake, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchLayerNormBackwardInput(-1, 3, fake, fake, fake, fake, fake, fake, true, nullptr),
               std::invalid_argument);
  EXPECT_THROW(LaunchLayerNormBackwardInput(2, 3, fake, fake, fake, fake, nullptr, fake, true, nullptr),
               std::invalid_argument);
  EXPECT_THROW(LaunchLayerNormBackwardWeight(2, 0, fake, fake, fake, fake, fake, fake, false, nullptr),
               std::invalid_argument);
  EXPECT_THROW(LaunchLayerNormBackwardWeight(2, 3, fake, fake, fake, fake, fake, nullptr, false, nullptr),
               std::invalid_argument);
  EXPECT_THROW(LaunchHeadsFromRows(1, 0, 2, 4, fake, 8, fake, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchRowsFromHeads(1, 3, 2, 4, nullptr, fake, 8, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchCausalSoftmax(0, 4, fake, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchCausalSoftmaxBackward(2, 4, nullptr, fake, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchEmbedding(2, 4, 3, fake, fake, nullptr, fake, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchEmbeddingBackward(2, 4, 3, 0, fake, fake, fake, fake, false, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchEmbeddingBackward(2, 4, 3, 5, fake, fake, fake, nullptr, false, nullptr), std::invalid_argument);
  try {
    LaunchRowsFromHeads(1, 3, 2, 4, fake, fake, 7, nullptr);
    ADD_FAILURE() << "LaunchRowsFromHeads accepted ld = 7 for 2 heads of 4";
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()), "LaunchRowsFromHeads: ld must be >= heads * head_dim = 8, got 7");
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
