// The per-layer op table (DESIGN.md §5): the math of each layer kind, once per backend. A row
// of LayerTable() names a kind and gives its cpu ops (OpenBLAS and the kernels/ host loops,
// exec/src/cpu_layer_ops.cpp) and its cuda ops (cuBLAS and the kernels/ launchers,
// exec/cuda/cuda_layer_ops.cpp; null in a build without CUDA). A Device hands out its backend's
// column (Device::ops()) and the state those ops run with (Device::op_context(): on cuda the
// compute stream, cuBLAS, the workspace and the 16-bit weight copies). All tensors are fp32,
// row-major, in the device tier; kernels/host.h states each op's contract.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stagecraft/kernels/host.h"

namespace stagecraft::exec {

// What a backend's ops run with; each backend derives its own (the cpu's holds nothing).
class OpContext {
 public:
  virtual ~OpContext() = default;
};

// Matrix products. gemm: c[m x n] = alpha · op(a) · op(b) + beta · c, op(x) = xᵀ when trans_x; a
// is [m x k] after op, b is [k x n] after op; all densely packed. gemm_batched: `batch` gemms of
// the same shapes, matrix i of a, b and c starting stride_x floats after matrix i − 1 (outputs
// must not overlap). axpy: y += alpha · x. scal: x = alpha · x.
struct LinearOps {
  void (*gemm)(OpContext&, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b,
               float beta, float* c);
  void (*gemm_batched)(OpContext&, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                       int64_t stride_a, const float* b, int64_t stride_b, float beta, float* c, int64_t stride_c,
                       int batch);
  void (*axpy)(OpContext&, int64_t n, float alpha, const float* x, float* y);
  void (*scal)(OpContext&, int64_t n, float alpha, float* x);
};

// out = act(z + bias) (+ residual), z updated to z + bias; act'(z) · dout; Σ_rows dz.
struct BiasActivationOps {
  void (*forward)(OpContext&, kernels::Activation act, int rows, int cols, float* z, const float* bias,
                  const float* residual, float* out);
  void (*backward)(OpContext&, kernels::Activation act, int64_t n, const float* dout, const float* z, float* dz);
  void (*bias_grad)(OpContext&, int rows, int cols, const float* dz, float* bias_grad, bool accumulate);
};

// x += bias (+ residual).
struct BiasAddOps {
  void (*forward)(OpContext&, int rows, int cols, float* x, const float* bias, const float* residual);
};

struct LayerNormOps {
  void (*forward)(OpContext&, int rows, int cols, const float* x, const float* gamma, const float* beta, float* out,
                  float* mean, float* rstd);
  void (*backward_input)(OpContext&, int rows, int cols, const float* dout, const float* x, const float* gamma,
                         const float* mean, const float* rstd, float* dx, bool accumulate);
  void (*backward_weight)(OpContext&, int rows, int cols, const float* dout, const float* x, const float* mean,
                          const float* rstd, float* dgamma, float* dbeta, bool accumulate);
  // The residual stream then its LayerNorm (kernels' ResidualLayerNorm): x += bias + residual,
  // out = LayerNorm(x); bias_add.forward then forward, in one pass where the backend can.
  void (*residual_forward)(OpContext&, int rows, int cols, float* x, const float* bias, const float* residual,
                           const float* gamma, const float* beta, float* out, float* mean, float* rstd);
};

// The attention's layout moves and its causal softmax (the products are LinearOps::gemm_batched).
struct AttentionOps {
  void (*heads_from_rows)(OpContext&, int batch, int seq, int heads, int head_dim, const float* rows, int64_t ld,
                          float* out);
  void (*rows_from_heads)(OpContext&, int batch, int seq, int heads, int head_dim, const float* in, float* rows,
                          int64_t ld);
  void (*causal_softmax)(OpContext&, int matrices, int seq, float* scores);
  void (*causal_softmax_backward)(OpContext&, int matrices, int seq, const float* p, float* dp);
};

struct EmbeddingOps {
  void (*forward)(OpContext&, int batch, int seq, int cols, const float* tokens, const float* wte, const float* wpe,
                  float* out);
  void (*backward)(OpContext&, int batch, int seq, int cols, int vocab, const float* tokens, const float* dout,
                   float* dwte, float* dwpe, bool accumulate);
};

// A linear layer's GEMM with what follows it, one call where the backend can fuse them (cuda:
// cuBLASLt's epilogues, cuda_plan.h's PlanFusedForward and PlanFusedWeightGrad; otherwise, and
// on cpu, the unfused ops in order, ComposedLinearForward and ComposedLinearWeightGrad):
//   forward: z = x[rows x in] · w[out x in]ᵀ + bias, out = act(z) (+ residual): gemm then
//     bias_activation.forward;
//   weight_grad: dw[out x in] (+)= dzᵀ · x, dbias (+)= Σ_rows dz: gemm then
//     bias_activation.bias_grad (accumulating into both when `accumulate`);
//   input_grad: d[rows x in] = act'(pre) ⊙ (dz[rows x out] · w), the gradient of the activation's
//     input before the layer (pre, [rows x in]): gemm then bias_activation.backward;
//   forward_bias: y = x · wᵀ + bias (+ residual), a layer with no activation: gemm then
//     bias_add.forward.
struct FusedLinearOps {
  void (*forward)(OpContext&, kernels::Activation act, int rows, int out_features, int in_features, const float* x,
                  const float* w, const float* bias, const float* residual, float* z, float* out);
  void (*input_grad)(OpContext&, kernels::Activation act, int rows, int out_features, int in_features, const float* dz,
                     const float* w, const float* pre, float* d);
  void (*forward_bias)(OpContext&, int rows, int out_features, int in_features, const float* x, const float* w,
                       const float* bias, const float* residual, float* y);
  void (*weight_grad)(OpContext&, int rows, int out_features, int in_features, const float* dz, const float* x,
                      float* dw, float* dbias, bool accumulate);
};

// Writes dy (times loss_scale) and the microbatch's mean loss into *loss (one float of device
// memory) without waiting for it: the runtime reads a step's losses back once.
struct LossOps {
  void (*forward)(OpContext&, kernels::LossKind kind, int rows, int cols, const float* y, const float* targets,
                  float* dy, float* loss, float loss_scale);
};

// The updates write the next weights into w_out (which may be w_in) and consume their gradient.
struct OptimizerOps {
  void (*sgd_momentum)(OpContext&, int64_t n, const float* w_in, float* w_out, float* velocity, float* grad,
                       float grad_scale, float lr, float momentum);
  void (*adam)(OpContext&, int64_t n, const float* w_in, float* w_out, float* m, float* v, float* grad,
               float grad_scale, const kernels::AdamParams& params);
};

// One backend's ops of every layer kind: what Device::ops() hands out.
struct LayerOps {
  LinearOps linear;
  BiasActivationOps bias_activation;
  FusedLinearOps fused_linear;
  BiasAddOps bias_add;
  LayerNormOps layer_norm;
  AttentionOps attention;
  EmbeddingOps embedding;
  LossOps loss;
  OptimizerOps optimizer;
};

// A row of the table: a layer kind and its ops on each backend.
template <typename Ops>
struct LayerRow {
  const char* name;
  Ops cpu;
  Ops cuda;  // all null in a build without the cuda backend
};

struct LayerTableRows {
  LayerRow<LinearOps> linear;
  LayerRow<BiasActivationOps> bias_activation;
  LayerRow<FusedLinearOps> fused_linear;
  LayerRow<BiasAddOps> bias_add;
  LayerRow<LayerNormOps> layer_norm;
  LayerRow<AttentionOps> attention;
  LayerRow<EmbeddingOps> embedding;
  LayerRow<LossOps> loss;
  LayerRow<OptimizerOps> optimizer;
};

const LayerTableRows& LayerTable();

enum class OpBackend { kCpu, kCuda };
// A backend's column of the table.
const LayerOps& LayerOpsFor(OpBackend backend);

// What the table registers per kind: how many ops the kind has, and how many of them each
// backend leaves null (a complete backend leaves none).
struct LayerKindInfo {
  std::string name;
  int ops = 0;
  int missing_cpu = 0;
  int missing_cuda = 0;
};
std::vector<LayerKindInfo> LayerKinds();

// Each backend's column, defined in its own files (cpu_layer_ops.cpp; in the cuda library
// cuda_layer_ops.cpp and cuda_linear_ops.cpp) and read into the rows by LayerTable().
LayerOps CpuLayerOps();
LayerOps CudaLayerOps();

// FusedLinearOps' math as the unfused ops of `ops` compute it, in order: the cpu column's
// fused_linear, and the cuda column's where cuBLASLt cannot fuse.
void ComposedLinearForward(const LayerOps& ops, OpContext& cx, kernels::Activation act, int rows, int out_features,
                           int in_features, const float* x, const float* w, const float* bias, const float* residual,
                           float* z, float* out);
void ComposedLinearWeightGrad(const LayerOps& ops, OpContext& cx, int rows, int out_features, int in_features,
                              const float* dz, const float* x, float* dw, float* dbias, bool accumulate);
void ComposedLinearInputGrad(const LayerOps& ops, OpContext& cx, kernels::Activation act, int rows, int out_features,
                             int in_features, const float* dz, const float* w, const float* pre, float* d);
void ComposedLinearBias(const LayerOps& ops, OpContext& cx, int rows, int out_features, int in_features,
                        const float* x, const float* w, const float* bias, const float* residual, float* y);

}  // namespace stagecraft::exec
