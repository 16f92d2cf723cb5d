// A transformer stage's memory per microbatch in the analytical and roofline models
// (transformer_costs.cpp's SetKeptBytes): Korthikanti et al.'s activations by what a tensor group
// splits, what a selective recompute's modules drop (recompute.h), MLA's latents, the W stash and
// the context group's key-value buffers.
#include "analytical_costs.h"
#include "cost_checks.h"
#include "stagecraft/sim/recompute_drops.h"
#include "stagecraft/sim/roofline.h"
#include "transformer_memory.h"

namespace stagecraft::sim::detail {
namespace {

// Of a layer's 34sbh 16-bit activation bytes (GPT-2), the part split over a tensor group: Q, K
// and V, the projection's input and the feed-forward's inside, in units of sbh (MLA: Q and K of
// q, V and the projection's input of o). A MoE layer's
// feed-forward keeps, per routed copy of a token (top_k x the capacity factor), its permuted
// input 2 and its expert's (2u + 2)·f_e/h, and the shared experts' (2u + 2)·f_e/h each.
double SplitActivationWidths(const TransformerSpec& t, bool moe_layer) {
  const double h = t.hidden, u = static_cast<double>(t.Ups());
  const double q = static_cast<double>(t.QWidth()) / h, kv = static_cast<double>(t.KvWidth()) / h;
  const double o = static_cast<double>(t.OWidth()) / h;
  const double attention = t.mla ? 4 * q + 4 * o : 2 * q + 4 * kv + 2 * o;  // Q, K and V, the projection's input
  if (!moe_layer) return attention + (2 * u + 2) * static_cast<double>(t.Ffn()) / t.hidden;
  const MoeSpec& m = *t.moe;
  const double fe = static_cast<double>(t.ExpertFfn()) / t.hidden;
  return attention + m.top_k * m.KeptFactor() * (2 + (2 * u + 2) * fe) + m.shared_experts * (2 * u + 2) * fe;
}

// MLA's latents, which each device of a tensor group computes with its own copy of the downs (on
// its s/T rows with sequence parallelism, else on all of them), in units of s·b·h 16-bit
// elements: kept for the backward (`stash` false: the queries' latent before and after its
// RMSNorm 2·2r_q, the keys' and values' 2(r_kv + rope) + 2r_kv), or stashed for W as the ups'
// inputs (r_q + r_kv, in elements, gathered again in the backward as Megatron-LM does); 0 without
// MLA. Divided over the group by the caller with sequence parallelism.
double LatentWidths(const TransformerSpec& t, bool stash) {
  if (!t.mla) return 0;
  const double rq = t.mla->q_lora_rank, rkv = t.mla->kv_lora_rank, rope = t.mla->rope_head_dim;
  return (stash ? rq + rkv : 4 * rq + 4 * rkv + 2 * rope) / t.hidden;
}

// The W stash of a layer in units of s·b·h: the inputs of its linear layers (QKV h, the
// projection o (h), the feed-forward's up h and down f; MLA's downs h and ups apart, in
// LatentWidths; a MoE layer's router h, each routed copy's expert up h and down f_e, the shared
// experts' down f_e each).
double StashWidths(const TransformerSpec& t, bool moe_layer) {
  const double h = t.hidden, attention = 1 + static_cast<double>(t.OWidth()) / h;  // QKV's input, the projection's
  if (!moe_layer) return attention + 1 + static_cast<double>(t.Ffn()) / h;
  const MoeSpec& m = *t.moe;
  const double fe = static_cast<double>(t.ExpertFfn()) / h;
  return attention + 1 + m.top_k * m.KeptFactor() * (1 + fe) + m.shared_experts * fe;
}

// What a selective recompute's modules (recompute.h) drop of a layer's kept activations, in units
// of s·b·h 16-bit elements as SplitActivationWidths' and LatentWidths': of the ten a tensor group
// does not split (`unsplit`), the LayerNorms' outputs Transformer Engine keeps apart from a linear
// layer (MLA's first, a MoE layer's second) and a dense feed-forward's input; of those it splits,
// MLA's queries, keys and values (4q + 2o), a dense feed-forward's inside, a MoE layer's routed
// copies (their permuted inputs and experts' insides; moe_act: only their activations' outputs,
// 2·f_e/h each) and its shared experts'; and MLA's latents after their RMSNorms (2r_q + 2r_kv).
struct DroppedWidths {
  double unsplit = 0, split = 0, latent = 0;
};
DroppedWidths Dropped(const TransformerSpec& t, const RecomputeModules& m, bool moe_layer) {
  using M = RecomputeModule;
  DroppedWidths out;
  const double h = t.hidden, u = static_cast<double>(t.Ups());
  if (m.Has(M::kLayernorm)) out.unsplit += (t.mla ? 2 : 0) + (moe_layer ? 2 : 0);
  if (m.Has(M::kMlaUpProj) && t.mla) {
    out.split += (4 * static_cast<double>(t.QWidth()) + 2 * static_cast<double>(t.OWidth())) / h;
    out.latent += 2.0 * (t.mla->q_lora_rank + t.mla->kv_lora_rank) / h;
  }
  if (!moe_layer) {
    if (m.Has(M::kMlp)) out.unsplit += 2, out.split += (2 * u + 2) * static_cast<double>(t.Ffn()) / h;
    return out;
  }
  const MoeSpec& e = *t.moe;
  const double fe = static_cast<double>(t.ExpertFfn()) / h, routed = e.top_k * e.KeptFactor();
  const double shared = e.shared_experts * (2 * u + 2) * fe;
  if (m.Has(M::kMoe)) {
    out.split += routed * (2 + (2 * u + 2) * fe) + shared;
  } else {
    out.split += (m.Has(M::kMoeAct) ? routed * 2 * fe : 0.0) + (m.Has(M::kSharedExperts) ? shared : 0.0);
  }
  return out;
}

// One layer's activations kept for its backward, in bytes of 16-bit tensors (Korthikanti et al.
// 2022, Table 2), over a tensor-parallel group of t: without recompute sbh(34 + 5as/h) at t = 1,
// sbh(10 + 24/t + 5as/(ht)) with tensor parallelism, sbh/t·(34 + 5as/h) with sequence
// parallelism too; selective recompute drops the 5as/h term (sbh(10 + 24/t), or sbh·34/t); full
// recompute keeps only the layer input 2sbh (2sbh/t sequence-parallel).
// `unsplit`, `split`: the widths a tensor group does not split (10) and splits
// (SplitActivationWidths: 24 for GPT-2), less what a selective recompute drops; `latent`: those a
// device keeps apart from them (LatentWidths: MLA's, already divided where split).
double LayerActivationBytes16(double s, double b, double h, double a, double t, bool sp, Recompute recompute,
                              double unsplit, double split, double latent) {
  const double sbh = s * b * h, all = unsplit + split, whole = sbh * latent;
  switch (recompute) {
    case Recompute::kFull: return 2 * sbh / (sp ? t : 1);
    case Recompute::kSelective: return whole + (sp ? sbh * all / t : sbh * (unsplit + split / t));
    case Recompute::kNone: break;
  }
  if (t == 1) return whole + all * sbh + 5 * a * s * s * b;
  return whole + (sp ? sbh / t * (all + 5 * a * s / h) : sbh * (unsplit + split / t + 5 * a * s / (h * t)));
}

}  // namespace

void SetKeptBytes(const Scenario& sc, bool last, const StageLayers& layers, const StageChecks& check, StageCost* cost) {
  const TransformerSpec& t = *sc.model.transformer;
  const PipelineSpec& p = sc.pipeline;
  const double b = p.microbatch_size, s = LocalSeq(sc), h = t.hidden, a = t.heads, V = t.vocab;
  const double d = DtypeBytes(sc.training.dtype);
  const int tp = p.tensor_parallel;
  const double latent_shards = p.sequence_parallel ? tp : 1;  // MLA's latents, on each device's rows
  const auto sum = [&](auto per_layer) {  // over the stage's dense and MoE layers
    return layers.dense() * per_layer(false) + (layers.moe > 0 ? layers.moe * per_layer(true) : 0.0);
  };
  // A fused attention kernel keeps no scores: its activations are selective recompute's. A
  // selective recompute keeps the scores unless it names core_attn, and drops what its modules do.
  const bool flash = t.attention == AttentionKernel::kFlash;
  const auto activations = [&](bool moe_layer, Recompute recompute) {
    const RecomputeModules modules = recompute == Recompute::kSelective ? p.SelectiveModules() : RecomputeModules{};
    const DroppedWidths dropped = Dropped(t, modules, moe_layer);
    if (recompute == Recompute::kSelective && !modules.Has(RecomputeModule::kCoreAttn)) recompute = Recompute::kNone;
    if (flash && recompute == Recompute::kNone) recompute = Recompute::kSelective;
    return LayerActivationBytes16(s, b, h, a, tp, p.sequence_parallel, recompute, 10 - dropped.unsplit,
                                  SplitActivationWidths(t, moe_layer) - dropped.split,
                                  (LatentWidths(t, false) - dropped.latent) / latent_shards) *
           d / 2;
  };
  const double kept = sum([&](bool moe) { return activations(moe, p.recompute); }) + (last ? s * b * V / tp * d : 0.0);
  cost->activation_bytes = check.Bytes(kept, "the activations per microbatch");
  if (p.full_recompute()) {
    const double one = std::max(activations(false, Recompute::kNone),
                                layers.moe > 0 ? activations(true, Recompute::kNone) : 0.0);
    cost->recompute_bytes = check.Bytes(one, "the recomputed activations");
  }
  // Without sequence parallelism the QKV's and the feed-forward's inputs are replicated.
  const double stash = sum([&](bool moe) {
    const double w = StashWidths(t, moe);
    return LatentWidths(t, true) / latent_shards +
           (tp == 1 ? w : (p.sequence_parallel ? w / tp : 2 + (w - 2) / tp));
  });
  cost->w_stash_bytes = check.Bytes(stash * s * b * h * d, "the W stash per microbatch");
  // Context parallelism: what one layer's attention holds while it runs, of the whole sequence's
  // keys and values (ContextKvBytes): the all-gather's gathered copy, and in the backward that
  // copy again beside its gradients (2x); the ring's chunks, each 1/C of them, the one in use and
  // the next in flight (2 chunks), in the backward with their gradients (4 chunks).
  if (p.context_parallel > 1 && layers.count > 0) {
    const double kv = ContextKvBytes(KernelShapeOf(sc));
    const int64_t forward =
        check.Bytes(p.context_all_gather ? kv : 2 * kv / p.context_parallel, "the context group's key-value buffers");
    cost->workspace_bytes += forward;
    cost->backward_extra_workspace_bytes += forward;  // the backward holds twice the forward's
  }
}

}  // namespace stagecraft::sim::detail

namespace stagecraft::sim {

bool RecomputeDrops(const TransformerSpec& t, RecomputeModule module) {
  if (module == RecomputeModule::kCoreAttn) return t.attention != AttentionKernel::kFlash;
  const int moe_layers = t.MoeLayersIn(0, t.layers);
  for (const bool moe_layer : {false, true}) {
    if (moe_layer ? moe_layers == 0 : moe_layers == t.layers) continue;  // no layer of that kind
    const detail::DroppedWidths d = detail::Dropped(t, RecomputeModules{module}, moe_layer);
    if (d.unsplit > 0 || d.split > 0 || d.latent > 0) return true;
  }
  return false;
}

}  // namespace stagecraft::sim
