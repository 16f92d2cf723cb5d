// Multi-head latent attention's projections in the GPT stage's kernel list (kernel_lister.h;
// DeepSeek-AI, "DeepSeek-V2", 2024, §2.1; Megatron-LM's MLASelfAttention). Per device of a tensor
// group of T: the queries' down h -> r_q, its RMSNorm and up r_q -> (a/T)·qkd (without a latent
// one projection h -> (a/T)·qkd); the keys' and values' down h -> r_kv + rope (the latent and the
// one rotary key all heads share), its RMSNorm on the r_kv, and up r_kv -> (a/T)·(hd + vd); the
// rotary embedding of the queries' and the shared key's rotary parts, the heads' keys assembled
// from their own part and the shared one. The downs and RMSNorms run whole on every device (their
// input the LayerNorm's all rows, all-gathered with sequence parallelism), so the ups' input
// gradients, partial sums over the heads, are all-reduced over the group before them.
#include <algorithm>
#include <string>

#include "kernel_lister.h"

namespace stagecraft::sim::detail {

void MlaForward(const Lister& l, const Dims& x) {
  const GptKernelShape& g = l.g;
  const double d = l.d(), rows = static_cast<double>(x.rows);
  if (g.q_lora > 0) {
    l.Gemm("q_down", x.rows, g.q_lora, x.h);
    l.Memory("q_norm", rows * static_cast<double>(g.q_lora), 2 * d, 8);
    l.Gemm("q_up", x.rows, x.qp, g.q_lora);
  } else {
    l.Gemm("q", x.rows, x.qp, x.h);
  }
  l.Gemm("kv_down", x.rows, g.kv_lora + g.rope_head_dim, x.h);
  l.Memory("kv_norm", rows * static_cast<double>(g.kv_lora), 2 * d, 8);
  l.Gemm("kv_up", x.rows, x.ap * (x.hd + x.vd), g.kv_lora);
  // Reads the queries and the keys' parts, writes the queries and keys as [b·a, s, qkd].
  l.Memory("mla_rope", rows * static_cast<double>(x.qp), 4 * d, 4);
}

void MlaInputGrad(const Lister& l, const Dims& x) {
  const GptKernelShape& g = l.g;
  const double d = l.d(), rows = static_cast<double>(x.rows);
  l.Memory("mla_rope.dX", rows * static_cast<double>(x.qp), 4 * d, 4);
  l.Gemm("kv_up.dX", x.rows, g.kv_lora, x.ap * (x.hd + x.vd));
  l.Gemm(g.q_lora > 0 ? "q_up.dX" : "q.dX", x.rows, g.q_lora > 0 ? g.q_lora : x.h, x.qp);
  // The latents' gradients are sums over all the heads: over the group's (beside kv_up's dW).
  const double latent = rows * static_cast<double>(g.kv_lora + g.q_lora) * d;
  const size_t before = l.out->size();
  l.Collective("attention.latent.all_reduce", CollectiveKind::kAllReduce, latent);
  if (l.out->size() > before) l.out->back().beside = "kv_up.dW";
  l.Memory("kv_norm.dX", rows * static_cast<double>(g.kv_lora), 4 * d, 10);
  l.Gemm("kv_down.dX", x.rows, x.h, g.kv_lora + g.rope_head_dim);
  if (g.q_lora > 0) {
    l.Memory("q_norm.dX", rows * static_cast<double>(g.q_lora), 4 * d, 10);
    l.Gemm("q_down.dX", x.rows, x.h, g.q_lora);
  } else {
    // The queries' projection is split over the heads: its input gradient leaves the group as
    // a GPT block's QKV's does.
    l.Leave("attention.dX", rows * static_cast<double>(x.h) * d, "q.dW");
  }
}

void MlaWeightGrads(const Lister& w, const Dims& x, const WeightGrad& weight) {
  const GptKernelShape& g = w.g;
  const double d = w.d(), rows = static_cast<double>(x.rows);
  weight("kv_up", x.ap * (x.hd + x.vd), g.kv_lora);
  weight("kv_down", g.kv_lora + g.rope_head_dim, x.h);
  w.Memory("kv_norm.dgamma", rows * static_cast<double>(g.kv_lora), 2 * d, 4);
  if (g.q_lora > 0) {
    weight("q_up", x.qp, g.q_lora);
    weight("q_down", g.q_lora, x.h);
    w.Memory("q_norm.dgamma", rows * static_cast<double>(g.q_lora), 2 * d, 4);
  } else {
    weight("q", x.qp, x.h);
  }
}

}  // namespace stagecraft::sim::detail
