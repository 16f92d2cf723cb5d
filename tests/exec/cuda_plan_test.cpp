// Tests for exec/cuda_plan.h, the cuda backend's host-side decisions, on any machine. The GEMM
// mapping is checked by running the column-major call it describes (as cuBLAS defines
// op, m, n, k and the leading dimensions) on the row-major buffers, against the row-major
// product written out directly, for every pair of transposes.
#include "stagecraft/exec/cuda_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace stagecraft::exec {
namespace {

// cuBLAS's sgemm semantics on column-major storage: c(i, j) = Σ_l opA(i, l) · opB(l, j), with
// element (r, c) of a column-major matrix with leading dimension ld at [r + c·ld].
void ColumnMajorSgemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                      float* c, int ldc) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int l = 0; l < k; ++l) {
        const float av = trans_a ? a[l + i * lda] : a[i + l * lda];
        const float bv = trans_b ? b[j + l * ldb] : b[l + j * ldb];
        sum += static_cast<double>(av) * bv;
      }
      c[i + j * ldc] = static_cast<float>(sum);
    }
  }
}

TEST(CudaPlanTest, RowMajorGemmAsOneColumnMajorCallForEveryTranspose) {
  constexpr int m = 3, n = 5, k = 4;
  for (const bool trans_a : {false, true}) {
    for (const bool trans_b : {false, true}) {
      SCOPED_TRACE(testing::Message() << "trans_a " << trans_a << " trans_b " << trans_b);
      // a holds op(a) [m x k] row-major, stored transposed ([k x m]) when trans_a; b likewise.
      std::vector<float> a(m * k), b(k * n);
      auto a_at = [&](int i, int l) -> float& { return trans_a ? a[l * m + i] : a[i * k + l]; };
      auto b_at = [&](int l, int j) -> float& { return trans_b ? b[j * k + l] : b[l * n + j]; };
      for (int i = 0; i < m; ++i) {
        for (int l = 0; l < k; ++l) a_at(i, l) = static_cast<float>(1 + i * 7 + l * 3 % 5) * (l % 2 ? -1.0f : 1.0f);
      }
      for (int l = 0; l < k; ++l) {
        for (int j = 0; j < n; ++j) b_at(l, j) = static_cast<float>(2 + l * 5 + j) * (j % 3 ? 1.0f : -0.5f);
      }
      std::vector<float> want(m * n, 0.0f);
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          for (int l = 0; l < k; ++l) want[i * n + j] += a_at(i, l) * b_at(l, j);
        }
      }
      const ColumnMajorGemm g = ToColumnMajor(trans_a, trans_b, m, n, k);
      std::vector<float> got(m * n, -1.0f);
      ColumnMajorSgemm(g.trans_first, g.trans_second, g.m, g.n, g.k, b.data(), g.ld_first, a.data(), g.ld_second,
                       got.data(), g.ld_out);
      EXPECT_EQ(got, want);
    }
  }
}

// cuBLASLt's epilogues as its documentation defines them, on column-major storage: GELU_AUX_BIAS
// adds bias[i] to row i of the product, keeps that in aux (leading dimension aux_ld) and writes
// GELU (tanh form) of it; BGRADB writes the product and, for each column j of it, the sum of
// column j of op(second) over the inner dimension.
float TanhGelu(double v) { return static_cast<float>(0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))); }
// Its derivative: 0.5 (1 + tanh u) + 0.5 v (1 - tanh² u) u', u = √(2/π) (v + 0.044715 v³).
double TanhGeluDerivative(double v) {
  const double t = std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v));
  return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * v * v);
}

void LtCall(const LtLinearPlan& p, const float* first, const float* second, const float* bias, float* d, float* aux,
            float* bias_grad) {
  const ColumnMajorGemm& g = p.g;
  ColumnMajorSgemm(g.trans_first, g.trans_second, g.m, g.n, g.k, first, g.ld_first, second, g.ld_second, d, g.ld_out);
  if (p.epilogue == LtEpilogue::kDGelu) {  // DGELU: aux is the GELU's input, read
    for (int j = 0; j < g.n; ++j) {
      for (int i = 0; i < g.m; ++i) d[i + j * g.ld_out] *= static_cast<float>(TanhGeluDerivative(aux[i + j * p.aux_ld]));
    }
    return;
  }
  if (p.epilogue == LtEpilogue::kBias) {  // BIAS: bias[i] added to row i (after beta · C, added by the caller)
    for (int j = 0; j < g.n; ++j) {
      for (int i = 0; i < g.m; ++i) d[i + j * g.ld_out] += bias[i];
    }
    return;
  }
  if (p.epilogue == LtEpilogue::kGeluAuxBias) {
    for (int j = 0; j < g.n; ++j) {
      for (int i = 0; i < g.m; ++i) {
        const double v = static_cast<double>(d[i + j * g.ld_out]) + bias[i];
        aux[i + j * p.aux_ld] = static_cast<float>(v);
        d[i + j * g.ld_out] = TanhGelu(v);
      }
    }
    return;
  }
  for (int j = 0; j < g.n; ++j) {
    double sum = 0;
    for (int l = 0; l < g.k; ++l) sum += g.trans_second ? second[j + l * g.ld_second] : second[l + j * g.ld_second];
    bias_grad[j] = static_cast<float>(sum);
  }
}

