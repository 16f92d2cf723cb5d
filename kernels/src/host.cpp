// Host loops over the SC_HD kernels math (see host.h), written so the compiler vectorizes them:
// rows times contiguous columns (no modulo per element), no calls in the inner loops, and on
// x86-64 one clone per vector width (AVX-512, AVX2 + FMA, SSE2) picked at load time.
#include "stagecraft/kernels/host.h"

#include <algorithm>

#include "stagecraft/kernels/loss.h"
#include "vector_clones.h"

namespace stagecraft::kernels {

namespace {

// The loops, inlined into one cloned function per activation below.
template <typename Act>
[[gnu::always_inline]] inline void BiasActivationRows(Act act, int rows, int cols, float* z, const float* bias,
                                                      const float* residual, float* out) {
  for (int r = 0; r < rows; ++r) {
    const int64_t at = static_cast<int64_t>(r) * cols;
    float* __restrict zr = z + at;
    float* __restrict out_r = out + at;
    if (residual != nullptr) {
      const float* __restrict res_r = residual + at;
      for (int c = 0; c < cols; ++c) {
        const float zi = zr[c] + bias[c];
        zr[c] = zi;
        out_r[c] = act(zi) + res_r[c];
      }
    } else {
      for (int c = 0; c < cols; ++c) {
        const float zi = zr[c] + bias[c];
        zr[c] = zi;
        out_r[c] = act(zi);
      }
    }
  }
}

template <typename Act>
[[gnu::always_inline]] inline void ActivationBackwardLoop(Act act, int64_t n, const float* dout, const float* z,
                                                          float* dz) {
  for (int64_t i = 0; i < n; ++i) dz[i] = dout[i] * act.Grad(z[i]);
}

SC_VECTOR_CLONES
void BiasGeluRows(int rows, int cols, float* z, const float* bias, const float* residual, float* out) {
  BiasActivationRows(GeluOp{}, rows, cols, z, bias, residual, out);
}
SC_VECTOR_CLONES
void BiasReluRows(int rows, int cols, float* z, const float* bias, const float* residual, float* out) {
  BiasActivationRows(ReluOp{}, rows, cols, z, bias, residual, out);
}
SC_VECTOR_CLONES
void GeluBackwardLoop(int64_t n, const float* dout, const float* z, float* dz) {
  ActivationBackwardLoop(GeluOp{}, n, dout, z, dz);
}
SC_VECTOR_CLONES
void ReluBackwardLoop(int64_t n, const float* dout, const float* z, float* dz) {
  ActivationBackwardLoop(ReluOp{}, n, dout, z, dz);
}

}  // namespace

void BiasActivation(Activation act, int rows, int cols, float* z, const float* bias, const float* residual,
                    float* out) {
  (act == Activation::kRelu ? BiasReluRows : BiasGeluRows)(rows, cols, z, bias, residual, out);
}

void ActivationBackward(Activation act, int64_t n, const float* dout, const float* z, float* dz) {
  (act == Activation::kRelu ? ReluBackwardLoop : GeluBackwardLoop)(n, dout, z, dz);
}

// Row by row into a block of column sums, each column summed over the rows in order and then
// added to (or written into) bias_grad, as BiasGradAt does on a device.
SC_VECTOR_CLONES
void BiasGrad(int rows, int cols, const float* dz, float* bias_grad, bool accumulate) {
  constexpr int kBlock = 256;
  for (int c0 = 0; c0 < cols; c0 += kBlock) {
    const int width = std::min(kBlock, cols - c0);
    float sum[kBlock] = {};
    for (int r = 0; r < rows; ++r) {
      const float* __restrict row = dz + static_cast<int64_t>(r) * cols + c0;
      for (int c = 0; c < width; ++c) sum[c] += row[c];
    }
    for (int c = 0; c < width; ++c) bias_grad[c0 + c] = (accumulate ? bias_grad[c0 + c] : 0.0f) + sum[c];
  }
}

SC_VECTOR_CLONES
float Loss(LossKind kind, int rows, int cols, const float* y, const float* targets, float* dy, float loss_scale) {
  float sum = 0.0f;
  if (kind == LossKind::kMse) {
    const float scale = 1.0f / (static_cast<float>(rows) * cols);
    for (int r = 0; r < rows; ++r) {
      const int64_t at = static_cast<int64_t>(r) * cols;
      sum += MseRow(y + at, targets + at, dy + at, cols, scale * loss_scale);
    }
    return sum * scale;
  }
  const float scale = 1.0f / static_cast<float>(rows);
  for (int r = 0; r < rows; ++r) {
    const int64_t at = static_cast<int64_t>(r) * cols;
    sum += CrossEntropyRow(y + at, static_cast<int>(targets[r]), dy + at, cols, scale * loss_scale);
  }
  return sum * scale;
}

// The optimizer loops come in two versions, in place (one weight pointer) and out of place
// (two that must not overlap), each with every pointer __restrict: a loop that allowed w_out to
// be w_in would need run-time overlap checks, which fail in place and leave it scalar. Each
// consumes its gradient (optimizer.h's ConsumeGradient).
namespace {

SC_VECTOR_CLONES
void SgdMomentumInPlace(int64_t n, float* __restrict w, float* __restrict velocity, float* __restrict grad,
                        float grad_scale, float lr, float momentum) {
  for (int64_t i = 0; i < n; ++i) {
    w[i] = SgdMomentumUpdate(w[i], velocity + i, ConsumeGradient(grad + i, grad_scale), lr, momentum);
  }
}
SC_VECTOR_CLONES
void SgdMomentumOutOfPlace(int64_t n, const float* __restrict w_in, float* __restrict w_out,
                           float* __restrict velocity, float* __restrict grad, float grad_scale, float lr,
                           float momentum) {
  for (int64_t i = 0; i < n; ++i) {
    w_out[i] = SgdMomentumUpdate(w_in[i], velocity + i, ConsumeGradient(grad + i, grad_scale), lr, momentum);
  }
}
SC_VECTOR_CLONES
void AdamInPlace(int64_t n, float* __restrict w, float* __restrict m, float* __restrict v, float* __restrict grad,
                 float grad_scale, const AdamParams p) {
  for (int64_t i = 0; i < n; ++i) {
    w[i] = AdamUpdate(w[i], m + i, v + i, ConsumeGradient(grad + i, grad_scale), p);
  }
}
SC_VECTOR_CLONES
void AdamOutOfPlace(int64_t n, const float* __restrict w_in, float* __restrict w_out, float* __restrict m,
                    float* __restrict v, float* __restrict grad, float grad_scale, const AdamParams p) {
  for (int64_t i = 0; i < n; ++i) {
    w_out[i] = AdamUpdate(w_in[i], m + i, v + i, ConsumeGradient(grad + i, grad_scale), p);
  }
}

}  // namespace

void SgdMomentum(int64_t n, const float* w_in, float* w_out, float* velocity, float* grad, float grad_scale, float lr,
                 float momentum) {
  if (w_in == w_out) {
    SgdMomentumInPlace(n, w_out, velocity, grad, grad_scale, lr, momentum);
  } else {
    SgdMomentumOutOfPlace(n, w_in, w_out, velocity, grad, grad_scale, lr, momentum);
  }
}

void Adam(int64_t n, const float* w_in, float* w_out, float* m, float* v, float* grad, float grad_scale,
          const AdamParams& params) {
  if (w_in == w_out) {
    AdamInPlace(n, w_out, m, v, grad, grad_scale, params);
  } else {
    AdamOutOfPlace(n, w_in, w_out, m, v, grad, grad_scale, params);
  }
}

}  // namespace stagecraft::kernels
