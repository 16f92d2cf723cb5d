// CUDA launchers of the kernels/ math, one per host.h function and with the same meaning; all
// pointers are device pointers and the stream comes last. Each launch is asynchronous on `stream`;
// bad shapes throw std::invalid_argument, CUDA errors std::runtime_error (SC_CUDA_CHECK).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "stagecraft/kernels/column_sums.h"
#include "stagecraft/kernels/host.h"
#include "stagecraft/kernels/optimizer.h"

namespace stagecraft::kernels {

// Device memory a launcher works in while its kernels run: at least the floats its
// *ScratchFloats function names (the launcher throws std::invalid_argument otherwise). Its
// kernels are done with it once work queued after them on the same stream starts, so one
// buffer can serve every launch on a stream; the caller keeps it (a device keeps one that grows).
struct ScratchSpan {
  float* data = nullptr;
  int64_t floats = 0;
};

// z += bias, out = act(z) (+ residual). z, out, residual: [rows x cols] row-major; bias: [cols];
// residual may be null.
void LaunchBiasActivation(Activation act, int rows, int cols, float* z, const float* bias, const float* residual,
                          float* out, cudaStream_t stream);
// dz = dout · act'(z), n elements.
void LaunchActivationBackward(Activation act, int64_t n, const float* dout, const float* z, float* dz,
                              cudaStream_t stream);
// bias_grad[c] ← Σ_r dz[r][c], added to what it holds when `accumulate`, else written; the rows
// summed in column_sums.h's two passes (deterministic; not the host loop's order).
inline int64_t BiasGradScratchFloats(int rows, int cols) { return ColumnSumScratchFloats(rows, cols, 1); }
void LaunchBiasGrad(int rows, int cols, const float* dz, float* bias_grad, bool accumulate, ScratchSpan scratch,
                    cudaStream_t stream);
// dy ([rows x cols]) ← gradient of the mean loss; *mean_loss_device (one float) ← the mean loss.
// targets: [rows x cols] for mse, [rows] class indices (stored as float) for cross_entropy; a label
// outside [0, cols) makes that row's dy and the loss NaN instead of reading out of bounds.
// dy is scaled by loss_scale (> 0, finite) as the host Loss() scales it. One block per row.
inline int64_t LossScratchFloats(int rows) { return rows; }
void LaunchLoss(LossKind kind, int rows, int cols, const float* y, const float* targets, float* dy,
                float* mean_loss_device, float loss_scale, ScratchSpan scratch, cudaStream_t stream);
// w_out ← SGD-momentum(w_in, grad · grad_scale), n elements; w_out may be w_in (in place); grad
// is left all zeros (host.h's SgdMomentum).
void LaunchSgdMomentum(int64_t n, const float* w_in, float* w_out, float* velocity, float* grad, float grad_scale,
                       float lr, float momentum, cudaStream_t stream);
// w_out ← Adam(w_in, grad · grad_scale), n elements; w_out may be w_in; params.bias1/bias2 must be > 0;
// grad is left all zeros.
void LaunchAdam(int64_t n, const float* w_in, float* w_out, float* m, float* v, float* grad, float grad_scale,
                const AdamParams& params, cudaStream_t stream);

// The transformer's math (host.h's last block; layernorm.h, attention.h, embedding.h), all
// tensors row-major. Row math (LayerNorm, the causal softmax) runs one warp per row with
// shuffle reductions; sums over rows run in column_sums.h's two passes. No atomics: results
// repeat bit for bit from run to run, and agree with the host loops to rounding.
// x [rows x cols] += bias per column (+ residual [rows x cols]; may be null).
void LaunchBiasAdd(int rows, int cols, float* x, const float* bias, const float* residual, cudaStream_t stream);
// out = LayerNorm(x; gamma, beta) per row; mean, rstd: [rows].
void LaunchLayerNorm(int rows, int cols, const float* x, const float* gamma, const float* beta, float* out,
                     float* mean, float* rstd, cudaStream_t stream);
// host.h's ResidualLayerNorm: x += bias + residual, out = LayerNorm(x); one read of each row up to
// 1024 columns, else LaunchBiasAdd then LaunchLayerNorm.
void LaunchResidualLayerNorm(int rows, int cols, float* x, const float* bias, const float* residual,
                             const float* gamma, const float* beta, float* out, float* mean, float* rstd,
                             cudaStream_t stream);
// dx (+)= the input gradient of each row (added to dx when `accumulate`).
void LaunchLayerNormBackwardInput(int rows, int cols, const float* dout, const float* x, const float* gamma,
                                  const float* mean, const float* rstd, float* dx, bool accumulate,
                                  cudaStream_t stream);
// dgamma (+)= Σ_rows dout·x̂, dbeta (+)= Σ_rows dout, both in column_sums.h's two passes.
inline int64_t LayerNormBackwardWeightScratchFloats(int rows, int cols) {
  return ColumnSumScratchFloats(rows, cols, 2);
}
void LaunchLayerNormBackwardWeight(int rows, int cols, const float* dout, const float* x, const float* mean,
                                   const float* rstd, float* dgamma, float* dbeta, bool accumulate,
                                   ScratchSpan scratch, cudaStream_t stream);
// heads [B, NH, T, hd] ← the rows layout [B·T, ld] (attention.h), ld >= NH·hd; and back.
void LaunchHeadsFromRows(int batch, int seq, int heads, int head_dim, const float* rows, int64_t ld, float* out,
                         cudaStream_t stream);
void LaunchRowsFromHeads(int batch, int seq, int heads, int head_dim, const float* in, float* rows, int64_t ld,
                         cudaStream_t stream);
// `matrices` causal [seq x seq] score matrices, in place: scores → probabilities; and the
// backward, in place on dp (→ the scores' gradient).
void LaunchCausalSoftmax(int matrices, int seq, float* scores, cudaStream_t stream);
void LaunchCausalSoftmaxBackward(int matrices, int seq, const float* p, float* dp, cudaStream_t stream);
// out [B·T x cols] = wte[token] + wpe[t]; tokens [B·T] as floats. The launcher does not know the
// vocabulary: a token id outside [0, vocab) is the caller's to reject (as for the host loop).
void LaunchEmbedding(int batch, int seq, int cols, const float* tokens, const float* wte, const float* wpe, float* out,
                     cudaStream_t stream);
// dwte [vocab x cols], dwpe [seq x cols] (+)= the embeddings' gradients (written over when not
// `accumulate`), the positions added in order (b, t); a token id outside [0, vocab) adds nothing.
void LaunchEmbeddingBackward(int batch, int seq, int cols, int vocab, const float* tokens, const float* dout,
                             float* dwte, float* dwpe, bool accumulate, cudaStream_t stream);

// Module loading (module_loading.cu). CUDA loads a kernel at its first launch by default (lazy
// loading, CUDA 12.2+), and that load may wait for the whole context: with an NCCL kernel
// spinning on another stream for a peer that waits for this rank, it never returns.
inline constexpr const char* kModuleLoadingVariable = "CUDA_MODULE_LOADING";
// Sets CUDA_MODULE_LOADING=EAGER (every kernel loaded with its module, cuBLAS's included) unless
// the environment already names a mode; returns whether it set it. CUDA reads the variable when
// it initializes, so this must run before the process's first CUDA call; it calls setenv, so
// before other threads read the environment where that can be arranged. Idempotent.
bool PreferEagerModuleLoading();
enum class ModuleLoading { kEager, kLazy, kUnknown };
// The loading mode the CUDA driver applies in this process (driver's cuModuleGetLoadingMode,
// CUDA 12.5+ runtimes; kUnknown where it cannot be asked).
ModuleLoading ModuleLoadingInForce();
// Says once on stderr when PreferEagerModuleLoading set the variable but CUDA loads lazily all the
// same (something initialized CUDA before it); a mode the user chose is left unremarked.
void WarnIfEagerLoadingDidNotTakeHold();
// Loads the kernels of every launcher in this header, now, on the current device: none of them
// then loads at its first launch, whatever the loading mode (cuBLAS's kernels are loaded up
// front only by CUDA_MODULE_LOADING=EAGER). Throws SC_CUDA_CHECK's error when the build has no
// code the GPU can run (cudaErrorNoKernelImageForDevice: see CMAKE_CUDA_ARCHITECTURES), so a
// device fails when it is made rather than at its first launch.
void PreloadKernels();

// dst[i] = value, n elements.
void LaunchFill(int64_t n, float value, float* dst, cudaStream_t stream);
// The 16-bit formats a GEMM may read: bf16 (__nv_bfloat16) or fp16 (__half).
enum class HalfFormat { kBf16, kFp16 };
// dst[i] = src[i] rounded to nearest even in `format`, n elements; dst holds n 16-bit values.
void LaunchToHalf(HalfFormat format, int64_t n, const float* src, void* dst, cudaStream_t stream);

}  // namespace stagecraft::kernels
