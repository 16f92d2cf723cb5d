// The transformer's analytical cost model (model.transformer; Narayanan et al., SC'21, Appendix;
// Korthikanti et al., 2022).
//
// Time = FLOPs / (peak_flops x efficiency), rounded to the nearest ns; with b = microbatch_size,
// s = seq, h = hidden, a = heads, V = vocab, d = training.dtype's bytes, f = ffn_hidden (4h),
// g = kv_heads / heads (1), u = 2 for SwiGLU's gate and up, 1 for GELU's up:
//   forward FLOPs per layer 2bsh²(2 + 2g) (Q, K, V, projection) + 4bs²h (scores, context)
//     + 2(u + 1)·bshf (the feed-forward's GEMMs); GPT-2 (f = 4h, g = 1, u = 1): 24bsh² + 4bs²h.
//     The last stage adds the LM head 2·b·s·h·V. backward_input = backward_weight = forward
//     (each half of the 2× backward); with recompute backward_input also repeats the forward.
//   parameters per layer TransformerBlockParams (12h² + 13h for GPT-2), plus the (V + s)·h
//     token and position embeddings on the first stage and the V·h LM head with the final
//     LayerNorm's 2h on the last (the last rank keeps its own copy, as Megatron-LM's pipeline
//     and stagecraft's executor do; tied embeddings on a one-stage pipeline share the one).
//     weight_bytes = params·d, grad_bytes = params x training.grad_dtype's bytes (fp32 for bf16).
//   optimizer_bytes per parameter as analytical_costs.h, with training.optimizer, else adam.
//   activation_bytes per layer s·b·h·(34 + 5·a·s/h)·d/2 (Korthikanti Eq. 2, no tensor
//     parallelism; the 34 and 5as/h terms are for 16-bit tensors, scaled by d/2 for fp32); the
//     34 counted out: 10 replicated (the LayerNorms' inputs 4, the QKV and MLP inputs 4, two
//     dropout masks 2) and 24 split over a tensor group (Q 2, K and V 4g, the projection's input
//     2, the feed-forward's (2u + 2)·f/h: GELU's input and output 16 at f = 4h, SwiGLU's gate,
//     up and product 24);
//     with recompute only the layer input s·b·h·d, and one layer's activations rebuilt at a
//     time during the backward (recompute_bytes); the last stage adds the logits' gradient
//     s·b·V·d, kept from F to its backward. Other embedding and LM-head activations are not
//     counted.
//   w_stash_bytes per layer: the inputs of the four linear layers (QKV h, attention output h,
//     MLP up h, MLP down f) = (3h + f)·s·b·d, 7·s·b·h·d for GPT-2.
//   send_bytes = s·b·h·d.
// Layers are split by layer_split.h; balanced, a layer weighs its forward FLOPs and the LM head
// 2bshV of them on the last stage.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "analytical_costs.h"
#include "stagecraft/sim/collectives.h"
#include "cost_checks.h"
#include "cost_model_rows.h"
#include "sharded_params.h"
#include "transformer_memory.h"
#include "stagecraft/sim/roofline.h"

