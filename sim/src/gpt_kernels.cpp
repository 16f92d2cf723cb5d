// The GPT stage's kernel list (gpt_kernels.h). Bytes count each tensor read and written once
// at the dtype's size (a dropout mask one byte an element); GEMM bytes are the three matrices.
#include "stagecraft/sim/gpt_kernels.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string_view>
#include <utility>

#include "kernel_lister.h"
#include "stagecraft/scenario/transformer_spec.h"

namespace stagecraft::sim {
namespace {

using detail::Dims;
using detail::DimsOf;
using detail::Lister;
using detail::UpWidth;

// A feed-forward of width `fp` over `rows` rows (`prefix` names its kernels): up (and gate),
// the activation, down.
void DenseMlpForward(const Lister& l, const std::string& prefix, double rows, int64_t fp, int64_t batch = 1) {
  const double d = l.d();
  const int64_t m = static_cast<int64_t>(rows);
  l.Gemm(prefix + "fc", m, UpWidth(l.g, fp), l.g.hidden, batch);
  const double elements = rows * static_cast<double>(fp) * batch;
  if (l.g.swiglu) {  // SiLU(gate + b) · (up + b): two f-wide inputs, one output
    l.Memory(prefix + "bias_swiglu", elements, 3 * d, 8);
  } else {
    l.Memory(prefix + "bias_gelu", elements, 2 * d, 10);
  }
  l.Gemm(prefix + "fc2", m, l.g.hidden, fp, batch);
}
void DenseMlpInputGrad(const Lister& l, const std::string& prefix, double rows, int64_t fp, int64_t batch = 1) {
  const double d = l.d();
  const int64_t m = static_cast<int64_t>(rows);
  l.Gemm(prefix + "fc2.dX", m, fp, l.g.hidden, batch);
  const double elements = rows * static_cast<double>(fp) * batch;
  if (l.g.swiglu) {  // reads the output gradient, the gate and the up; writes both their gradients
    l.Memory(prefix + "bias_swiglu.dX", elements, 5 * d, 14);
  } else {
    l.Memory(prefix + "bias_gelu.dX", elements, 3 * d, 12);
  }
  l.Gemm(prefix + "fc.dX", m, l.g.hidden, UpWidth(l.g, fp), batch);
}

// The routed rows on one device, and each local expert's share of them.
struct Routed {
  double rows;          // the device's tokens x top_k x capacity factor
  double per_expert;    // rows over the E·(local experts) experts of the group, x E devices' tokens
};
Routed RoutedOf(const GptKernelShape& g, const Dims& x) {
  const double rows = static_cast<double>(x.lnrows) * g.routed;
  return {rows, std::ceil(rows / static_cast<double>(g.local_experts))};
}

// Megatron's all-to-all dispatcher sorts the chunks it received by local expert (and back):
// GptKernelShape::deepep.
bool SortsChunks(const GptKernelShape& g) { return !g.deepep && g.local_experts > 1; }

void MoeForward(const Lister& l, const Dims& x) {
  const GptKernelShape& g = l.g;
  const double d = l.d(), tokens = static_cast<double>(x.lnrows);
  const Routed r = RoutedOf(g, x);
  l.Gemm("router", x.lnrows, g.experts, x.h);
  l.Memory("router.topk", tokens * static_cast<double>(g.experts), d + 8, 8);  // fp32 softmax, top-k
  l.Memory("permute", r.rows * x.h, 2 * (g.fp8_dispatch ? kFp8ScaledElementBytes : d), 0);
  if (SortsChunks(g)) l.Memory("sort_chunks", r.rows * x.h, 2 * d, 0);
  DenseMlpForward(l, "expert.", r.per_expert, g.expert_ffn, g.local_experts);
  if (SortsChunks(g)) l.Memory("unsort_chunks", r.rows * x.h, 2 * d, 0);
  l.Memory("unpermute", r.rows * x.h, 2 * d, 2);  // weighted by the router's probabilities, summed
  if (g.shared_ffn > 0) {
    const double act = static_cast<double>(x.rows) * x.h * d;
    l.Enter("shared", act);
    DenseMlpForward(l, "shared.", static_cast<double>(x.rows), g.shared_ffn / g.tensor_parallel);
    l.Leave("shared", act);
  }
}

void MoeInputGrad(const Lister& l, const Dims& x) {
  const GptKernelShape& g = l.g;
  const double d = l.d(), tokens = static_cast<double>(x.lnrows);
  const Routed r = RoutedOf(g, x);
  if (g.shared_ffn > 0) {
    const double act = static_cast<double>(x.rows) * x.h * d;
    l.Enter("shared.dX", act);
    DenseMlpInputGrad(l, "shared.", static_cast<double>(x.rows), g.shared_ffn / g.tensor_parallel);
    l.Leave("shared.dX", act, "shared.fc.dW");
  }
  l.Memory("unpermute.dX", r.rows * x.h, 3 * d, 2);  // and the probabilities' gradient
  if (SortsChunks(g)) l.Memory("unsort_chunks.dX", r.rows * x.h, 2 * d, 0);
  DenseMlpInputGrad(l, "expert.", r.per_expert, g.expert_ffn, g.local_experts);
  if (SortsChunks(g)) l.Memory("sort_chunks.dX", r.rows * x.h, 2 * d, 0);
  l.Memory("permute.dX", r.rows * x.h, 2 * d, 1);
  l.Memory("router.topk.dX", tokens * static_cast<double>(g.experts), d + 8, 6);
  l.Gemm("router.dX", x.lnrows, x.h, g.experts);
}

// One fused causal attention kernel (GptKernelShape::flash): its matmuls over the causal half of
// the scores, s queries against s/2 keys on average (within a sliding window,
// CausalKeysPerQuery's), each of the b·a/T heads: two in F (the scores over the keys' width qkd,
// the context over the values' vd), five in I (the scores again, dQ and dK over qkd; dP and dV
// over vd). Timed as the GEMM a fused kernel runs (Dao et al. 2022, FlashAttention's Algorithm 1):
// each thread block holds an output tile of one block of queries (in I of keys) by the head's
// width, at the matmuls' mean width, and reduces over the keys (in I the queries) without
// writing the scores: m = s, n = the mean width, k = the keys, so the per-tile overhead of the
// GEMM model (gemm.k_overhead) is spread over the keys, not charged again per block of them.
// Its memory traffic only its operands and results, q, k, v and o (and in I their gradients and
// o's), s·h/T each by default.
// With context parallelism (GptKernelShape::context_parallel) the keys are the whole sequence's,
// C·s, and the ring that brings them follows the kernel.
void FlashAttention(const Lister& l, const Dims& x, bool backward) {
  const int64_t matmuls = backward ? 5 : 2, widths = backward ? 3 * x.qkd + 2 * x.vd : x.qkd + x.vd;
  const int64_t keys = x.s * l.g.context_parallel;
  const int64_t n = l.g.window > 0
                        ? std::max<int64_t>(std::llround(CausalKeysPerQuery(static_cast<double>(keys),
                                                                            static_cast<double>(l.g.window))),
                                            1)
                        : std::max<int64_t>(keys / 2, 1);
  l.Gemm(backward ? "flash_attention.dX" : "flash_attention", x.s, (widths + matmuls / 2) / matmuls, n,
         x.b * x.ap * matmuls);
  Kernel& k = l.out->back();
  k.flops = 2.0 * static_cast<double>(x.s) * static_cast<double>(n) * static_cast<double>(widths) * x.b * x.ap;
  const double q = static_cast<double>(x.rows) * x.qp * l.d(), o = static_cast<double>(x.rows) * x.hp * l.d();
  k.bytes = (backward ? 4 : 2) * (q + o);
  if (l.g.context_parallel <= 1) return;
  // The keys and values of the whole sequence, and in I their gradients beside them.
  const double bytes = ContextKvBytes(l.g);
  const std::string beside = k.name;
  const auto collective = [&](const char* name, CollectiveKind kind, double b) {
    Kernel c;
    c.name = name;
    c.pass = l.pass;
    c.kind = KernelClass::kCollective;
    c.collective = kind;
    c.bytes = b;
    c.context_group = true;
    if (kind == CollectiveKind::kContextRing) c.beside = beside;
    l.out->push_back(std::move(c));
  };
  if (!l.g.context_all_gather) {
    collective(backward ? "cp_ring.dX" : "cp_ring", CollectiveKind::kContextRing, (backward ? 2 : 1) * bytes);
  } else if (!backward) {
    collective("cp_all_gather", CollectiveKind::kAllGather, bytes);
  } else {
    collective("cp_all_gather.dX", CollectiveKind::kAllGather, bytes);
    collective("cp_reduce_scatter.dX", CollectiveKind::kReduceScatter, bytes);
  }
}

void BlockForward(const Lister& l, const Dims& x, bool moe) {
  const double d = l.d(), act = static_cast<double>(x.rows) * x.h * d, ln = static_cast<double>(x.lnrows) * x.h;
  const double drop = l.g.dropout ? 1 : 0;  // the mask's byte
  l.Memory("ln1", ln, 2 * d, 8);
  const double qkv = static_cast<double>(x.rows) * x.qkvp, heads = static_cast<double>(x.rows) * x.hp;
  if (l.g.mla) {
    detail::MlaForward(l, x);  // its own entry into the tensor-parallel region
  } else {
    l.Enter("attention", act);
    l.Gemm("qkv", x.rows, x.qkvp, x.h);
    if (l.g.bias) l.Memory("qkv.bias", qkv, 2 * d, 1);
    l.Memory("split_heads", qkv, 2 * d, 0);  // q, k, v as [b·a, s, h/a]
  }
  if (l.g.flash) {
    FlashAttention(l, x, false);
  } else {
    l.Gemm("scores", x.s, x.s, x.qkd, x.b * x.ap);
    l.Memory("softmax", x.scores, 2 * d, 5);  // scale, causal mask and softmax, fused
    if (l.g.dropout) l.Memory("attention_dropout", x.scores, 2 * d + drop, 2);
    l.Gemm("context", x.s, x.vd, x.s, x.b * x.ap);
  }
  l.Memory("merge_heads", heads, 2 * d, 0);  // back to [b·s, h]
  l.Gemm("proj", x.rows, x.h, x.hp);
  l.Leave("attention", act);
  l.Memory("bias_dropout_add1", ln, 3 * d + drop, 3);
  l.Memory("ln2", ln, 2 * d, 8);
  if (moe) {
    MoeForward(l, x);
  } else {
    l.Enter("mlp", act);
    DenseMlpForward(l, "", x.rows, x.fp);
    l.Leave("mlp", act);
  }
  l.Memory("bias_dropout_add2", ln, 3 * d + drop, 3);
}

// The attention's own backward, from the context's gradient to q's, k's and v's: the fused
// kernel's, or the unfused one's matmuls and the softmax's and dropout's backward.
void AttentionInputGrad(const Lister& i, const Dims& x) {
  const double d = i.d(), drop = i.g.dropout ? 1 : 0;
  if (i.g.flash) {
    FlashAttention(i, x, true);
    return;
  }
  i.Gemm("context.dP", x.s, x.s, x.vd, x.b * x.ap);   // dP = dC·Vᵀ
  i.Gemm("context.dV", x.s, x.vd, x.s, x.b * x.ap);   // dV = Pᵀ·dC
  if (i.g.dropout) i.Memory("attention_dropout.dX", x.scores, 2 * d + drop, 2);
  i.Memory("softmax.dX", x.scores, 3 * d, 4);
  i.Gemm("scores.dQ", x.s, x.qkd, x.s, x.b * x.ap);    // dQ = dS·K
  i.Gemm("scores.dK", x.s, x.qkd, x.s, x.b * x.ap);    // dK = dSᵀ·Q
}

}  // namespace

double ContextKvBytes(const GptKernelShape& g) {
  const Dims x = DimsOf(g);
  const int64_t kv = g.kv_heads > 0 ? g.kv_heads : g.heads;
  const double widths = g.mla ? static_cast<double>(x.ap * (x.qkd + x.vd))
                              : 2.0 * static_cast<double>(std::max<int64_t>(kv / g.tensor_parallel, 1) * x.hd);
  return static_cast<double>(x.b * x.s * g.context_parallel) * widths * g.dtype_bytes;
}

std::vector<Kernel> GptBlockKernels(const GptKernelShape& g, bool moe_layer) {
  std::vector<Kernel> out;
  const Dims x = DimsOf(g);
  const double d = g.dtype_bytes, act = static_cast<double>(x.rows) * x.h * d, ln = static_cast<double>(x.lnrows) * x.h;
  const double drop = g.dropout ? 1 : 0;
  BlockForward(Lister{g, KernelPass::kF, &out}, x, moe_layer);

  // I: the gradient back through the block, the MLP first. Each row-parallel layer's input
  // gradient enters its region as is (sequence-parallel: all-gathered), each column-parallel
  // layer's leaves it all-reduced (reduce-scattered). The residual adds are folded into the
  // LayerNorms' backward (one more read of the residual gradient).
  const Lister i{g, KernelPass::kI, &out};
  i.Memory("bias_dropout_add2.dX", ln, 2 * d + drop, 2);
  if (moe_layer) {
    MoeInputGrad(i, x);
  } else {
    i.Enter("mlp.dX", act);
    DenseMlpInputGrad(i, "", static_cast<double>(x.rows), x.fp);
    i.Leave("mlp.dX", act, "fc.dW");
  }
  i.Memory("ln2.dX", ln, 4 * d, 10);
  i.Memory("bias_dropout_add1.dX", ln, 2 * d + drop, 2);
  i.Enter("attention.dX", act);
  i.Gemm("proj.dX", x.rows, x.hp, x.h);
  const double qkv = static_cast<double>(x.rows) * x.qkvp, heads = static_cast<double>(x.rows) * x.hp;
  i.Memory("merge_heads.dX", heads, 2 * d, 0);
  AttentionInputGrad(i, x);
  if (g.mla) {
    detail::MlaInputGrad(i, x);
  } else {
    i.Memory("split_heads.dX", qkv, 2 * d, 0);  // dq, dk, dv into the rows of d_qkv
    i.Gemm("qkv.dX", x.rows, x.h, x.qkvp);
    i.Leave("attention.dX", act, "qkv.dW");
  }
  i.Memory("ln1.dX", ln, 4 * d, 10);

  // W: every weight's gradient, accumulated into the main gradients (at main_grad_bytes:
  // Megatron's gradient-accumulation fusion writes them from the GEMM), and the biases' and
  // LayerNorms' column sums. The row-parallel layers' inputs are the gathered ones.
  const Lister w{g, KernelPass::kW, &out};
  const double mg = g.main_grad_bytes();
  // `rows` rows per GEMM, `batch` GEMMs (the local experts'); `bias`: the column sums too (of a
  // model with biases, g.bias).
  const auto weight = [&](const std::string& name, int64_t out_features, int64_t in_features, double rows = 0,
                          int64_t batch = 1, bool bias = true) {
    const int64_t m = rows > 0 ? static_cast<int64_t>(rows) : x.rows;
    w.Gemm(name + ".dW", out_features, in_features, m, batch);
    out.back().bytes += static_cast<double>(out_features) * in_features * batch * (2 * mg - d);  // += into main_grad
    if (bias && g.bias) w.Memory(name + ".db", static_cast<double>(m) * out_features * batch, d, 1);
  };
  if (moe_layer) {
    const Routed r = RoutedOf(g, x);
    const int64_t fe = g.expert_ffn;
    weight("expert.fc2", x.h, fe, r.per_expert, g.local_experts, false);
    weight("expert.fc", UpWidth(g, fe), x.h, r.per_expert, g.local_experts, false);
    if (g.shared_ffn > 0) {
      const int64_t sp = g.shared_ffn / g.tensor_parallel;
      weight("shared.fc2", x.h, sp, 0, 1, false);
      weight("shared.fc", UpWidth(g, sp), x.h, 0, 1, false);
    }
    weight("router", g.experts, x.h, static_cast<double>(x.lnrows), 1, false);
  } else {
    weight("fc2", x.h, x.fp);
    weight("fc", UpWidth(g, x.fp), x.h);
  }
  w.Memory("ln2.dgamma", ln, 2 * d, 4);
  weight("proj", x.h, x.hp);
  if (g.mla) {
    detail::MlaWeightGrads(w, x, [&](const std::string& name, int64_t n, int64_t k, double rows) {
      weight(name, n, k, rows);
    });
  } else {
    weight("qkv", x.qkvp, x.h);
  }
  w.Memory("ln1.dgamma", ln, 2 * d, 4);
  detail::ApplyFp8(g, &out);
  return out;
}

std::vector<Kernel> GptEmbeddingKernels(const GptKernelShape& g) {
  std::vector<Kernel> out;
  const Dims x = DimsOf(g);
  const double d = g.dtype_bytes, rows = static_cast<double>(x.rows);
  const Lister f{g, KernelPass::kF, &out};
  // Gather the token rows and add the positions' (vocabulary-parallel: the rows this device
  // holds, then the all-reduce that completes them; sequence-parallel: a reduce-scatter).
  f.Memory("embedding", rows * x.h, 3 * d, 1);
  f.Leave("embedding", rows * x.h * d);
  if (g.dropout) f.Memory("embedding_dropout", static_cast<double>(x.lnrows) * x.h, 2 * d + 1, 2);
  // W: scatter-add the output gradient into the embeddings' gradients (the rows used).
  const Lister w{g, KernelPass::kW, &out};
  w.Enter("embedding.dW", rows * x.h * d);
  w.Memory("embedding.dW", rows * x.h, d + 2.0 * g.main_grad_bytes(), 2);
  return out;
}

std::vector<Kernel> GptHeadKernels(const GptKernelShape& g) {
  std::vector<Kernel> out;
  const Dims x = DimsOf(g);
  const double d = g.dtype_bytes, rows = static_cast<double>(x.rows), ln = static_cast<double>(x.lnrows) * x.h;
  const int64_t vp = g.vocab / g.tensor_parallel;
  const double logits = rows * static_cast<double>(vp);
  const Lister f{g, KernelPass::kF, &out};
  f.Memory("lnf", ln, 2 * d, 8);
  f.Enter("head", rows * x.h * d);
  f.Gemm("head", x.rows, vp, x.h);
  // Vocabulary-parallel cross-entropy (Megatron): the logits in fp32, their max, the sum of
  // exponentials and the target's logit (each all-reduced over the group as rows·4 bytes, too
  // small to count), the softmax kept for the backward.
  f.Memory("cross_entropy", logits, d + 4 + 4 + 4, 6);
  const Lister i{g, KernelPass::kI, &out};
  i.Memory("cross_entropy.dX", logits, 4 + d, 2);  // softmax - one-hot, to the dtype
  i.Gemm("head.dX", x.rows, x.h, vp);
  i.Leave("head.dX", rows * x.h * d, "head.dW");
  i.Memory("lnf.dX", ln, 4 * d, 10);
  const Lister w{g, KernelPass::kW, &out};
  w.Gemm("head.dW", vp, x.h, x.rows);
  out.back().bytes += static_cast<double>(vp) * x.h * (2.0 * g.main_grad_bytes() - d);
  w.Memory("lnf.dgamma", ln, 2 * d, 4);
  return out;
}

namespace {

// Whether `name`, a kernel of a layer's forward (BlockForward's), is one of the modules `m`
// (recompute.h: what Megatron-LM's checkpoint of each module runs again).
bool RecomputedBy(std::string_view name, const RecomputeModules& m, const GptKernelShape& g, bool moe_layer) {
  using M = RecomputeModule;
  const auto in = [&](std::initializer_list<std::string_view> names) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  if (m.Has(M::kCoreAttn) && in({"scores", "softmax", "attention_dropout", "context"})) return true;
  // Transformer Engine fuses a dense layer's LayerNorms into the next GEMM; MLA's first and a MoE
  // layer's second run apart.
  if (m.Has(M::kLayernorm) && ((g.mla && name == "ln1") || (moe_layer && name == "ln2"))) return true;
  if (m.Has(M::kMlaUpProj) && g.mla &&
      (in({"q_norm", "kv_norm", "q_up", "kv_up", "mla_rope", "attention.latent.all_gather"}) ||
       (g.q_lora == 0 && in({"q", "attention.all_gather"})))) {
    return true;
  }
  if (!moe_layer) {
    return m.Has(M::kMlp) &&
           (name == "ln2" || name.starts_with("mlp.") || in({"fc", "bias_gelu", "bias_swiglu", "fc2"}));
  }
  const bool shared = name.starts_with("shared.");
  if (m.Has(M::kMoe) && (shared || name.starts_with("expert.") || name.starts_with("router") ||
                         in({"permute", "sort_chunks", "unsort_chunks", "unpermute"}))) {
    return true;
  }
  return (m.Has(M::kSharedExperts) && shared) || (m.Has(M::kMoeAct) && in({"expert.bias_swiglu", "expert.bias_gelu"}));
}

// The F kernels of a layer that `again` picks by name, as pass I's `recompute.<name>`.
template <class Pick>
std::vector<Kernel> Recomputed(const GptKernelShape& g, bool moe_layer, Pick again) {
  std::vector<Kernel> forward;
  BlockForward(Lister{g, KernelPass::kI, &forward}, DimsOf(g), moe_layer);
  std::vector<Kernel> out;
  for (Kernel& k : forward) {
    if (!again(k.name)) continue;
    k.name = "recompute." + k.name;
    if (!k.beside.empty()) k.beside = "recompute." + k.beside;
    out.push_back(std::move(k));
  }
  detail::ApplyFp8(g, &out);
  return out;
}

}  // namespace

std::vector<Kernel> GptRecomputeKernels(const GptKernelShape& g, const RecomputeModules& modules, bool moe_layer) {
  return Recomputed(g, moe_layer, [&](std::string_view name) { return RecomputedBy(name, modules, g, moe_layer); });
}

std::vector<Kernel> GptRecomputeKernels(const GptKernelShape& g, bool full, bool moe_layer) {
  if (full) return Recomputed(g, moe_layer, [](std::string_view) { return true; });
  return GptRecomputeKernels(g, RecomputeModules{RecomputeModule::kCoreAttn}, moe_layer);
}

const std::vector<std::string>& MemoryKernelNames() {
  static const std::vector<std::string> names = [] {  // the lists' names do not depend on the shape
    GptKernelShape g;
    g.microbatch = 1, g.seq = 8, g.hidden = 8, g.heads = 2, g.vocab = 16, g.dropout = true;
    std::vector<Kernel> all = GptBlockKernels(g);
    GptKernelShape llama = g;  // SwiGLU's kernels in place of GELU's
    llama.swiglu = true;
    GptKernelShape moe = g;  // and a MoE layer's, GELU and SwiGLU, with shared experts
    moe.experts = 4, moe.expert_ffn = 8, moe.shared_ffn = 8, moe.local_experts = 2;
    GptKernelShape moe_swiglu = moe;
    moe_swiglu.swiglu = true;
    GptKernelShape fp8 = moe_swiglu;  // the FP8 casts of a MoE layer's GEMMs and of a dense one's
    fp8.fp8 = true;
    GptKernelShape mla = g;  // MLA's projections, with the queries' latent
    mla.mla = true, mla.q_lora = 4, mla.kv_lora = 4, mla.rope_head_dim = 2, mla.bias = false;
    GptKernelShape mla_fp8 = mla;
    mla_fp8.fp8 = true;
    GptKernelShape mla_fp8_q = mla_fp8;  // without a query latent: one q GEMM
    mla_fp8_q.q_lora = 0;
    for (auto more : {GptBlockKernels(llama), GptBlockKernels(moe, true), GptBlockKernels(moe_swiglu, true),
                      GptBlockKernels(mla),
                      GptEmbeddingKernels(g), GptHeadKernels(g), OptimizerStepKernels(1, 4, 16),
                      GptBlockKernels(fp8, true), GptBlockKernels(fp8), GptRecomputeKernels(fp8, true, true),
                      GptBlockKernels(mla_fp8), GptBlockKernels(mla_fp8_q), Fp8WeightCastKernels(1, 2)}) {
      all.insert(all.end(), more.begin(), more.end());
    }
    std::vector<std::string> out;
    for (const Kernel& k : all) {
      if (k.kind == KernelClass::kMemory) out.push_back(k.name);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }();
  return names;
}

std::vector<Kernel> OptimizerStepKernels(double params, int main_grad_bytes, double update_bytes_per_param) {
  std::vector<Kernel> out;
  const GptKernelShape unused;
  const Lister s{unused, KernelPass::kStep, &out};
  s.Memory("grad_norm", params, main_grad_bytes, 2);
  s.Memory("update", params, update_bytes_per_param, 12);
  s.Memory("zero_grad", params, main_grad_bytes, 0);
  return out;
}

}  // namespace stagecraft::sim
