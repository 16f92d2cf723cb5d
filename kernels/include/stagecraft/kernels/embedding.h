// The first stage's token and position embeddings, as in GPT-2: for token (b, t) with id k,
//   out[b, t, :] = wte[k, :] + wpe[t, :]
// and the weight gradients dwte[k, :] += dout[b, t, :], dwpe[t, :] += dout[b, t, :]. Token ids
// are stored as floats (exact below 2²⁴), as the loss's class labels are; an id outside
// [0, vocab) is the caller's to reject before it gets here.
#pragma once

#include <cstdint>

#include "stagecraft/kernels/hd.h"

namespace stagecraft::kernels {

SC_HD inline void EmbeddingRow(int token, int t, int cols, const float* wte, const float* wpe, float* out) {
  const float* e = wte + static_cast<int64_t>(token) * cols;
  const float* p = wpe + static_cast<int64_t>(t) * cols;
  for (int c = 0; c < cols; ++c) out[c] = e[c] + p[c];
}

}  // namespace stagecraft::kernels