namespace stagecraft::sim::detail {

namespace {

// A layer's attention's forward FLOPs per token (b = 1, the s² term's s), q = heads x head_dim
// and kv its keys' width: 2h(q + 2kv) + 2qh + 4sq; 2h²(2 + 2g) + 4sh at q = h, kv = g·h. A fused
// causal kernel (attention: flash) computes half of the scores: 2sq; in a layer with a sliding
// window (`windowed`) the window's keys, 2·CausalKeysPerQuery·q. MLA: 2 x its projections' weights
// (AttentionParams without the RMSNorms) + 2s(q + o), the keys q wide and the values o.
double AttentionFlopsPerToken(const TransformerSpec& t, bool windowed = false) {
  const double h = t.hidden, s = t.seq, q = static_cast<double>(t.QWidth()), kv = static_cast<double>(t.KvWidth());
  const double o = static_cast<double>(t.OWidth());
  const double keys = t.attention != AttentionKernel::kFlash ? s
                      : windowed                             ? CausalKeysPerQuery(s, t.ShorterWindow())
                                                             : s / 2;
  const double projections =
      t.mla ? 2.0 * static_cast<double>(AttentionParams(t) - t.mla->q_lora_rank - t.mla->kv_lora_rank)
            : 2 * h * (q + 2 * kv) + 2 * o * h;
  return projections + 2 * keys * (q + o);
}

// What a windowed layer's forward saves per token against one attending to its whole past.
double WindowSavingPerToken(const TransformerSpec& t) {
  return t.window ? AttentionFlopsPerToken(t) - AttentionFlopsPerToken(t, true) : 0.0;
}

// MLA's latents' width a token, r_q + r_kv + rope (the downs' outputs); 0 without MLA.
double MlaLatentWidth(const TransformerSpec& t) {
  return t.mla ? t.mla->q_lora_rank + t.mla->kv_lora_rank + t.mla->rope_head_dim : 0.0;
}

// Of a layer's forward FLOPs per token, those every device of a tensor group does whole: MLA's
// downs, 2h(r_q + r_kv + rope); none without MLA.
double ReplicatedFlopsPerToken(const TransformerSpec& t) { return 2.0 * t.hidden * MlaLatentWidth(t); }

// The attention's tensor-parallel collectives per pass, in units of one all-reduce of s·b·h (the
// feed-forward's are one): 1 for Q, K and V taken in and the projection's sum given out; MLA's
// take in its latents (r_q + r_kv + rope wide, and the LayerNorm's output without a query latent)
// and give out the projection's h: averaged over F and I, (h + latents [+ h]) / 2h.
double AttentionCollectiveShare(const TransformerSpec& t) {
  if (!t.mla) return 1;
  const double h = t.hidden;
  return (h + MlaLatentWidth(t) + (t.mla->q_lora_rank == 0 ? h : 0.0)) / (2 * h);
}

// One dense layer's forward FLOPs per token: attention + 2(u + 1)hf.
double LayerFlopsPerToken(const TransformerSpec& t) {
  return AttentionFlopsPerToken(t) + 2.0 * static_cast<double>((t.Ups() + 1) * t.hidden * t.Ffn());
}

// One MoE layer's: attention + the router 2h·experts + the experts a token passes through,
// 2(u + 1)h·f_e each, top_k of them (times the capacity factor, padded) and the shared ones.
double MoeLayerFlopsPerToken(const TransformerSpec& t) {
  const MoeSpec& m = *t.moe;
  const double experts = m.top_k * m.TokenFactor() + m.shared_experts;
  return AttentionFlopsPerToken(t) + 2.0 * static_cast<double>(RouterParams(t)) +
         2.0 * experts * static_cast<double>(ExpertParams(t));
}

double FlopsPerToken(const TransformerSpec& t, int layer) {
  return (t.IsMoeLayer(layer) ? MoeLayerFlopsPerToken(t) : LayerFlopsPerToken(t)) -
         (t.IsWindowedLayer(layer) ? WindowSavingPerToken(t) : 0.0);
}

}  // namespace

// In units of one layer's forward FLOPs; the LM head adds 2bshV.
LayerWeights TransformerWeights(const Scenario& sc) {
  const TransformerSpec& t = *sc.model.transformer;
  const double h = t.hidden, V = t.vocab;
  std::vector<double> cost;  // MoE and windowed layers weigh their own FLOPs
  if (t.moe || t.window) {
    for (int l = 0; l < t.layers; ++l) cost.push_back(FlopsPerToken(t, l) / LayerFlopsPerToken(t));
  }
  return {"model.transformer", t.layers, cost, 0.0, 2 * V * h / LayerFlopsPerToken(t), FlatRankScale(sc)};
}

namespace {

// What tensor parallelism adds to a stage: the tensor group's all-reduces per layer (Megatron:
// two in each forward and two in each backward for inputs, of s·b·h elements; with sequence
// parallelism an all-gather and a reduce-scatter in place of each, the same time on a ring).
// (Data parallelism adds the REDUCE_GRAD of the stage's grad_bytes, which the engine runs.)
double TensorAllReduceNs(const Scenario& sc, int rank, double activation_bytes) {
  const PipelineSpec& p = sc.pipeline;
  if (p.tensor_parallel <= 1) return 0;
  return AllReduceNs(activation_bytes, p.tensor_parallel, TensorGroupLink(sc, rank));
}

}  // namespace

// A block's parameters on one device of the tensor group: the column- and row-parallel GEMMs'
// weights and the column-parallel biases are split, the row-parallel biases (2h) and the two
// LayerNorms (4h) replicated. A MoE layer: attention and the shared experts likewise (the
// projection's bias and the LayerNorms, 5h, replicated), the router replicated, and its
// experts / E routed experts whole. The embeddings (tokens and positions) on the first stage;
// the final LayerNorm and the LM head, untied (its own copy on the last rank, as Megatron-LM's
// pipeline keeps), on the last; tensor-parallel, the vocabulary is split over the group (the
// position embeddings and the LayerNorm are replicated). Tied embeddings on one stage: the head
// is the embedding already counted. Without biases (bias: false) only the LayerNorms are replicated.
StageParams ParamsOf(const Scenario& sc, int st, int stages, const StageLayers& layers) {
  const TransformerSpec& t = *sc.model.transformer;
  const int tp = sc.pipeline.tensor_parallel;
  const double h = t.hidden, s = t.seq, V = t.vocab;
  const double block_params = static_cast<double>(TransformerBlockParams(t));
  const double row_bias = t.bias ? h : 0.0;  // each row-parallel layer's: the projection's, the down's
  const double whole = 4 * h + static_cast<double>(MlaReplicatedParams(t));  // + MLA's downs and RMSNorms
  const double layer_params =
      tp == 1 ? block_params : (block_params - 2 * row_bias - whole) / tp + 2 * row_bias + whole;
  const double moe_dense_params =
      !t.moe ? 0.0
             : (static_cast<double>(AttentionParams(t)) - row_bias - (whole - 4 * h)) / tp + row_bias + whole +
                   static_cast<double>(RouterParams(t)) +
                   static_cast<double>(t.moe->shared_experts) * static_cast<double>(ExpertParams(t)) / tp;
  const double expert_params =
      !t.moe ? 0.0
             : static_cast<double>(t.moe->experts / sc.pipeline.expert_parallel) * static_cast<double>(ExpertParams(t));
  const double embedding = tp == 1 ? static_cast<double>(GptEmbeddingParams(t.vocab, t.seq, t.hidden))
                                   : (V / tp + s) * h;
  const double head = t.tied_embeddings && stages == 1 ? 2 * h
                      : tp == 1                         ? static_cast<double>(GptHeadParams(t.vocab, t.hidden))
                                                        : V * h / tp + 2 * h;
  const bool last = st == stages - 1;
  return {layers.dense() * layer_params + layers.moe * moe_dense_params + (st == 0 ? embedding : 0.0) +
              (last ? head : 0.0),
          layers.moe * expert_params};
}

namespace {

// Expert parallelism: each MoE layer's dispatch and combine in F, their gradients' in the
// backward for inputs (and the forward's again when it is recomputed, whole or as `moe`); one all-to-all moves the
// device's routed copies of its tokens, s·b/T x top_k x capacity factor rows of h. With
// training.fp8_dispatch half of every pass's all-to-alls send FP8 (F's dispatch, I's combine
// gradient), half the dtype: one all-to-all counts the mean, so each pass's bytes are exact.
void SetAllToAlls(const Scenario& sc, const StageLayers& layers, const StageChecks& check, StageCost* cost) {
  const TransformerSpec& t = *sc.model.transformer;
  const PipelineSpec& p = sc.pipeline;
  if (layers.moe == 0 || p.expert_parallel <= 1) return;
  cost->a2a_forward = 2 * layers.moe;
  const bool again = p.full_recompute() || p.SelectiveModules().Has(RecomputeModule::kMoe);
  cost->a2a_backward = (again ? 4 : 2) * layers.moe;
  const double tokens = LocalSeq(sc) * p.microbatch_size / p.tensor_parallel;
  const double d = DtypeBytes(sc.training.dtype);
  const double element = sc.training.fp8 && sc.training.fp8_dispatch ? (d + kFp8ScaledElementBytes) / 2 : d;
  cost->a2a_bytes =
      check.Bytes(tokens * t.moe->top_k * t.moe->TokenFactor() * t.hidden * element, "an all-to-all per microbatch");
}

// Context parallelism's key-value exchanges of a stage's layers, in F and in I (the roofline's
// cp_ring or cp_all_gather kernels, gpt_kernels.h): a layer's are the whole sequence's keys and
// values on the device's heads, b·s·2·kv·hd·d/T bytes; all_gather one pass in F and two in I,
// none hidden; the ring's C - 1 steps beside (C - 1)/C of the attention's scores and context,
// 2·k·(q + o) FLOPs a query in F (k: the causal keys a query sees, s/2, or in a windowed layer
// CausalKeysPerQuery's), 2.5 times that in I (the fused kernel's five matmuls against two).
struct ContextComm {
  double forward_ns = 0, input_ns = 0;
};
ContextComm ContextCommNs(const Scenario& sc, int rank, double rate, const StageLayers& layers) {
  const PipelineSpec& p = sc.pipeline;
  const int c = p.context_parallel, tp = p.tensor_parallel;
  if (c <= 1) return {};
  const TransformerSpec& t = *sc.model.transformer;
  const double b = p.microbatch_size, s = t.seq;
  const double bytes = ContextKvBytes(KernelShapeOf(sc));
  const RingLink link = ContextGroupLink(sc, rank);
  if (p.context_all_gather) return {layers.count * AllGatherNs(bytes, c, link), layers.count * 2 * AllGatherNs(bytes, c, link)};
  ContextComm out;
  for (const bool windowed : {false, true}) {  // a windowed layer's attention hides less of the ring
    const int n = windowed ? layers.windowed : layers.count - layers.windowed;
    if (n == 0) continue;
    const double keys = CausalKeysPerQuery(s, windowed ? t.ShorterWindow() : 0);
    const double attention_ns = b * (s / c) * 2 * keys * static_cast<double>(t.QWidth() + t.OWidth()) / tp / rate * 1e9;
    out.forward_ns += n * ContextRingLeftNs(AllGatherNs(bytes, c, link), attention_ns, c);
    out.input_ns += n * ContextRingLeftNs(AllGatherNs(2 * bytes, c, link), 2.5 * attention_ns, c);
  }
  return out;
}

// What a selective recompute's modules repeat in I, FLOPs per token of the device's share: core_attn
// the unfused attention's scores and context (a fused kernel recomputes its own, in its backward),
// mlp a dense layer's feed-forward, moe a MoE layer's router and experts (shared_experts the shared
// ones alone), mla_up_proj MLA's ups; the LayerNorms and activations are memory-bound, no FLOPs.
double SelectiveRepeatFlopsPerToken(const Scenario& sc, const StageLayers& layers) {
  const TransformerSpec& t = *sc.model.transformer;
  const RecomputeModules m = sc.pipeline.SelectiveModules();
  using M = RecomputeModule;
  double flops = 0;
  if (m.Has(M::kCoreAttn) && t.attention != AttentionKernel::kFlash) {
    flops += layers.count * 2.0 * t.seq * static_cast<double>(t.QWidth() + t.OWidth());
  }
  if (m.Has(M::kMlp)) flops += layers.dense() * (LayerFlopsPerToken(t) - AttentionFlopsPerToken(t));
  if (layers.moe > 0 && m.Has(M::kMoe)) {
    flops += layers.moe * (MoeLayerFlopsPerToken(t) - AttentionFlopsPerToken(t));
  } else if (layers.moe > 0 && m.Has(M::kSharedExperts)) {
    flops += layers.moe * 2.0 * t.moe->shared_experts * static_cast<double>(ExpertParams(t));
  }
  if (m.Has(M::kMlaUpProj)) flops += layers.count * 2.0 * static_cast<double>(MlaUpParams(t));
  return flops;
}

// The analytical costs of stage `st` of `stages` on pipeline rank `rank`, holding `layers`.
StageCost TransformerStage(const Scenario& sc, int st, int stages, int rank, const StageLayers& layers,
                           const KeysOf& keys) {
  const TransformerSpec& t = *sc.model.transformer;
  const DeviceSpec& device = *SlowestFlatDevice(sc, rank).device;
  // With context parallelism the device's tokens are s / C of each sequence; a token's attention
  // FLOPs are the whole sequence's keys' (AttentionFlopsPerToken) wherever it runs.
  const double b = sc.pipeline.microbatch_size, s = LocalSeq(sc), h = t.hidden, V = t.vocab;
  const double d = DtypeBytes(sc.training.dtype);
  const double rate = device.peak_flops * device.efficiency;
  const PipelineSpec& p = sc.pipeline;
  const int tp = p.tensor_parallel;
  // A MoE layer's tokens are the device's sequence share (sequence-parallel with T > 1), its
  // experts' work spread evenly over the expert group: per device, 1/T of the layer's FLOPs too.
  // MLA's downs run on all the rows on every device of the group without sequence parallelism
  // (ReplicatedFlopsPerToken), on its share with it.
  const double whole = p.sequence_parallel ? 0.0 : layers.count * ReplicatedFlopsPerToken(t);
  const double blocks_flops = b * s / tp * (layers.dense() * LayerFlopsPerToken(t) +
                                            (layers.moe > 0 ? layers.moe * MoeLayerFlopsPerToken(t) : 0.0) -
                                            layers.windowed * WindowSavingPerToken(t) - whole) +
                              b * s * whole;
  const bool last = st == stages - 1;
  const bool recompute = p.full_recompute();
  const double forward = blocks_flops + (last ? 2 * b * s * h * V / tp : 0.0);  // + the LM head
  // Full recompute repeats the forward inside B/I; selective its modules' share of it.
  const double repeat = recompute ? blocks_flops : b * s / tp * SelectiveRepeatFlopsPerToken(sc, layers);
  const double tensor_ns = layers.count * (1 + AttentionCollectiveShare(t)) * TensorAllReduceNs(sc, rank, s * b * h * d);
  // A repeated forward repeats its tensor group's all-reduces: all of them, or the dense
  // feed-forwards' one each (mlp).
  double repeat_tensor_ns = recompute ? tensor_ns : 0.0;
  if (p.SelectiveModules().Has(RecomputeModule::kMlp)) {
    repeat_tensor_ns = layers.dense() * TensorAllReduceNs(sc, rank, s * b * h * d);
  }
  const StageChecks check(sc.path, st, keys);
  StageCost cost;
  // With the tensor group's all-reduces (none at T = 1; a repeated forward repeats them) and the
  // context group's exchanges.
  const ContextComm context = ContextCommNs(sc, rank, rate, layers);
  cost.forward_ns = check.Ns(forward / rate * 1e9 + tensor_ns + context.forward_ns, "a forward");
  cost.backward_input_ns = check.Ns((forward + repeat) / rate * 1e9 + tensor_ns + repeat_tensor_ns +
                                        context.input_ns + (recompute ? context.forward_ns : 0),
                                    "a backward for inputs");
  cost.backward_weight_ns = check.Ns(forward / rate * 1e9, "a backward for weights");
  SetKeptBytes(sc, last, layers, check, &cost);
  const StageParams params = ParamsOf(sc, st, stages, layers);
  cost.weight_bytes = check.Bytes((params.shared + params.routed) * d, "the weights");
  const double grad = sc.training.GradBytes();  // training.grad_dtype's
  cost.grad_bytes = check.Bytes((params.shared + params.routed) * grad, "the gradients");
  // The REDUCE_GRAD runs over the D x C replicas; the routed experts' gradients are reduced over
  // their own D x C x T / E holders, charged as the bytes whose ring all-reduce over D x C moves as much
  // through each link ((n - 1) / n of a buffer per pass). An all-reduce of the gradients; with
  // ZeRO-1 their reduce-scatter and the updated weights' all-gather (the mean of the two elements'
  // bytes a pass); with ZeRO-2 the weights' all-gather alone, half a ring (its reduce-scatters are
  // in the backwards, sharded_params.h); with ZeRO-3 nothing. The all-gather runs beside the next
  // step instead with param_gather_overlap.
  const double replicas = p.replicas(), holders = ExpertHolders(p);
  const double share = params.routed > 0 && replicas > 1 ? ((holders - 1) / holders) / ((replicas - 1) / replicas) : 1.0;
  const double gathered = p.param_gather_overlap ? 0 : d;
  const double element = p.zero == 0   ? grad
                         : p.zero == 1 ? (grad + gathered) / kAllReducePasses
                         : p.zero == 2 ? gathered / kAllReducePasses
                                       : 0;
  cost.reduce_bytes = check.Bytes((params.shared + params.routed * share) * element, "the gradients reduced");
  // ZeRO (1 and up) shards the optimizer state over the stage's replicas (the experts' over their
  // holders); 2 and 3 the gradients and the weights too (sharded_params.h).
  const double per_param = static_cast<double>(OptimizerBytesPerParam(sc));
  const double held = p.zero >= 1 ? ShardOf(p, params) : params.shared + params.routed;
  cost.optimizer_bytes = check.Bytes(held * per_param, "the optimizer state");
  // Tensor-parallel, each device of the group sends its 1/T of the activation (Megatron-LM's
  // scatter-gather between stages).
  cost.send_bytes = check.Bytes(s * b * h * d / tp, "the activation sent per microbatch");
  SetAllToAlls(sc, layers, check, &cost);
  ShardStageMemory(sc, params, layers.count, &cost);
  AddShardedComm(ShardedCommOf(sc, rank, params, layers.count), &cost);
  return cost;
}

}  // namespace

CostTable TransformerTable(const Scenario& sc, const CostQuery& query, const std::vector<int>& layers) {
  const TransformerSpec& t = *sc.model.transformer;
  const int stages = query.shape.stages();
  CostTable table;
  table.source = "transformer";
  const KeysOf keys = [&](int st) {
    return fmt::format("model.transformer: {} of hidden {}, heads {}, seq {}{}, microbatch {}, {}",
                       Count(layers[st], "layer"), t.hidden, t.heads, t.seq,
                       st == stages - 1 ? fmt::format(", vocab {}", t.vocab) : "", sc.pipeline.microbatch_size,
                       DeviceKeys(SlowestFlatDevice(sc, query.shape.RankOf(st))));
  };
  table.a2a_overlap = sc.pipeline.a2a_overlap;
  table.a2a_sm_share = sc.pipeline.a2a_sm_share;
  // One copy of a token is its bytes over the copies sent, the capacity's included: the busiest
  // device's load (load_imbalance, in a2a_bytes) stays in it.
  if (t.moe) {
    table.a2a_routing = {sc.pipeline.deepep, t.moe->experts, t.moe->top_k, t.moe->top_k * t.moe->KeptFactor(),
                         t.moe->node_limit};
  }
  int first = 0;
  for (int st = 0; st < stages; ++st) {
    const StageLayers mix{first, layers[st], t.MoeLayersIn(first, layers[st]),
                          t.WindowedLayersIn(first, layers[st])};
    table.stages.push_back(TransformerStage(sc, st, stages, query.shape.RankOf(st), mix, keys));
    first += layers[st];
  }
  CheckComposedOps(table, sc.path, keys);
  return table;
}

CostModel TransformerCostModel() {
  return {"transformer", "model.transformer", [](const Scenario& sc) { return sc.model.transformer.has_value(); },
          [](const Scenario& sc, const CostQuery& query) {
            return TransformerTable(sc, query,
                                    SplitWeights(TransformerWeights(sc), query.shape, sc.pipeline));
          },
          TransformerWeights};
}

}  // namespace stagecraft::sim::detail
