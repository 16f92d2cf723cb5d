// Host loops over the transformer's SC_HD math (layernorm.h, attention.h, embedding.h; see
// host.h), written as host.cpp's are: rows times contiguous columns, nothing called in the
// inner loops, one clone per vector width.
#include <algorithm>
#include <cstring>

#include "stagecraft/kernels/attention.h"
#include "stagecraft/kernels/embedding.h"
#include "stagecraft/kernels/host.h"
#include "stagecraft/kernels/layernorm.h"
#include "vector_clones.h"

namespace stagecraft::kernels {

SC_VECTOR_CLONES
void ResidualLayerNorm(int rows, int cols, float* x, const float* bias, const float* residual, const float* gamma,
                       const float* beta, float* out, float* mean, float* rstd) {
  BiasAdd(rows, cols, x, bias, residual);
  LayerNorm(rows, cols, x, gamma, beta, out, mean, rstd);
}

void BiasAdd(int rows, int cols, float* x, const float* bias, const float* residual) {
  for (int r = 0; r < rows; ++r) {
    const int64_t at = static_cast<int64_t>(r) * cols;
    float* __restrict xr = x + at;
    if (residual != nullptr) {
      const float* __restrict res = residual + at;
      for (int c = 0; c < cols; ++c) xr[c] += bias[c] + res[c];
    } else {
      for (int c = 0; c < cols; ++c) xr[c] += bias[c];
    }
  }
}

SC_VECTOR_CLONES
void LayerNorm(int rows, int cols, const float* x, const float* gamma, const float* beta, float* out, float* mean,
               float* rstd) {
  for (int r = 0; r < rows; ++r) {
    const int64_t at = static_cast<int64_t>(r) * cols;
    LayerNormRow(x + at, gamma, beta, out + at, cols, mean + r, rstd + r);
  }
}

SC_VECTOR_CLONES
void LayerNormBackwardInput(int rows, int cols, const float* dout, const float* x, const float* gamma,
                            const float* mean, const float* rstd, float* dx, bool accumulate) {
  for (int r = 0; r < rows; ++r) {
    const int64_t at = static_cast<int64_t>(r) * cols;
    LayerNormBackwardInputRow(dout + at, x + at, gamma, mean[r], rstd[r], dx + at, cols, accumulate);
  }
}

// Column blocks summed over the rows in order, as BiasGrad does.
SC_VECTOR_CLONES
void LayerNormBackwardWeight(int rows, int cols, const float* dout, const float* x, const float* mean,
                             const float* rstd, float* dgamma, float* dbeta, bool accumulate) {
  constexpr int kBlock = 256;
  for (int c0 = 0; c0 < cols; c0 += kBlock) {
    const int width = std::min(kBlock, cols - c0);
    float sum_g[kBlock] = {};
    float sum_b[kBlock] = {};
    for (int r = 0; r < rows; ++r) {
      const int64_t at = static_cast<int64_t>(r) * cols + c0;
      const float* __restrict d = dout + at;
      const float* __restrict xr = x + at;
      const float mu = mean[r], rs = rstd[r];
      for (int c = 0; c < width; ++c) {
        sum_g[c] += d[c] * ((xr[c] - mu) * rs);
        sum_b[c] += d[c];
      }
    }
    for (int c = 0; c < width; ++c) {
      dgamma[c0 + c] = (accumulate ? dgamma[c0 + c] : 0.0f) + sum_g[c];
      dbeta[c0 + c] = (accumulate ? dbeta[c0 + c] : 0.0f) + sum_b[c];
    }
  }
}

void HeadsFromRows(int batch, int seq, int heads, int head_dim, const float* rows, int64_t ld, float* out) {
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      for (int t = 0; t < seq; ++t) {
        std::memcpy(out + HeadsOffset(b, t, h, 0, seq, heads, head_dim), rows + RowsOffset(b, t, h, 0, seq, head_dim, ld),
                    sizeof(float) * static_cast<size_t>(head_dim));
      }
    }
  }
}

void RowsFromHeads(int batch, int seq, int heads, int head_dim, const float* in, float* rows, int64_t ld) {
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      for (int t = 0; t < seq; ++t) {
        std::memcpy(rows + RowsOffset(b, t, h, 0, seq, head_dim, ld), in + HeadsOffset(b, t, h, 0, seq, heads, head_dim),
                    sizeof(float) * static_cast<size_t>(head_dim));
      }
    }
  }
}

SC_VECTOR_CLONES
void CausalSoftmax(int matrices, int seq, float* scores) {
  for (int i = 0; i < matrices; ++i) {
    for (int t = 0; t < seq; ++t) CausalSoftmaxRow(scores + (static_cast<int64_t>(i) * seq + t) * seq, t, seq);
  }
}

SC_VECTOR_CLONES
void CausalSoftmaxBackward(int matrices, int seq, const float* p, float* dp) {
  for (int i = 0; i < matrices; ++i) {
    for (int t = 0; t < seq; ++t) {
      const int64_t at = (static_cast<int64_t>(i) * seq + t) * seq;
      CausalSoftmaxBackwardRow(p + at, dp + at, t, seq);
    }
  }
}

SC_VECTOR_CLONES
void Embedding(int batch, int seq, int cols, const float* tokens, const float* wte, const float* wpe, float* out) {
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq; ++t) {
      const int64_t row = static_cast<int64_t>(b) * seq + t;
      EmbeddingRow(static_cast<int>(tokens[row]), t, cols, wte, wpe, out + row * cols);
    }
  }
}

SC_VECTOR_CLONES
void EmbeddingBackward(int batch, int seq, int cols, int vocab, const float* tokens, const float* dout, float* dwte,
                       float* dwpe, bool accumulate) {
  if (!accumulate) {
    std::fill(dwte, dwte + static_cast<int64_t>(vocab) * cols, 0.0f);
    std::fill(dwpe, dwpe + static_cast<int64_t>(seq) * cols, 0.0f);
  }
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq; ++t) {
      const int64_t row = static_cast<int64_t>(b) * seq + t;
      const float* __restrict d = dout + row * cols;
      float* __restrict e = dwte + static_cast<int64_t>(tokens[row]) * cols;
      float* __restrict p = dwpe + static_cast<int64_t>(t) * cols;
      for (int c = 0; c < cols; ++c) {
        e[c] += d[c];
        p[c] += d[c];
      }
    }
  }
}

}  // namespace stagecraft::kernels
