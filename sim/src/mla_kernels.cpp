// Multi-head latent attention's projections in the GPT stage's kernel list (kernel_lister.h;
// DeepSeek-AI, "DeepSeek-V2", 2024, §2.1; Megatron-LM's MLASelfAttention). Per device of a tensor
// group of T: the queries' down h -> r_q, its RMSNorm and up r_q -> (a/T)·qkd (without a latent
// one projection h -> (a/T)·qkd); the keys' and values' down h -> r_kv + rope (the latent and the
// one rotary key all heads share), its RMSNorm on the r_kv, and up r_kv -> (a/T)·(hd + vd); the
// rotary embedding of the queries' and the shared key's rotary parts, the heads' keys assembled
// from their own part and the shared one. The downs and RMSNorms are every device's own copy
// (not split): with sequence parallelism they run on the device's s/T rows and the latents are
// all-gathered into the ups (split by heads), their gradients reduce-scattered back; without it
// every device runs them on all the rows and the latents' gradients, partial sums over the heads
// (the shared rotary key's too), are all-reduced. A query projection without a latent is split by
// heads and takes the LayerNorm's output gathered, as a GPT block's QKV does.
#include <algorithm>
#include <string>

#include "kernel_lister.h"

namespace stagecraft::sim::detail {
namespace {

// The latents' width that enters the heads' region: r_kv + rope, and r_q with a query latent. (The
// downs run on the LayerNorm's rows, x.lnrows: the device's sequence share with sequence
// parallelism.)
int64_t LatentWidth(const GptKernelShape& g) { return g.kv_lora + g.rope_head_dim + g.q_lora; }

}  // namespace

void MlaForward(const Lister& l, const Dims& x) {
  const GptKernelShape& g = l.g;
  const double d = l.d(), rows = static_cast<double>(x.rows);
  const int64_t down = x.lnrows;
  if (g.q_lora > 0) {
    l.Gemm("q_down", down, g.q_lora, x.h);
    l.Memory("q_norm", static_cast<double>(down) * static_cast<double>(g.q_lora), 2 * d, 8);
  } else {
    l.Enter("attention", rows * static_cast<double>(x.h) * d);  // the queries' input
  }
  l.Gemm("kv_down", down, g.kv_lora + g.rope_head_dim, x.h);
  l.Memory("kv_norm", static_cast<double>(down) * static_cast<double>(g.kv_lora), 2 * d, 8);
  l.Enter("attention.latent", rows * static_cast<double>(LatentWidth(g)) * d);
  if (g.q_lora > 0) {
    l.Gemm("q_up", x.rows, x.qp, g.q_lora);
  } else {
    l.Gemm("q", x.rows, x.qp, x.h);
  }
  l.Gemm("kv_up", x.rows, x.ap * (x.hd + x.vd), g.kv_lora);
  // Reads the queries and the keys' parts, writes the queries and keys as [b·a, s, qkd].
  l.Memory("mla_rope", rows * static_cast<double>(x.qp), 4 * d, 4);
}

void MlaInputGrad(const Lister& l, const Dims& x) {
  const GptKernelShape& g = l.g;
  const double d = l.d(), rows = static_cast<double>(x.rows);
  const int64_t down = x.lnrows;
  l.Memory("mla_rope.dX", rows * static_cast<double>(x.qp), 4 * d, 4);
  l.Gemm("kv_up.dX", x.rows, g.kv_lora, x.ap * (x.hd + x.vd));
  l.Gemm(g.q_lora > 0 ? "q_up.dX" : "q.dX", x.rows, g.q_lora > 0 ? g.q_lora : x.h, x.qp);
  // The latents' gradients are sums over all the heads: over the group's (beside kv_up's dW).
  l.Leave("attention.latent.dX", rows * static_cast<double>(LatentWidth(g)) * d, "kv_up.dW");
  l.Memory("kv_norm.dX", static_cast<double>(down) * static_cast<double>(g.kv_lora), 4 * d, 10);
  l.Gemm("kv_down.dX", down, x.h, g.kv_lora + g.rope_head_dim);
  if (g.q_lora > 0) {
    l.Memory("q_norm.dX", static_cast<double>(down) * static_cast<double>(g.q_lora), 4 * d, 10);
    l.Gemm("q_down.dX", down, x.h, g.q_lora);
  } else {
    l.Leave("attention.dX", rows * static_cast<double>(x.h) * d, "q.dW");  // the queries' input gradient
  }
}

void MlaWeightGrads(const Lister& w, const Dims& x, const WeightGrad& weight) {
  const GptKernelShape& g = w.g;
  const double d = w.d(), rows = static_cast<double>(x.rows), down = static_cast<double>(x.lnrows);
  weight("kv_up", x.ap * (x.hd + x.vd), g.kv_lora, rows);
  weight("kv_down", g.kv_lora + g.rope_head_dim, x.h, down);
  w.Memory("kv_norm.dgamma", down * static_cast<double>(g.kv_lora), 2 * d, 4);
  if (g.q_lora > 0) {
    weight("q_up", x.qp, g.q_lora, rows);
    weight("q_down", g.q_lora, x.h, down);
    w.Memory("q_norm.dgamma", down * static_cast<double>(g.q_lora), 2 * d, 4);
  } else {
    weight("q", x.qp, x.h, rows);
  }
}

}  // namespace stagecraft::sim::detail
