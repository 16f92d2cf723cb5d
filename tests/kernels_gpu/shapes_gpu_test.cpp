// The row and column kernels on awkward shapes and for determinism: LayerNorm and the causal
// softmax (a warp per row) with one row, rows not a multiple of a block's 8 warps, columns not a
// multiple of a warp, more rows than one grid covers; the column sums (bias and LayerNorm weight
// gradients) exact on values whose sums are exact in any order, so the device must match the
// host bit for bit, and bit-identical from run to run on random values; the loss with one row,
// one column and more rows than blocks. Without a CUDA device every test skips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/host.h"

namespace stagecraft::kernels {
namespace {

using namespace gpu_test;  // NOLINT(google-build-using-namespace): the tests' own helpers

struct Shape {
  int rows, cols;
};
std::string Name(Shape s) { return std::to_string(s.rows) + " x " + std::to_string(s.cols); }

// One row; a row per warp of one block but 37 rows (not a multiple of 8); columns 1, below, just
// above and well above a warp; more rows than 65535 blocks of 8 warps cover (the grid-stride loop);
// 1024 and 1025 columns, LayerNorm's widest row kept in registers and the narrowest read again.
const std::vector<Shape> kRowShapes = {{1, 1},     {1, 4099}, {37, 31},     {37, 33},  {1000, 769},
                                       {64, 32},   {9, 1024}, {9, 1025}, {524'289, 2}};

TEST_F(LaunchersGpuTest, LayerNormAndItsInputGradientOnOddShapesMatchHostAndRepeatBitForBit) {
  for (const Shape s : kRowShapes) {
    SCOPED_TRACE(Name(s));
    const size_t n = static_cast<size_t>(s.rows) * s.cols;
    std::vector<float> x = RandomValues(n, 80);
    for (size_t i = 0; i < n; ++i) x[i] += 0.25f * static_cast<float>((i / s.cols) % 5);  // row means apart
    const std::vector<float> gamma = RandomValues(s.cols, 81), beta = RandomValues(s.cols, 82);
    const std::vector<float> dout = RandomValues(n, 83), dx0 = RandomValues(n, 84);
    std::vector<float> out(n), mean(s.rows), rstd(s.rows), dx = dx0;
    LayerNorm(s.rows, s.cols, x.data(), gamma.data(), beta.data(), out.data(), mean.data(), rstd.data());
    LayerNormBackwardInput(s.rows, s.cols, dout.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(),
                           true);
    DeviceBuffer x_dev(x), gamma_dev(gamma), beta_dev(beta), dout_dev(dout);
    std::vector<float> first_out, first_dx;
    for (int run = 0; run < 2; ++run) {
      DeviceBuffer out_dev{std::vector<float>(n)}, mean_dev{std::vector<float>(s.rows)};
      DeviceBuffer rstd_dev{std::vector<float>(s.rows)}, dx_dev(dx0);
      LaunchLayerNorm(s.rows, s.cols, x_dev.data(), gamma_dev.data(), beta_dev.data(), out_dev.data(), mean_dev.data(),
                      rstd_dev.data(), stream_);
      // The input gradient from the host's statistics, so that only it is compared.
      DeviceBuffer mean_in(mean), rstd_in(rstd);
      LaunchLayerNormBackwardInput(s.rows, s.cols, dout_dev.data(), x_dev.data(), gamma_dev.data(), mean_in.data(),
                                   rstd_in.data(), dx_dev.data(), true, stream_);
      Sync();
      if (run == 0) {
        ExpectClose(mean, mean_dev.ToHost(), kTol, kEps, "mean");
        ExpectClose(rstd, rstd_dev.ToHost(), kTol, kEps, "rstd");
        // As transformer_launchers_gpu_test.cpp: FMAs on the device, ulps of terms ~5 (out), ~10 (dx).
        first_out = out_dev.ToHost();
        first_dx = dx_dev.ToHost();
        ExpectClose(out, first_out, 1e-5f, kEps, "out");
        ExpectClose(dx, first_dx, 2e-5f, kEps, "dx");
      } else {
        ExpectBitIdentical(first_out, out_dev.ToHost(), "out, second run");
        ExpectBitIdentical(first_dx, dx_dev.ToHost(), "dx, second run");
      }
    }
  }
}

TEST_F(LaunchersGpuTest, CausalSoftmaxOnOddShapesMatchesHostAndRepeatsBitForBit) {
  // (matrices, seq): one score; seq below, above and well above a warp; more rows
  // (65537 · 8 = 524296) than 65535 blocks of 8 warps cover.
  for (const Shape s : std::vector<Shape>{{1, 1}, {3, 31}, {2, 33}, {1, 1030}, {65'537, 8}}) {
    SCOPED_TRACE("matrices " + std::to_string(s.rows) + ", seq " + std::to_string(s.cols));
    const size_t n = static_cast<size_t>(s.rows) * s.cols * s.cols;
    const std::vector<float> scores = RandomValues(n, 85, -8.0f, 8.0f), dp = RandomValues(n, 86);
    std::vector<float> p = scores, ds = dp;
    CausalSoftmax(s.rows, s.cols, p.data());
    CausalSoftmaxBackward(s.rows, s.cols, p.data(), ds.data());
    std::vector<float> first_p, first_ds;
    for (int run = 0; run < 2; ++run) {
      DeviceBuffer p_dev(scores), p_in(p), ds_dev(dp);
      LaunchCausalSoftmax(s.rows, s.cols, p_dev.data(), stream_);
      LaunchCausalSoftmaxBackward(s.rows, s.cols, p_in.data(), ds_dev.data(), stream_);
      Sync();
      if (run == 0) {
        first_p = p_dev.ToHost();
        first_ds = ds_dev.ToHost();
        ExpectClose(p, first_p, kTol, kEps, "p");
        ExpectClose(ds, first_ds, kTol, kEps, "ds");
      } else {
        ExpectBitIdentical(first_p, p_dev.ToHost(), "p, second run");
        ExpectBitIdentical(first_ds, ds_dev.ToHost(), "ds, second run");
      }
    }
  }
}

// One column, one row, few rows, columns off the 32-wide tiles, many chunks (8192 x 768 is a
// GPT's LayerNorm: 24 tiles x 43 chunks), a vocabulary-wide row.
const std::vector<Shape> kColumnShapes = {{1, 1}, {1, 50257}, {7, 33}, {9, 31}, {1000, 300}, {8192, 768}};

TEST_F(LaunchersGpuTest, ColumnSumsAreExactWhereEveryOrderIsAndRepeatBitForBit) {
  for (const Shape s : kColumnShapes) {
    SCOPED_TRACE(Name(s));
    const size_t n = static_cast<size_t>(s.rows) * s.cols;
    for (const bool accumulate : {false, true}) {
      SCOPED_TRACE(accumulate ? "+=" : "=");
      // Exact: multiples of 1/8, and LayerNorm's x̂ = (x − 0)·1 = x, so every sum is exact.
      const std::vector<float> dz = EighthsValues(n, 87), x = EighthsValues(n, 88);
      const std::vector<float> mean(s.rows, 0.0f), rstd(s.rows, 1.0f), start = EighthsValues(s.cols, 89);
      std::vector<float> bias_grad = start, dgamma = start, dbeta = start;
      BiasGrad(s.rows, s.cols, dz.data(), bias_grad.data(), accumulate);
      LayerNormBackwardWeight(s.rows, s.cols, dz.data(), x.data(), mean.data(), rstd.data(), dgamma.data(),
                              dbeta.data(), accumulate);
      DeviceBuffer dz_dev(dz), x_dev(x), mean_dev(mean), rstd_dev(rstd);
      DeviceBuffer bias_grad_dev(start), dgamma_dev(start), dbeta_dev(start);
      Scratch bias_scratch(BiasGradScratchFloats(s.rows, s.cols));
      Scratch ln_scratch(LayerNormBackwardWeightScratchFloats(s.rows, s.cols));
      LaunchBiasGrad(s.rows, s.cols, dz_dev.data(), bias_grad_dev.data(), accumulate, bias_scratch.span(), stream_);
      LaunchLayerNormBackwardWeight(s.rows, s.cols, dz_dev.data(), x_dev.data(), mean_dev.data(), rstd_dev.data(),
                                    dgamma_dev.data(), dbeta_dev.data(), accumulate, ln_scratch.span(), stream_);
      Sync();
      ExpectBitIdentical(bias_grad, bias_grad_dev.ToHost(), "bias_grad");
      ExpectBitIdentical(dgamma, dgamma_dev.ToHost(), "dgamma");
      ExpectBitIdentical(dbeta, dbeta_dev.ToHost(), "dbeta");
    }
    // Random values: rounding differs from the host's order, but not from run to run.
    const std::vector<float> dz = RandomValues(n, 90), x = RandomValues(n, 91);
    const std::vector<float> mean = RandomValues(s.rows, 92, -0.5f, 0.5f), rstd = RandomValues(s.rows, 93, 0.5f, 2.0f);
    DeviceBuffer dz_dev(dz), x_dev(x), mean_dev(mean), rstd_dev(rstd);
    std::vector<std::vector<float>> runs;
    for (int run = 0; run < 2; ++run) {
      DeviceBuffer bias_grad_dev{std::vector<float>(s.cols)}, dgamma_dev{std::vector<float>(s.cols)};
      DeviceBuffer dbeta_dev{std::vector<float>(s.cols)};
      Scratch scratch(LayerNormBackwardWeightScratchFloats(s.rows, s.cols));  // serves both, one after the other
      LaunchBiasGrad(s.rows, s.cols, dz_dev.data(), bias_grad_dev.data(), false, scratch.span(), stream_);
      LaunchLayerNormBackwardWeight(s.rows, s.cols, dz_dev.data(), x_dev.data(), mean_dev.data(), rstd_dev.data(),
                                    dgamma_dev.data(), dbeta_dev.data(), false, scratch.span(), stream_);
      Sync();
      if (run == 0) {
        std::vector<float> bias_grad(s.cols), dgamma(s.cols), dbeta(s.cols);
        BiasGrad(s.rows, s.cols, dz.data(), bias_grad.data(), false);
        LayerNormBackwardWeight(s.rows, s.cols, dz.data(), x.data(), mean.data(), rstd.data(), dgamma.data(),
                                dbeta.data(), false);
        // Sums of up to 8192 terms of spread ~4 (dgamma; ~2 for the others). The host adds them in
        // row order: its partial sums grow like 4√k and each addition rounds by up to half an
        // ulp of them, ~1e-7·rows in all (one standard deviation; 8e-4 at 8192 rows). The
        // device's tiles and tree round far less. 1e-5·√rows·15 is 17 of those deviations.
        const float tol = 1e-5f * std::sqrt(static_cast<float>(s.rows)) * 15.0f;
        ExpectClose(bias_grad, bias_grad_dev.ToHost(), tol, kEps, "bias_grad vs host");
        ExpectClose(dgamma, dgamma_dev.ToHost(), tol, kEps, "dgamma vs host");
        ExpectClose(dbeta, dbeta_dev.ToHost(), tol, kEps, "dbeta vs host");
      }
      runs.push_back(bias_grad_dev.ToHost());
      runs.push_back(dgamma_dev.ToHost());
      runs.push_back(dbeta_dev.ToHost());
    }
    ExpectBitIdentical(runs[0], runs[3], "bias_grad, second run");
    ExpectBitIdentical(runs[1], runs[4], "dgamma, second run");
    ExpectBitIdentical(runs[2], runs[5], "dbeta, second run");
  }
}

TEST_F(LaunchersGpuTest, LossWithOneRowOneColumnAndMoreRowsThanBlocks) {
  // Cross entropy over one class: softmax is 1, so the loss and dy are exactly 0.
  {
    const std::vector<float> y = RandomValues(5, 94), labels(5, 0.0f);
    DeviceBuffer y_dev(y), labels_dev(labels), dy_dev{std::vector<float>(5, 7.0f)}, loss_dev({-1.0f});
    Scratch scratch(LossScratchFloats(5));
    LaunchLoss(LossKind::kCrossEntropy, 5, 1, y_dev.data(), labels_dev.data(), dy_dev.data(), loss_dev.data(), 1.0f,
               scratch.span(), stream_);
    Sync();
    EXPECT_EQ(loss_dev.ToHost(), std::vector<float>{0.0f});
    EXPECT_EQ(dy_dev.ToHost(), std::vector<float>(5, 0.0f));
  }
  // One vocabulary-wide row (the tolerance of CrossEntropyLossMatchesHostAtVocabularyWidth).
  {
    const std::vector<float> y = RandomValues(50257, 95, -30.0f, 30.0f), labels = {12345.0f};
    std::vector<float> dy(y.size());
    const float loss = Loss(LossKind::kCrossEntropy, 1, 50257, y.data(), labels.data(), dy.data());
    DeviceBuffer y_dev(y), labels_dev(labels), dy_dev{std::vector<float>(y.size())}, loss_dev({-1.0f});
    Scratch scratch(LossScratchFloats(1));
    LaunchLoss(LossKind::kCrossEntropy, 1, 50257, y_dev.data(), labels_dev.data(), dy_dev.data(), loss_dev.data(),
               1.0f, scratch.span(), stream_);
    Sync();
    ExpectClose({loss}, loss_dev.ToHost(), 0.0f, 5e-5f, "loss, one row");
    ExpectClose(dy, dy_dev.ToHost(), 1e-20f, 5e-5f, "dy, one row");
  }
  // 70000 rows (more than 65535 blocks: the grid-stride loop over rows) of 3 columns: the mean
  // against one worked in double (the host's fp32 sum of 70000 terms strays further than the
  // device's tree: ~69 terms per thread, then 10 levels).
  constexpr int kRows = 70'000, kCols = 3;
  const std::vector<float> y = RandomValues(kRows * kCols, 96), t = RandomValues(kRows * kCols, 97);
  std::vector<float> dy(y.size());
  Loss(LossKind::kMse, kRows, kCols, y.data(), t.data(), dy.data());
  double exact = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double d = static_cast<double>(y[i]) - t[i];
    exact += d * d;
  }
  exact /= static_cast<double>(y.size());
  DeviceBuffer y_dev(y), t_dev(t), dy_dev{std::vector<float>(y.size())}, loss_dev({-1.0f});
  Scratch scratch(LossScratchFloats(kRows));
  LaunchLoss(LossKind::kMse, kRows, kCols, y_dev.data(), t_dev.data(), dy_dev.data(), loss_dev.data(), 1.0f,
             scratch.span(), stream_);
  Sync();
  ExpectClose({static_cast<float>(exact)}, loss_dev.ToHost(), 0.0f, 1e-5f, "mean loss, 70000 rows");
  ExpectClose(dy, dy_dev.ToHost(), 1e-12f, kEps, "dy, 70000 rows");
}

}  // namespace
}  // namespace stagecraft::kernels
