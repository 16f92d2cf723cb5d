// Tests for exec/src/layer_ops.cpp, the per-layer op table: every layer kind has its cpu ops
// registered, and its cuda ops whenever the build has the cuda backend (none otherwise); a
// device hands out its backend's column; and ops run through the table on the cpu give
// hand-worked results.
#include "stagecraft/exec/layer_ops.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/device.h"

namespace stagecraft::exec {
namespace {

TEST(LayerOpsTest, EveryKindIsListedOnceByName) {
  std::vector<std::string> names;
  for (const LayerKindInfo& kind : LayerKinds()) names.push_back(kind.name);
  const std::vector<std::string> expected = {"linear",     "bias_activation", "fused_linear", "bias_add", "layer_norm",
                                             "attention", "embedding",       "loss",         "optimizer"};
  EXPECT_EQ(names, expected);
}

// The op counts are the ops each kind states in layer_ops.h, counted by hand.
TEST(LayerOpsTest, EveryKindHasItsOpsOnEveryBackendOfTheBuild) {
  const std::vector<int> ops_per_kind = {4, 3, 4, 1, 4, 4, 2, 1, 2};
  const std::vector<LayerKindInfo> kinds = LayerKinds();
  ASSERT_EQ(kinds.size(), ops_per_kind.size());
  for (size_t i = 0; i < kinds.size(); ++i) {
    SCOPED_TRACE(kinds[i].name);
    EXPECT_EQ(kinds[i].ops, ops_per_kind[i]);
    EXPECT_EQ(kinds[i].missing_cpu, 0);
    EXPECT_EQ(kinds[i].missing_cuda, HaveCudaBackend() ? 0 : kinds[i].ops);
  }
}

TEST(LayerOpsTest, EachBackendGetsItsOwnColumn) {
  const LayerTableRows& table = LayerTable();
  EXPECT_EQ(LayerOpsFor(OpBackend::kCpu).layer_norm.forward, table.layer_norm.cpu.forward);
  EXPECT_EQ(LayerOpsFor(OpBackend::kCuda).layer_norm.forward, table.layer_norm.cuda.forward);
  EXPECT_EQ(LayerOpsFor(OpBackend::kCpu).optimizer.adam, table.optimizer.cpu.adam);
  if (HaveCudaBackend()) {
    EXPECT_NE(table.linear.cpu.gemm, table.linear.cuda.gemm);
  }
  auto device = MakeCpuDevice();
  EXPECT_EQ(device->ops().linear.gemm, table.linear.cpu.gemm);
  EXPECT_EQ(device->ops().embedding.backward, table.embedding.cpu.backward);
}

// The cpu column's fused linear layer is its unfused ops in order: x = [1 2], w = [1 0; 0 1; 1 1]
// (3 outputs of 2 inputs), bias [0.5 -3 0]: z = [1.5 -1 3], out = ReLU(z) + residual [1 1 1] =
// [2.5 1 4]; dz = [1 2 3] twice accumulated onto dw = 1s and db = 1s: dw = 1 + dzᵀ·x = [2 3; 3 5;
// 4 7], db = 1 + dz = [2 3 4]; the input gradient through a ReLU before the layer at pre = [-1 2]:
// dz·w = [4 5], d = [0 5].
TEST(LayerOpsTest, CpuFusedLinearIsTheUnfusedOps) {
  auto device = MakeCpuDevice();
  const FusedLinearOps& fused = device->ops().fused_linear;
  OpContext& cx = device->op_context();
  const float x[] = {1, 2}, w[] = {1, 0, 0, 1, 1, 1}, bias[] = {0.5f, -3, 0}, residual[] = {1, 1, 1};
  float z[3] = {}, out[3] = {};
  fused.forward(cx, kernels::Activation::kRelu, 1, 3, 2, x, w, bias, residual, z, out);
  EXPECT_EQ(std::vector<float>(z, z + 3), (std::vector<float>{1.5f, -1, 3}));
  EXPECT_EQ(std::vector<float>(out, out + 3), (std::vector<float>{2.5f, 1, 4}));
  const float dz[] = {1, 2, 3};
  float dw[6] = {1, 1, 1, 1, 1, 1}, db[3] = {1, 1, 1};
  fused.weight_grad(cx, 1, 3, 2, dz, x, dw, db, true);
  EXPECT_EQ(std::vector<float>(dw, dw + 6), (std::vector<float>{2, 3, 3, 5, 4, 7}));
  EXPECT_EQ(std::vector<float>(db, db + 3), (std::vector<float>{2, 3, 4}));
  const float pre[] = {-1, 2};
  float d[2] = {9, 9};
  fused.input_grad(cx, kernels::Activation::kRelu, 1, 3, 2, dz, w, pre, d);
  EXPECT_EQ(std::vector<float>(d, d + 2), (std::vector<float>{0, 5}));
  // No activation: x·wᵀ + bias + residual = [1 2 3] + [0.5 -3 0] + [1 1 1] = [2.5 0 4].
  float y[3] = {};
  fused.forward_bias(cx, 1, 3, 2, x, w, bias, residual, y);
  EXPECT_EQ(std::vector<float>(y, y + 3), (std::vector<float>{2.5f, 0, 4}));
}

// [1 2; 3 4] · [5 6; 7 8] = [19 22; 43 50]; with a transposed: [1 3; 2 4] · b = [26 30; 38 44].
TEST(LayerOpsTest, CpuLinearOpsThroughTheTable) {
  auto device = MakeCpuDevice();
  const LinearOps& linear = device->ops().linear;
  OpContext& cx = device->op_context();
  const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
  float c[4] = {};
  linear.gemm(cx, false, false, 2, 2, 2, 1.0f, a, b, 0.0f, c);
  EXPECT_EQ(std::vector<float>(c, c + 4), (std::vector<float>{19, 22, 43, 50}));
  linear.gemm(cx, true, false, 2, 2, 2, 1.0f, a, b, 0.0f, c);
  EXPECT_EQ(std::vector<float>(c, c + 4), (std::vector<float>{26, 30, 38, 44}));
  // Two 1x1 products in a batch: 2·3 and 4·5.
  const float x[] = {2, 4}, y[] = {3, 5};
  float z[2] = {};
  linear.gemm_batched(cx, false, false, 1, 1, 1, 1.0f, x, 1, y, 1, 0.0f, z, 1, 2);
  EXPECT_EQ(z[0], 6.0f);
  EXPECT_EQ(z[1], 20.0f);
  float acc[] = {1, 2};
  linear.axpy(cx, 2, 2.0f, y, acc);  // [1 + 6, 2 + 10]
  EXPECT_EQ(acc[0], 7.0f);
  EXPECT_EQ(acc[1], 12.0f);
}

// x + bias + residual, row by row: [1 2; 3 4] + [10 20] + 1 = [12 23; 14 25].
TEST(LayerOpsTest, CpuBiasAddThroughTheTable) {
  auto device = MakeCpuDevice();
  float x[] = {1, 2, 3, 4};
  const float bias[] = {10, 20}, residual[] = {1, 1, 1, 1};
  device->ops().bias_add.forward(device->op_context(), 2, 2, x, bias, residual);
  EXPECT_EQ(std::vector<float>(x, x + 4), (std::vector<float>{12, 23, 14, 25}));
}

}  // namespace
}  // namespace stagecraft::exec
