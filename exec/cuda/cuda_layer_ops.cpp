// The cuda backend's layer ops (layer_ops.h) other than the matrix products
// (cuda_linear_ops.cpp): the kernels/ launchers on the compute stream, each op then telling
// what it wrote (CudaOpContext::Wrote), and the optimizers refreshing the 16-bit copy of the
// weights they wrote.
#include "cuda_parts.h"
#include "stagecraft/exec/layer_ops.h"
#include "stagecraft/kernels/cuda.h"

namespace stagecraft::exec {
namespace {

CudaOpContext& Cuda(OpContext& context) { return static_cast<CudaOpContext&>(context); }

void BiasActivationForward(OpContext& o, kernels::Activation act, int rows, int cols, float* z, const float* bias,
                           const float* residual, float* out) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchBiasActivation(act, rows, cols, z, bias, residual, out, cx.stream());
  cx.Wrote({{z, int64_t{rows} * cols}, {out, int64_t{rows} * cols}});
}
void ActivationBackward(OpContext& o, kernels::Activation act, int64_t n, const float* dout, const float* z,
                        float* dz) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchActivationBackward(act, n, dout, z, dz, cx.stream());
  cx.Wrote(dz, n);
}
void BiasGrad(OpContext& o, int rows, int cols, const float* dz, float* bias_grad, bool accumulate) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchBiasGrad(rows, cols, dz, bias_grad, accumulate,
                          cx.FloatScratch(kernels::BiasGradScratchFloats(rows, cols)), cx.stream());
  cx.Wrote(bias_grad, cols);
}

void BiasAddForward(OpContext& o, int rows, int cols, float* x, const float* bias, const float* residual) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchBiasAdd(rows, cols, x, bias, residual, cx.stream());
  cx.Wrote(x, int64_t{rows} * cols);
}

void LayerNormForward(OpContext& o, int rows, int cols, const float* x, const float* gamma, const float* beta,
                      float* out, float* mean, float* rstd) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchLayerNorm(rows, cols, x, gamma, beta, out, mean, rstd, cx.stream());
  cx.Wrote({{out, int64_t{rows} * cols}, {mean, rows}, {rstd, rows}});
}
void LayerNormBackwardInput(OpContext& o, int rows, int cols, const float* dout, const float* x, const float* gamma,
                            const float* mean, const float* rstd, float* dx, bool accumulate) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchLayerNormBackwardInput(rows, cols, dout, x, gamma, mean, rstd, dx, accumulate, cx.stream());
  cx.Wrote(dx, int64_t{rows} * cols);
}
void LayerNormBackwardWeight(OpContext& o, int rows, int cols, const float* dout, const float* x, const float* mean,
                             const float* rstd, float* dgamma, float* dbeta, bool accumulate) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchLayerNormBackwardWeight(rows, cols, dout, x, mean, rstd, dgamma, dbeta, accumulate,
                                         cx.FloatScratch(kernels::LayerNormBackwardWeightScratchFloats(rows, cols)),
                                         cx.stream());
  cx.Wrote({{dgamma, cols}, {dbeta, cols}});
}

void ResidualLayerNorm(OpContext& o, int rows, int cols, float* x, const float* bias, const float* residual,
                       const float* gamma, const float* beta, float* out, float* mean, float* rstd) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchResidualLayerNorm(rows, cols, x, bias, residual, gamma, beta, out, mean, rstd, cx.stream());
  cx.Wrote({{x, int64_t{rows} * cols}, {out, int64_t{rows} * cols}, {mean, rows}, {rstd, rows}});
}

void HeadsFromRows(OpContext& o, int batch, int seq, int heads, int head_dim, const float* rows, int64_t ld,
                   float* out) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchHeadsFromRows(batch, seq, heads, head_dim, rows, ld, out, cx.stream());
  cx.Wrote(out, int64_t{batch} * seq * heads * head_dim);
}
void RowsFromHeads(OpContext& o, int batch, int seq, int heads, int head_dim, const float* in, float* rows,
                   int64_t ld) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchRowsFromHeads(batch, seq, heads, head_dim, in, rows, ld, cx.stream());
  cx.Wrote(rows, (int64_t{batch} * seq - 1) * ld + int64_t{heads} * head_dim);
}
void CausalSoftmax(OpContext& o, int matrices, int seq, float* scores) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchCausalSoftmax(matrices, seq, scores, cx.stream());
  cx.Wrote(scores, int64_t{matrices} * seq * seq);
}
void CausalSoftmaxBackward(OpContext& o, int matrices, int seq, const float* p, float* dp) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchCausalSoftmaxBackward(matrices, seq, p, dp, cx.stream());
  cx.Wrote(dp, int64_t{matrices} * seq * seq);
}

void EmbeddingForward(OpContext& o, int batch, int seq, int cols, const float* tokens, const float* wte,
                      const float* wpe, float* out) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchEmbedding(batch, seq, cols, tokens, wte, wpe, out, cx.stream());
  cx.Wrote(out, int64_t{batch} * seq * cols);
}
void EmbeddingBackward(OpContext& o, int batch, int seq, int cols, int vocab, const float* tokens, const float* dout,
                       float* dwte, float* dwpe, bool accumulate) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchEmbeddingBackward(batch, seq, cols, vocab, tokens, dout, dwte, dwpe, accumulate, cx.stream());
  cx.Wrote({{dwte, int64_t{vocab} * cols}, {dwpe, int64_t{seq} * cols}});
}

void LossForward(OpContext& o, kernels::LossKind kind, int rows, int cols, const float* y, const float* targets,
                 float* dy, float* loss, float loss_scale) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchLoss(kind, rows, cols, y, targets, dy, loss, loss_scale,
                      cx.FloatScratch(kernels::LossScratchFloats(rows)), cx.stream());
  cx.Wrote({{dy, int64_t{rows} * cols}, {loss, 1}});
}

// The updates write the next weights: their 16-bit copy is refreshed right after (made on the
// buffer's first update), so the GEMMs that read them never round them again.
void SgdMomentum(OpContext& o, int64_t n, const float* w_in, float* w_out, float* velocity, float* grad,
                 float grad_scale, float lr, float momentum) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchSgdMomentum(n, w_in, w_out, velocity, grad, grad_scale, lr, momentum, cx.stream());
  cx.Wrote({{velocity, n}, {grad, n}});
  cx.UpdatedWeights(w_out, n);
}
void Adam(OpContext& o, int64_t n, const float* w_in, float* w_out, float* m, float* v, float* grad, float grad_scale,
          const kernels::AdamParams& params) {
  CudaOpContext& cx = Cuda(o);
  kernels::LaunchAdam(n, w_in, w_out, m, v, grad, grad_scale, params, cx.stream());
  cx.Wrote({{m, n}, {v, n}, {grad, n}});
  cx.UpdatedWeights(w_out, n);
}

}  // namespace

LayerOps CudaLayerOps() {
  return LayerOps{
      .linear = CudaLinearOps(),
      .bias_activation = {&BiasActivationForward, &ActivationBackward, &BiasGrad},
      .fused_linear = CudaFusedLinearOps(),
      .bias_add = {&BiasAddForward},
      .layer_norm = {&LayerNormForward, &LayerNormBackwardInput, &LayerNormBackwardWeight, &ResidualLayerNorm},
      .attention = {&HeadsFromRows, &RowsFromHeads, &CausalSoftmax, &CausalSoftmaxBackward},
      .embedding = {&EmbeddingForward, &EmbeddingBackward},
      .loss = {&LossForward},
      .optimizer = {&SgdMomentum, &Adam},
  };
}

}  // namespace stagecraft::exec
