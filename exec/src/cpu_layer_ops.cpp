// The cpu backend's layer ops (layer_ops.h): OpenBLAS single-threaded SGEMM and the kernels/
// host loops. Every op runs to completion before it returns; the context holds nothing.
#include <cblas.h>

#include <climits>

#include "stagecraft/base/check.h"
#include "stagecraft/exec/layer_ops.h"

namespace stagecraft::exec {
namespace {

void Gemm(OpContext&, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b,
          float beta, float* c) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}
void GemmBatched(OpContext& cx, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                 int64_t stride_a, const float* b, int64_t stride_b, float beta, float* c, int64_t stride_c,
                 int batch) {
  for (int i = 0; i < batch; ++i) {
    Gemm(cx, trans_a, trans_b, m, n, k, alpha, a + i * stride_a, b + i * stride_b, beta, c + i * stride_c);
  }
}
void Axpy(OpContext&, int64_t n, float alpha, const float* x, float* y) {
  SC_CHECK(n <= INT_MAX, "axpy over at most INT_MAX floats");
  cblas_saxpy(static_cast<int>(n), alpha, x, 1, y, 1);
}
void Scal(OpContext&, int64_t n, float alpha, float* x) {
  SC_CHECK(n <= INT_MAX, "scal over at most INT_MAX floats");
  cblas_sscal(static_cast<int>(n), alpha, x, 1);
}

void Loss(OpContext&, kernels::LossKind kind, int rows, int cols, const float* y, const float* targets, float* dy,
          float* loss, float loss_scale) {
  *loss = kernels::Loss(kind, rows, cols, y, targets, dy, loss_scale);
}

// The kernels/ host loops whose arguments are the op's own, context dropped.
template <auto kKernel>
struct Host;
template <typename... A, void (*kKernel)(A...)>
struct Host<kKernel> {
  static void Run(OpContext&, A... args) { kKernel(args...); }
};

// The cpu column fuses nothing: the unfused ops of its own column.
const LayerOps& Own() {
  static const LayerOps ops = CpuLayerOps();
  return ops;
}
void FusedForward(OpContext& cx, kernels::Activation act, int rows, int out_features, int in_features, const float* x,
                  const float* w, const float* bias, const float* residual, float* z, float* out) {
  ComposedLinearForward(Own(), cx, act, rows, out_features, in_features, x, w, bias, residual, z, out);
}
void FusedWeightGrad(OpContext& cx, int rows, int out_features, int in_features, const float* dz, const float* x,
                     float* dw, float* dbias, bool accumulate) {
  ComposedLinearWeightGrad(Own(), cx, rows, out_features, in_features, dz, x, dw, dbias, accumulate);
}
void FusedInputGrad(OpContext& cx, kernels::Activation act, int rows, int out_features, int in_features, const float* dz,
                    const float* w, const float* pre, float* d) {
  ComposedLinearInputGrad(Own(), cx, act, rows, out_features, in_features, dz, w, pre, d);
}
void FusedBias(OpContext& cx, int rows, int out_features, int in_features, const float* x, const float* w,
               const float* bias, const float* residual, float* y) {
  ComposedLinearBias(Own(), cx, rows, out_features, in_features, x, w, bias, residual, y);
}

}  // namespace

LayerOps CpuLayerOps() {
  return LayerOps{
      .linear = {&Gemm, &GemmBatched, &Axpy, &Scal},
      .bias_activation = {&Host<&kernels::BiasActivation>::Run, &Host<&kernels::ActivationBackward>::Run,
                          &Host<&kernels::BiasGrad>::Run},
      .fused_linear = {&FusedForward, &FusedInputGrad, &FusedBias, &FusedWeightGrad},
      .bias_add = {&Host<&kernels::BiasAdd>::Run},
      .layer_norm = {&Host<&kernels::LayerNorm>::Run, &Host<&kernels::LayerNormBackwardInput>::Run,
                     &Host<&kernels::LayerNormBackwardWeight>::Run, &Host<&kernels::ResidualLayerNorm>::Run},
      .attention = {&Host<&kernels::HeadsFromRows>::Run, &Host<&kernels::RowsFromHeads>::Run,
                    &Host<&kernels::CausalSoftmax>::Run, &Host<&kernels::CausalSoftmaxBackward>::Run},
      .embedding = {&Host<&kernels::Embedding>::Run, &Host<&kernels::EmbeddingBackward>::Run},
      .loss = {&Loss},
      .optimizer = {&Host<&kernels::SgdMomentum>::Run, &Host<&kernels::Adam>::Run},
  };
}

}  // namespace stagecraft::exec
