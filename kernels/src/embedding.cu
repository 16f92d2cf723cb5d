// CUDA kernels and launchers for the token + position embeddings (embedding.h) and their weight
// gradients. The forward is one thread per output element. The gradients are scatters (a token
// may appear many times in a microbatch) done without atomics, so they repeat bit for bit and
// match the host loop, which adds the positions in order (b, t):
//   dwte: each thread owns one column of a slice of the vocabulary and scans every position in
//         order, adding those whose token falls in its slice; the slices only spread the work
//         (each element has one owner and one order whatever their count);
//   dwpe: one thread per (t, column), summing over the batch in order.
#include "stagecraft/kernels/embedding.h"

#include <cmath>

#include "launch.cuh"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::kernels {
namespace {

// Threads the dwte scatter aims for (columns × vocabulary slices): enough to keep a GPU's SMs
// busy, while each thread still scans every position, so not many more.
constexpr int64_t kTokenGradThreads = int64_t{1} << 16;

// embedding.h's EmbeddingRow, one column per thread: wte[token] + wpe[t], the same sum.
__global__ void EmbeddingKernel(int64_t n, int seq, int cols, const float* tokens, const float* wte, const float* wpe,
                                float* out) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const int64_t row = i / cols;
    const int c = static_cast<int>(i % cols);
    const int t = static_cast<int>(row % seq);
    const int64_t token = static_cast<int64_t>(tokens[row]);
    out[i] = wte[token * cols + c] + wpe[static_cast<int64_t>(t) * cols + c];
  }
}

// Thread (slice, c) owns dwte[v][c] for v in its slice [slice·per_slice, +per_slice) ∩ [0, vocab).
__global__ void EmbeddingTokenGradKernel(int64_t n, int64_t positions, int cols, int vocab, int per_slice,
                                         const float* tokens, const float* dout, float* dwte, bool accumulate) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const int c = static_cast<int>(i % cols);
    const int64_t first = (i / cols) * per_slice;
    const int64_t last = first + per_slice < vocab ? first + per_slice : vocab;  // exclusive
    if (!accumulate) {
      for (int64_t v = first; v < last; ++v) dwte[v * cols + c] = 0.0f;
    }
    for (int64_t row = 0; row < positions; ++row) {
      // The host's integer conversion (toward zero); a NaN or an id outside [0, vocab) adds nothing
      // rather than writing out of bounds.
      const float id = truncf(tokens[row]);
      if (!(id >= 0.0f && id < static_cast<float>(vocab))) continue;
      const int64_t v = static_cast<int64_t>(id);
      if (v < first || v >= last) continue;
      dwte[v * cols + c] += dout[row * cols + c];
    }
  }
}

__global__ void EmbeddingPositionGradKernel(int64_t n, int batch, int seq, int cols, const float* dout, float* dwpe,
                                            bool accumulate) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const int64_t t = i / cols;
    const int c = static_cast<int>(i % cols);
    float sum = accumulate ? dwpe[i] : 0.0f;
    for (int b = 0; b < batch; ++b) sum += dout[(static_cast<int64_t>(b) * seq + t) * cols + c];
    dwpe[i] = sum;
  }
}

}  // namespace

void LaunchEmbedding(int batch, int seq, int cols, const float* tokens, const float* wte, const float* wpe, float* out,
                     cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchEmbedding";
  RequirePositive(kLauncher, "batch", batch);
  RequirePositive(kLauncher, "seq", seq);
  RequirePositive(kLauncher, "cols", cols);
  RequireDevicePointer(kLauncher, "tokens", tokens);
  RequireDevicePointer(kLauncher, "wte", wte);
  RequireDevicePointer(kLauncher, "wpe", wpe);
  RequireDevicePointer(kLauncher, "out", out);
  const int64_t n = static_cast<int64_t>(batch) * seq * cols;
  EmbeddingKernel<<<BlocksFor(n), kBlockSize, 0, stream>>>(n, seq, cols, tokens, wte, wpe, out);
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchEmbeddingBackward(int batch, int seq, int cols, int vocab, const float* tokens, const float* dout,
                             float* dwte, float* dwpe, bool accumulate, cudaStream_t stream) {
  constexpr const char* kLauncher = "LaunchEmbeddingBackward";
  RequirePositive(kLauncher, "batch", batch);
  RequirePositive(kLauncher, "seq", seq);
  RequirePositive(kLauncher, "cols", cols);
  RequirePositive(kLauncher, "vocab", vocab);
  RequireDevicePointer(kLauncher, "tokens", tokens);
  RequireDevicePointer(kLauncher, "dout", dout);
  RequireDevicePointer(kLauncher, "dwte", dwte);
  RequireDevicePointer(kLauncher, "dwpe", dwpe);
  // As many vocabulary slices as fill kTokenGradThreads with `cols` threads each (at least one,
  // at most one token each), then as few as cover the vocabulary at that slice size.
  const int64_t wanted = std::clamp<int64_t>((kTokenGradThreads + cols - 1) / cols, 1, vocab);
  const int64_t per_slice = (vocab + wanted - 1) / wanted;
  const int64_t slices = (vocab + per_slice - 1) / per_slice;
  const int64_t token_threads = slices * cols;
  const int64_t positions = static_cast<int64_t>(batch) * seq;
  EmbeddingTokenGradKernel<<<BlocksFor(token_threads), kBlockSize, 0, stream>>>(
      token_threads, positions, cols, vocab, static_cast<int>(per_slice), tokens, dout, dwte, accumulate);
  SC_CUDA_CHECK(cudaGetLastError());
  const int64_t position_threads = static_cast<int64_t>(seq) * cols;
  EmbeddingPositionGradKernel<<<BlocksFor(position_threads), kBlockSize, 0, stream>>>(position_threads, batch, seq,
                                                                                      cols, dout, dwpe, accumulate);
  SC_CUDA_CHECK(cudaGetLastError());
}

void PreloadEmbeddingKernels() {
  PreloadKernel(EmbeddingKernel);
  PreloadKernel(EmbeddingTokenGradKernel);
  PreloadKernel(EmbeddingPositionGradKernel);
}

}  // namespace stagecraft::kernels