// The fused plans, run as cuBLASLt would run them on the layer's row-major buffers, give the
// layer's own math written out directly: z = x·wᵀ + b, out = GELU(z); dw = dzᵀ·x, db = Σ_rows dz.
TEST(CudaPlanTest, FusedLinearPlansComputeTheLayersMath) {
  constexpr int rows = 5, in = 3, out = 8;
  std::vector<float> x(rows * in), w(out * in), b(out), dz(rows * out);
  for (int i = 0; i < rows * in; ++i) x[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  for (int i = 0; i < out * in; ++i) w[i] = 0.125f * static_cast<float>(i % 5) - 0.25f;
  for (int i = 0; i < out; ++i) b[i] = 0.0625f * static_cast<float>(i) - 0.2f;
  for (int i = 0; i < rows * out; ++i) dz[i] = 0.5f - 0.0625f * static_cast<float>(i % 9);
  std::vector<float> want_z(rows * out), want_out(rows * out), want_dw(out * in, 0.0f), want_db(out, 0.0f);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      double z = b[o];
      for (int i = 0; i < in; ++i) z += static_cast<double>(x[r * in + i]) * w[o * in + i];
      want_z[r * out + o] = static_cast<float>(z);
      want_out[r * out + o] = TanhGelu(z);
      want_db[o] += dz[r * out + o];
      for (int i = 0; i < in; ++i) want_dw[o * in + i] += dz[r * out + o] * x[r * in + i];
    }
  }
  const std::optional<LtLinearPlan> f = PlanFusedForward(true, false, rows, out, in, true);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->bias_length, out);
  std::vector<float> got_out(rows * out, -9.0f), got_z(rows * out, -9.0f);
  LtCall(*f, w.data(), x.data(), b.data(), got_out.data(), got_z.data(), nullptr);  // first w, second x
  for (int i = 0; i < rows * out; ++i) {
    EXPECT_NEAR(got_z[i], want_z[i], 1e-6) << i;
    EXPECT_NEAR(got_out[i], want_out[i], 1e-6) << i;
  }
  const std::optional<LtLinearPlan> wg = PlanFusedWeightGrad(rows, out, in, true);
  ASSERT_TRUE(wg.has_value());
  EXPECT_EQ(wg->bias_length, out);
  std::vector<float> got_dw(out * in, -9.0f), got_db(out, -9.0f);
  LtCall(*wg, x.data(), dz.data(), nullptr, got_dw.data(), nullptr, got_db.data());  // first x, second dz
  for (int i = 0; i < out * in; ++i) EXPECT_NEAR(got_dw[i], want_dw[i], 1e-6) << i;
  for (int i = 0; i < out; ++i) EXPECT_NEAR(got_db[i], want_db[i], 1e-6) << i;
}

// The input gradient's plan, run as cuBLASLt's DGELU would: d = GELU'(pre) ⊙ (dz · w), pre the
// GELU's input before the layer ([rows x in]).
TEST(CudaPlanTest, FusedInputGradPlanComputesTheLayersMath) {
  constexpr int rows = 5, in = 8, out = 3;
  std::vector<float> dz(rows * out), w(out * in), pre(rows * in);
  for (int i = 0; i < rows * out; ++i) dz[i] = 0.25f * static_cast<float>(i % 7) - 0.75f;
  for (int i = 0; i < out * in; ++i) w[i] = 0.125f * static_cast<float>(i % 5) - 0.25f;
  for (int i = 0; i < rows * in; ++i) pre[i] = 0.375f * static_cast<float>(i % 11) - 2.0f;
  std::vector<float> want(rows * in);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < in; ++i) {
      double sum = 0;
      for (int o = 0; o < out; ++o) sum += static_cast<double>(dz[r * out + o]) * w[o * in + i];
      want[r * in + i] = static_cast<float>(sum * TanhGeluDerivative(pre[r * in + i]));
    }
  }
  const std::optional<LtLinearPlan> p = PlanFusedInputGrad(true, rows, out, in, true);
  ASSERT_TRUE(p.has_value());
  std::vector<float> got(rows * in, -9.0f);
  LtCall(*p, w.data(), dz.data(), nullptr, got.data(), pre.data(), nullptr);  // first w, second dz
  for (int i = 0; i < rows * in; ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  EXPECT_FALSE(PlanFusedInputGrad(false, rows, out, in, true));
  EXPECT_FALSE(PlanFusedInputGrad(true, rows, out, 12, true));
  EXPECT_FALSE(PlanFusedInputGrad(true, rows, out, in, false));
}

