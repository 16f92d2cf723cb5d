// The per-layer op table (layer_ops.h): one row per layer kind, its cpu ops and its cuda ops.
// Adding a kind is its ops struct and a member of LayerOps and LayerTableRows (layer_ops.h), its
// two implementations (cpu_layer_ops.cpp, cuda/cuda_layer_ops.cpp, each in its backend's
// column) and its row here.
#include "stagecraft/exec/layer_ops.h"

#include <cstring>
#include <type_traits>

namespace stagecraft::exec {
namespace {

// Every row, each field read as a function pointer: an ops struct holds function pointers only.
using AnyFn = void (*)();
template <typename Ops>
int CountOps() {
  static_assert(std::is_trivially_copyable_v<Ops> && sizeof(Ops) % sizeof(AnyFn) == 0,
                "a layer kind's ops struct holds function pointers only");
  return static_cast<int>(sizeof(Ops) / sizeof(AnyFn));
}
template <typename Ops>
int CountMissing(const Ops& ops) {
  AnyFn fns[sizeof(Ops) / sizeof(AnyFn)];
  std::memcpy(fns, &ops, sizeof(Ops));
  int missing = 0;
  for (AnyFn fn : fns) missing += fn == nullptr ? 1 : 0;
  return missing;
}

template <typename Ops>
const Ops& Column(const LayerRow<Ops>& row, OpBackend backend) {
  return backend == OpBackend::kCuda ? row.cuda : row.cpu;
}

LayerOps Pick(const LayerTableRows& t, OpBackend b) {
  return LayerOps{Column(t.linear, b),     Column(t.bias_activation, b), Column(t.fused_linear, b),
                  Column(t.bias_add, b),   Column(t.layer_norm, b),      Column(t.attention, b),
                  Column(t.embedding, b),  Column(t.loss, b),            Column(t.optimizer, b)};
}

}  // namespace

const LayerTableRows& LayerTable() {
  static const LayerOps cpu = CpuLayerOps();
#if STAGECRAFT_WITH_CUDA
  static const LayerOps cuda = CudaLayerOps();
#else
  static const LayerOps cuda{};  // no cuda library in this build
#endif
  static const LayerTableRows table{
      .linear = {"linear", cpu.linear, cuda.linear},
      .bias_activation = {"bias_activation", cpu.bias_activation, cuda.bias_activation},
      .fused_linear = {"fused_linear", cpu.fused_linear, cuda.fused_linear},
      .bias_add = {"bias_add", cpu.bias_add, cuda.bias_add},
      .layer_norm = {"layer_norm", cpu.layer_norm, cuda.layer_norm},
      .attention = {"attention", cpu.attention, cuda.attention},
      .embedding = {"embedding", cpu.embedding, cuda.embedding},
      .loss = {"loss", cpu.loss, cuda.loss},
      .optimizer = {"optimizer", cpu.optimizer, cuda.optimizer},
  };
  return table;
}

const LayerOps& LayerOpsFor(OpBackend backend) {
  static const LayerOps cpu = Pick(LayerTable(), OpBackend::kCpu);
  static const LayerOps cuda = Pick(LayerTable(), OpBackend::kCuda);
  return backend == OpBackend::kCuda ? cuda : cpu;
}

std::vector<LayerKindInfo> LayerKinds() {
  std::vector<LayerKindInfo> kinds;
  size_t listed_bytes = 0;
  auto add = [&](const auto& row) {
    using Ops = std::decay_t<decltype(row.cpu)>;
    kinds.push_back({row.name, CountOps<Ops>(), CountMissing(row.cpu), CountMissing(row.cuda)});
    listed_bytes += sizeof(Ops);
  };
  const LayerTableRows& t = LayerTable();
  add(t.linear);
  add(t.bias_activation);
  add(t.fused_linear);
  add(t.bias_add);
  add(t.layer_norm);
  add(t.attention);
  add(t.embedding);
  add(t.loss);
  add(t.optimizer);
  // A kind added to LayerOps but not listed above would escape the check: report it as missing.
  if (listed_bytes != sizeof(LayerOps)) kinds.push_back({"(a kind LayerKinds does not list)", 0, 1, 1});
  return kinds;
}

void ComposedLinearForward(const LayerOps& ops, OpContext& cx, kernels::Activation act, int rows, int out_features,
                           int in_features, const float* x, const float* w, const float* bias, const float* residual,
                           float* z, float* out) {
  ops.linear.gemm(cx, false, true, rows, out_features, in_features, 1.0f, x, w, 0.0f, z);
  ops.bias_activation.forward(cx, act, rows, out_features, z, bias, residual, out);
}

void ComposedLinearWeightGrad(const LayerOps& ops, OpContext& cx, int rows, int out_features, int in_features,
                              const float* dz, const float* x, float* dw, float* dbias, bool accumulate) {
  ops.linear.gemm(cx, true, false, out_features, in_features, rows, 1.0f, dz, x, accumulate ? 1.0f : 0.0f, dw);
  ops.bias_activation.bias_grad(cx, rows, out_features, dz, dbias, accumulate);
}

void ComposedLinearInputGrad(const LayerOps& ops, OpContext& cx, kernels::Activation act, int rows, int out_features,
                             int in_features, const float* dz, const float* w, const float* pre, float* d) {
  ops.linear.gemm(cx, false, false, rows, in_features, out_features, 1.0f, dz, w, 0.0f, d);
  ops.bias_activation.backward(cx, act, int64_t{rows} * in_features, d, pre, d);  // in place: element by element
}

void ComposedLinearBias(const LayerOps& ops, OpContext& cx, int rows, int out_features, int in_features,
                        const float* x, const float* w, const float* bias, const float* residual, float* y) {
  ops.linear.gemm(cx, false, true, rows, out_features, in_features, 1.0f, x, w, 0.0f, y);
  ops.bias_add.forward(cx, rows, out_features, y, bias, residual);
}

}  // namespace stagecraft::exec
