// Whole-tensor versions of the kernels/ math for the CPU backend: plain loops over the same
// SC_HD functions the CUDA launchers (cuda.h) run, one element (or row) per iteration.
#pragma once

#include <cstdint>

#include "stagecraft/kernels/activation.h"
#include "stagecraft/kernels/optimizer.h"

namespace stagecraft::kernels {

enum class LossKind { kMse, kCrossEntropy };

// z += bias per column, out = act(z) (+ residual). z, out, residual: [rows x cols] row-major;
// bias: [cols]; residual may be null.
void BiasActivation(Activation act, int rows, int cols, float* z, const float* bias, const float* residual,
                    float* out);
// dz = dout · act'(z), n elements.
void ActivationBackward(Activation act, int64_t n, const float* dout, const float* z, float* dz);
// bias_grad[c] ← Σ_r dz[r][c], added to what bias_grad holds when `accumulate`, else written.
void BiasGrad(int rows, int cols, const float* dz, float* bias_grad, bool accumulate);
// Mean loss of a microbatch and its gradient dy ([rows x cols]) times loss_scale (a power of
// two keeps the scaling exact; see TrainingConfig::loss_scale). targets: [rows x cols] for mse,
// [rows] class indices (stored as float) for cross_entropy.
float Loss(LossKind kind, int rows, int cols, const float* y, const float* targets, float* dy, float loss_scale = 1.0f);
// w_out ← SGD-momentum(w_in, grad · grad_scale), n elements; w_out may be w_in (in place). The
// update consumes its gradient: grad is left all zeros, ready for the next update's backward to
// add into (so no backward writes over a gradient buffer, and none is zeroed apart).
void SgdMomentum(int64_t n, const float* w_in, float* w_out, float* velocity, float* grad, float grad_scale, float lr,
                 float momentum);
// w_out ← Adam(w_in, grad · grad_scale), n elements; w_out may be w_in (in place); grad is left
// all zeros, as SgdMomentum leaves it.
void Adam(int64_t n, const float* w_in, float* w_out, float* m, float* v, float* grad, float grad_scale,
          const AdamParams& params);

// The transformer's math (layernorm.h, attention.h, embedding.h); all tensors row-major.
// x [rows x cols] += bias per column (+ residual [rows x cols]; may be null).
void BiasAdd(int rows, int cols, float* x, const float* bias, const float* residual);
// out = LayerNorm(x; gamma, beta) per row; mean, rstd: [rows].
void LayerNorm(int rows, int cols, const float* x, const float* gamma, const float* beta, float* out, float* mean,
               float* rstd);
// The residual stream then its LayerNorm: x += bias + residual (BiasAdd), out = LayerNorm(x)
// (LayerNorm), x left holding the sum.
void ResidualLayerNorm(int rows, int cols, float* x, const float* bias, const float* residual, const float* gamma,
                       const float* beta, float* out, float* mean, float* rstd);
// dx (+)= the input gradient of each row (added to dx when `accumulate`).
void LayerNormBackwardInput(int rows, int cols, const float* dout, const float* x, const float* gamma,
                            const float* mean, const float* rstd, float* dx, bool accumulate);
// dgamma (+)= Σ_rows dout·x̂, dbeta (+)= Σ_rows dout, each column summed over the rows in order.
void LayerNormBackwardWeight(int rows, int cols, const float* dout, const float* x, const float* mean,
                             const float* rstd, float* dgamma, float* dbeta, bool accumulate);
// heads [B, NH, T, hd] ← the rows layout [B·T, ld] (attention.h); and back.
void HeadsFromRows(int batch, int seq, int heads, int head_dim, const float* rows, int64_t ld, float* out);
void RowsFromHeads(int batch, int seq, int heads, int head_dim, const float* in, float* rows, int64_t ld);
// `matrices` causal [seq x seq] score matrices, in place: scores → probabilities; and the
// backward, in place on dp (→ the scores' gradient).
void CausalSoftmax(int matrices, int seq, float* scores);
void CausalSoftmaxBackward(int matrices, int seq, const float* p, float* dp);
// out [B·T x cols] = wte[token] + wpe[t]; tokens [B·T] as floats.
void Embedding(int batch, int seq, int cols, const float* tokens, const float* wte, const float* wpe, float* out);
// dwte [vocab x cols], dwpe [seq x cols] (+)= the embeddings' gradients (written over when not
// `accumulate`), the positions added in order (b, t).
void EmbeddingBackward(int batch, int seq, int cols, int vocab, const float* tokens, const float* dout, float* dwte,
                       float* dwpe, bool accumulate);

}  // namespace stagecraft::kernels