// A layer with no activation: y = x·wᵀ + bias + residual, the residual as cuBLASLt's C (beta 1),
// the same layout as the output.
TEST(CudaPlanTest, FusedBiasPlanComputesTheLayersMath) {
  constexpr int rows = 4, in = 3, out = 5;
  std::vector<float> x(rows * in), w(out * in), b(out), res(rows * out);
  for (int i = 0; i < rows * in; ++i) x[i] = 0.5f * static_cast<float>(i % 5) - 1.0f;
  for (int i = 0; i < out * in; ++i) w[i] = 0.25f * static_cast<float>(i % 7) - 0.75f;
  for (int i = 0; i < out; ++i) b[i] = 0.125f * static_cast<float>(i);
  for (int i = 0; i < rows * out; ++i) res[i] = 1.0f - 0.0625f * static_cast<float>(i);
  const std::optional<LtLinearPlan> p = PlanFusedBias(rows, out, in, true);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->bias_length, out);
  EXPECT_EQ(p->aux_ld, 0);
  std::vector<float> got(rows * out);
  LtCall(*p, w.data(), x.data(), b.data(), got.data(), nullptr, nullptr);
  for (int i = 0; i < rows * out; ++i) got[i] += res[i];  // beta · C, C laid out as D
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      double want = b[o] + res[r * out + o];
      for (int i = 0; i < in; ++i) want += static_cast<double>(x[r * in + i]) * w[o * in + i];
      EXPECT_NEAR(got[r * out + o], want, 1e-6) << r << "," << o;
    }
  }
  EXPECT_FALSE(PlanFusedBias(rows, out, in, false));
  EXPECT_FALSE(PlanFusedBias(0, out, in, true));
}

// What the epilogue cannot hold runs unfused: ReLU (its auxiliary output is a bit mask, not the
// pre-activation the backward reads), a residual after the activation, a width the auxiliary
// output's leading dimension cannot take, misaligned operands, an empty product.
TEST(CudaPlanTest, FusedLinearPlansRefuseWhatTheEpilogueCannotHold) {
  EXPECT_FALSE(PlanFusedForward(false, false, 4, 8, 8, true));
  EXPECT_FALSE(PlanFusedForward(true, true, 4, 8, 8, true));
  EXPECT_FALSE(PlanFusedForward(true, false, 4, 12, 8, true));
  EXPECT_FALSE(PlanFusedForward(true, false, 4, 8, 8, false));
  EXPECT_FALSE(PlanFusedForward(true, false, 0, 8, 8, true));
  EXPECT_TRUE(PlanFusedForward(true, false, 4, 16, 3, true));
  EXPECT_FALSE(PlanFusedWeightGrad(4, 8, 8, false));
  EXPECT_FALSE(PlanFusedWeightGrad(4, 0, 8, true));
  EXPECT_TRUE(PlanFusedWeightGrad(4, 12, 3, true));
  alignas(16) float buffer[8] = {};
  EXPECT_TRUE(LtAligned({buffer, buffer + 4, nullptr}));
  EXPECT_FALSE(LtAligned({buffer, buffer + 1}));
}

TEST(CudaPlanTest, DtypesAndGpus) {
  EXPECT_EQ(GemmPrecisionFor("fp32"), GemmPrecision::kFp32);
  EXPECT_EQ(GemmPrecisionFor("tf32"), GemmPrecision::kTf32);
  EXPECT_EQ(GemmPrecisionFor("bf16"), GemmPrecision::kBf16);
  EXPECT_EQ(GemmPrecisionFor("fp16"), GemmPrecision::kFp16);
  EXPECT_FALSE(GemmPrecisionFor("fp8").has_value());
  EXPECT_FALSE(GemmPrecisionFor("FP32").has_value());
  // Four processes on a node with 2 GPUs share them round robin; with 8 GPUs each has its own.
  EXPECT_EQ(GpuForLocalRank(0, 2), 0);
  EXPECT_EQ(GpuForLocalRank(3, 2), 1);
  EXPECT_EQ(GpuForLocalRank(3, 8), 3);
  EXPECT_EQ(GpuForLocalRank(1, 0), -1);
  // Two ranks per GPU: neighbours together, as pipeline.ranks_per_device places them.
  EXPECT_EQ(GpuForLocalRank(0, 2, 2), 0);
  EXPECT_EQ(GpuForLocalRank(1, 2, 2), 0);
  EXPECT_EQ(GpuForLocalRank(2, 2, 2), 1);
  EXPECT_EQ(GpuForLocalRank(3, 2, 2), 1);
  EXPECT_EQ(GpuForLocalRank(1, 1, 2), 0);
}

