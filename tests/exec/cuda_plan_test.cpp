// Tests for exec/cuda_plan.h, the cuda backend's host-side decisions, on any machine. The GEMM
// mapping is checked by running the column-major call it describes (as cuBLAS defines
// op, m, n, k and the leading dimensions) on the row-major buffers, against the row-major
// product written out directly, for every pair of transposes.
#include "stagecraft/exec/cuda_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
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
