// Tests for the CUDA launchers of kernels/include/stagecraft/kernels/cuda.h that the MLP uses
// (bias + activation, its backward, the bias gradient, the losses, the optimizers): each runs on
// random data and is compared with its host.h counterpart within tol + |ref|·eps (as llm.c
// does); and every launcher's argument checks. Without a CUDA device the comparisons are
// skipped; the argument checks and SC_CUDA_CHECK need none. The transformer's launchers:
// transformer_launchers_gpu_test.cpp; odd shapes and determinism: shapes_gpu_test.cpp.
#include "stagecraft/kernels/cuda.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "gpu_test_support.h"
#include "stagecraft/kernels/cuda_check.h"
#include "stagecraft/kernels/host.h"

namespace stagecraft::kernels {
namespace {

using namespace gpu_test;  // NOLINT(google-build-using-namespace): the tests' own helpers

// 129 columns: one thread per element; 128: four per thread, as float4; GELU and ReLU.
TEST_F(LaunchersGpuTest, BiasGeluMatchesHost) {
  constexpr int kRows = 37;
  for (const Activation act : {Activation::kGelu, Activation::kRelu}) {
    for (const int cols : {129, 128}) {
      const std::vector<float> z = RandomValues(kRows * cols, 1), bias = RandomValues(cols, 2);
      const std::vector<float> residual = RandomValues(kRows * cols, 3);
      for (const bool with_residual : {false, true}) {
        SCOPED_TRACE(std::string(act == Activation::kGelu ? "gelu, " : "relu, ") + std::to_string(cols) +
                     (with_residual ? " columns, with residual" : " columns, without residual"));
        std::vector<float> z_host = z, out_host(z.size());
        BiasActivation(act, kRows, cols, z_host.data(), bias.data(), with_residual ? residual.data() : nullptr,
                       out_host.data());
        DeviceBuffer z_dev(z), bias_dev(bias), residual_dev(residual), out_dev{std::vector<float>(z.size())};
        LaunchBiasActivation(act, kRows, cols, z_dev.data(), bias_dev.data(),
                             with_residual ? residual_dev.data() : nullptr, out_dev.data(), stream_);
        Sync();
        ExpectClose(z_host, z_dev.ToHost(), kTol, kEps, "z");
        ExpectClose(out_host, out_dev.ToHost(), kTol, kEps, "out");
      }
    }
  }
}

// 10007 elements: one thread per element; 10008: four per thread, as float4.
TEST_F(LaunchersGpuTest, GeluBackwardMatchesHost) {
  for (const int64_t n : {int64_t{10007}, int64_t{10008}}) {
    SCOPED_TRACE(n);
    const std::vector<float> dout = RandomValues(n, 4), z = RandomValues(n, 5);
    std::vector<float> dz_host(n);
    ActivationBackward(Activation::kGelu, n, dout.data(), z.data(), dz_host.data());
    DeviceBuffer dout_dev(dout), z_dev(z), dz_dev{std::vector<float>(n)};
    LaunchActivationBackward(Activation::kGelu, n, dout_dev.data(), z_dev.data(), dz_dev.data(), stream_);
    Sync();
    ExpectClose(dz_host, dz_dev.ToHost(), kTol, kEps, "dz");
  }
}

TEST_F(LaunchersGpuTest, BiasGradMatchesHostAccumulatingOrWriting) {
  constexpr int kRows = 65, kCols = 300;
  const std::vector<float> dz = RandomValues(kRows * kCols, 6);
  for (const bool accumulate : {true, false}) {
    std::vector<float> bias_grad_host = RandomValues(kCols, 7);
    DeviceBuffer dz_dev(dz), bias_grad_dev(bias_grad_host);
    Scratch scratch(BiasGradScratchFloats(kRows, kCols));
    BiasGrad(kRows, kCols, dz.data(), bias_grad_host.data(), accumulate);
    LaunchBiasGrad(kRows, kCols, dz_dev.data(), bias_grad_dev.data(), accumulate, scratch.span(), stream_);
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
    Scratch scratch(LossScratchFloats(rows));
    LaunchLoss(kind, rows, cols, y_dev.data(), targets_dev.data(), dy_dev.data(), loss_dev.data(), loss_scale,
               scratch.span(), stream);
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
    Scratch scratch(LossScratchFloats(2));
    LaunchLoss(LossKind::kCrossEntropy, 2, 2, y_dev.data(), labels_dev.data(), dy_dev.data(), loss_dev.data(), 1.0f,
               scratch.span(), stream_);
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
    Scratch scratch(LossScratchFloats(kRows));
    LaunchLoss(LossKind::kCrossEntropy, kRows, cols, y_dev.data(), labels_dev.data(), dy_dev.data(), loss_dev.data(),
               1.0f, scratch.span(), stream_);
    Sync();
    ExpectClose({loss_host}, loss_dev.ToHost(), 0.0f, 5e-5f, "mean loss");
    ExpectClose(dy_host, dy_dev.ToHost(), 1e-20f, 5e-5f, "dy");
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
    // One scratch for all three, as a device keeps one: each launch is done with it before the next.
    Scratch scratch(LossScratchFloats(kRows));
    LaunchLoss(kind, kRows, kCols, y_dev.data(), targets_dev.data(), dy_first.data(), loss_first.data(), 1.0f,
               scratch.span(), stream_);
    LaunchLoss(kind, kRows, kCols, y_dev.data(), targets_dev.data(), dy_second.data(), loss_second.data(), 1.0f,
               scratch.span(), stream_);
    LaunchLoss(kind, kRows, kCols, y_off.data() + 1, targets_off.data() + 1, dy_off.data() + 1, loss_off.data(), 1.0f,
               scratch.span(), stream_);
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

// The checks below run before any CUDA call, so they hold with or without a device.
TEST(LaunchersArgumentsTest, BadShapesAndNullPointersThrowBeforeLaunching) {
  float* fake = reinterpret_cast<float*>(0x1000);  // never dereferenced: the launchers throw first
  EXPECT_THROW(LaunchBiasActivation(Activation::kGelu, 0, 3, fake, fake, nullptr, fake, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchBiasActivation(Activation::kGelu, 2, -1, fake, fake, nullptr, fake, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchBiasActivation(Activation::kGelu, 2, 3, fake, nullptr, nullptr, fake, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchActivationBackward(Activation::kGelu, -1, fake, fake, fake, nullptr), std::invalid_argument);
  EXPECT_NO_THROW(LaunchActivationBackward(Activation::kGelu, 0, nullptr, nullptr, nullptr, nullptr));  // nothing to do
  const ScratchSpan scratch{fake, 1 << 20};
  EXPECT_THROW(LaunchBiasGrad(2, 0, fake, fake, true, scratch, nullptr), std::invalid_argument);
  const ScratchSpan short_by_one{fake, BiasGradScratchFloats(64, 300) - 1};
  EXPECT_THROW(LaunchBiasGrad(64, 300, fake, fake, true, short_by_one, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchBiasGrad(2, 3, fake, fake, true, ScratchSpan{nullptr, 1 << 20}, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchLoss(LossKind::kMse, 0, 3, fake, fake, fake, fake, 1.0f, scratch, nullptr), std::invalid_argument);
  EXPECT_THROW(LaunchLoss(LossKind::kCrossEntropy, 2, 3, fake, fake, fake, nullptr, 1.0f, scratch, nullptr),
               std::invalid_argument);
  EXPECT_THROW(LaunchLoss(LossKind::kMse, 5, 3, fake, fake, fake, fake, 1.0f, ScratchSpan{fake, 4}, nullptr),
               std::invalid_argument);
  EXPECT_THROW(LaunchLoss(LossKind::kMse, 5, 3, fake, fake, fake, fake, 0.0f, scratch, nullptr), std::invalid_argument);
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
  const ScratchSpan scratch{fake, 1 << 20};
  EXPECT_THROW(LaunchLayerNormBackwardWeight(2, 0, fake, fake, fake, fake, fake, fake, false, scratch, nullptr),
               std::invalid_argument);
  EXPECT_THROW(LaunchLayerNormBackwardWeight(2, 3, fake, fake, fake, fake, fake, nullptr, false, scratch, nullptr),
               std::invalid_argument);
  // dgamma's and dbeta's partials: twice the bias gradient's.
  EXPECT_THROW(LaunchLayerNormBackwardWeight(64, 300, fake, fake, fake, fake, fake, fake, false,
                                             ScratchSpan{fake, 2 * BiasGradScratchFloats(64, 300) - 1}, nullptr),
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