// A rank's channels are the routes it sends or receives on, each once, in the routes' order
// (which every rank shares): by hand, 1F1B's routes on 3 ranks give the middle rank all four
// directions and the end ranks two; an interleaved run's wrap-around (2 -> 0 and back) joins
// ranks 0 and 2 only where it is a route; a repeated route (another size) adds no channel.
TEST(CudaPlanTest, NcclChannelsAreTheRoutesARankTakesPartIn) {
  const std::vector<Route> pipeline = {{0, 1, 8}, {1, 0, 8}, {1, 2, 8}, {2, 1, 8}};
  EXPECT_EQ(NcclChannelsOf(pipeline, 1), (std::vector<NcclChannel>{{0, 1}, {1, 0}, {1, 2}, {2, 1}}));
  EXPECT_EQ(NcclChannelsOf(pipeline, 0), (std::vector<NcclChannel>{{0, 1}, {1, 0}}));
  EXPECT_EQ(NcclChannelsOf(pipeline, 2), (std::vector<NcclChannel>{{1, 2}, {2, 1}}));
  EXPECT_TRUE(NcclChannelsOf(pipeline, 3).empty());
  std::vector<Route> looped = pipeline;
  looped.insert(looped.end(), {{2, 0, 8}, {0, 2, 8}, {0, 1, 64}});
  EXPECT_EQ(NcclChannelsOf(looped, 0), (std::vector<NcclChannel>{{0, 1}, {1, 0}, {2, 0}, {0, 2}}));
  EXPECT_TRUE(NcclChannelsOf({}, 0).empty());
}

// By hand: rank 1 of a 3-rank pipeline connects each of its four channels at the boundary's
// size, in the routes' order; a second size on one route is a probe of its own, a repeated
// route or an empty size none; a later run connects only what an earlier one did not.
TEST(CudaPlanTest, NcclProbesAreEachChannelAndSizeNotMovedBefore) {
  const std::vector<Route> routes = {{0, 1, 8}, {1, 0, 8}, {1, 2, 8}, {2, 1, 8}, {0, 1, 8}, {1, 2, 64}, {2, 0, 8},
                                     {1, 0, 0}};
  const std::vector<NcclProbe> all = {{{0, 1}, 8}, {{1, 0}, 8}, {{1, 2}, 8}, {{2, 1}, 8}, {{1, 2}, 64}};
  EXPECT_EQ(NcclProbesOf(routes, 1, {}), all);
  EXPECT_EQ(NcclProbesOf(routes, 0, {}), (std::vector<NcclProbe>{{{0, 1}, 8}, {{1, 0}, 8}, {{2, 0}, 8}}));
  EXPECT_EQ(NcclProbesOf(routes, 1, {{{1, 0}, 8}, {{1, 2}, 8}}),
            (std::vector<NcclProbe>{{{0, 1}, 8}, {{2, 1}, 8}, {{1, 2}, 64}}));
  EXPECT_TRUE(NcclProbesOf(routes, 1, all).empty());
}

TEST(CudaPlanTest, GpusAreDistinctByBusId) {
  // By bus id: 2 processes on 2 GPUs, 4 of 8, one GPU per process through CUDA_VISIBLE_DEVICES
  // (each sees "1 GPU") are distinct; 2 processes on 1 GPU, or a process without one, are not.
  EXPECT_TRUE(GpusAreDistinct({"0000:3b:00.0", "0000:5e:00.0"}));
  EXPECT_TRUE(GpusAreDistinct({"0000:1b:00.0", "0000:3b:00.0", "0000:5e:00.0", "0000:86:00.0"}));
  EXPECT_FALSE(GpusAreDistinct({"0000:3b:00.0", "0000:3b:00.0"}));
  EXPECT_TRUE(GpusAreDistinct({"0000:3b:00.0"}));
  EXPECT_FALSE(GpusAreDistinct({"0000:3b:00.0", "0000:5e:00.0", "0000:3b:00.0"}));
  EXPECT_FALSE(GpusAreDistinct({"0000:3b:00.0", ""}));
  EXPECT_FALSE(GpusAreDistinct({}));
}

}  // namespace
}  // namespace stagecraft::exec
