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
//     weight_bytes = grad_bytes = params·d.
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

#include <vector>

#include "analytical_costs.h"
#include "stagecraft/sim/collectives.h"
#include "cost_checks.h"
#include "cost_model_rows.h"

namespace stagecraft::sim::detail {

namespace {

// One layer's forward FLOPs per token (b = s = 1 but the s² term's s): 2h²(2 + 2g) + 4sh + 2(u + 1)hf.
double LayerFlopsPerToken(const TransformerSpec& t) {
  const double h = t.hidden, s = t.seq, f = static_cast<double>(t.Ffn());
  const double g = static_cast<double>(t.KvHeads()) / t.heads, u = t.activation == FfnActivation::kSwiglu ? 2 : 1;
  return 2 * h * h * (2 + 2 * g) + 4 * s * h + 2 * (u + 1) * h * f;
}

// Of a layer's 34sbh 16-bit activation bytes (GPT-2), the part split over a tensor group: Q, K
// and V, the projection's input and the feed-forward's inside, in units of sbh.
double SplitActivationWidths(const TransformerSpec& t) {
  const double g = static_cast<double>(t.KvHeads()) / t.heads, u = t.activation == FfnActivation::kSwiglu ? 2 : 1;
  return 2 + 4 * g + 2 + (2 * u + 2) * static_cast<double>(t.Ffn()) / t.hidden;
}

}  // namespace

// In units of one layer's forward FLOPs; the LM head adds 2bshV.
LayerWeights TransformerWeights(const Scenario& sc) {
  const TransformerSpec& t = *sc.model.transformer;
  const double h = t.hidden, V = t.vocab;
  return {"model.transformer", t.layers, {}, 0.0, 2 * V * h / LayerFlopsPerToken(t), FlatRankScale(sc)};
}

namespace {

// One layer's activations kept for its backward, in bytes of 16-bit tensors (Korthikanti et al.
// 2022, Table 2), over a tensor-parallel group of t: without recompute sbh(34 + 5as/h) at t = 1,
// sbh(10 + 24/t + 5as/(ht)) with tensor parallelism, sbh/t·(34 + 5as/h) with sequence
// parallelism too; selective recompute drops the 5as/h term (sbh(10 + 24/t), or sbh·34/t); full
// recompute keeps only the layer input 2sbh (2sbh/t sequence-parallel).
// `split`: the widths a tensor group splits (SplitActivationWidths: 24 for GPT-2).
double LayerActivationBytes16(double s, double b, double h, double a, double t, bool sp, Recompute recompute,
                              double split) {
  const double sbh = s * b * h, all = 10 + split;
  switch (recompute) {
    case Recompute::kFull: return 2 * sbh / (sp ? t : 1);
    case Recompute::kSelective: return sp ? sbh * all / t : sbh * (10 + split / t);
    case Recompute::kNone: break;
  }
  if (t == 1) return all * sbh + 5 * a * s * s * b;
  return sp ? sbh / t * (all + 5 * a * s / h) : sbh * (10 + split / t + 5 * a * s / (h * t));
}

// What tensor parallelism adds to a stage: the tensor group's all-reduces per layer (Megatron:
// two in each forward and two in each backward for inputs, of s·b·h elements; with sequence
// parallelism an all-gather and a reduce-scatter in place of each, the same time on a ring).
// (Data parallelism adds the REDUCE_GRAD of the stage's grad_bytes, which the engine runs.)
double TensorAllReduceNs(const Scenario& sc, int rank, double activation_bytes) {
  const PipelineSpec& p = sc.pipeline;
  if (p.tensor_parallel <= 1) return 0;
  return AllReduceNs(activation_bytes, p.tensor_parallel, TensorGroupLink(sc, rank));
}

// The analytical costs of stage `st` of `stages` on pipeline rank `rank`, holding `layers` layers.
StageCost TransformerStage(const Scenario& sc, int st, int stages, int rank, double layers, const KeysOf& keys) {
  const TransformerSpec& t = *sc.model.transformer;
  const DeviceSpec& device = *SlowestFlatDevice(sc, rank).device;
  const double b = sc.pipeline.microbatch_size, s = t.seq, h = t.hidden, a = t.heads, V = t.vocab;
  const double d = DtypeBytes(sc.training.dtype);
  const double rate = device.peak_flops * device.efficiency;
  const PipelineSpec& p = sc.pipeline;
  const int tp = p.tensor_parallel;
  const double layer_flops = b * s * LayerFlopsPerToken(t) / tp;
  // A block's parameters on one device of the tensor group: the column- and row-parallel GEMMs'
  // weights and the column-parallel biases are split, the row-parallel biases (2h) and the two
  // LayerNorms (4h) replicated.
  const double block_params = static_cast<double>(TransformerBlockParams(t));
  const double layer_params = tp == 1 ? block_params : (block_params - 6 * h) / tp + 6 * h;
  // Korthikanti's activations in 16-bit bytes, scaled to the dtype; without recompute (what a
  // full recompute rebuilds, one layer at a time).
  const double split = SplitActivationWidths(t);
  const double layer_activation =
      LayerActivationBytes16(s, b, h, a, tp, p.sequence_parallel, Recompute::kNone, split) * d / 2;
  const double layer_kept = LayerActivationBytes16(s, b, h, a, tp, p.sequence_parallel, p.recompute, split) * d / 2;
  const Optimizer optimizer = sc.has_training ? sc.training.optimizer : Optimizer::kAdam;
  const double optimizer_per_param =
      static_cast<double>(OptimizerBytesPerParam(optimizer, sc.training.momentum, static_cast<int>(d)));
  const bool last = st == stages - 1;
  const bool recompute = p.full_recompute();
  const double forward = layers * layer_flops + (last ? 2 * b * s * h * V / tp : 0.0);  // + the LM head
  // Full recompute repeats the forward inside B/I; selective only the attention's s² part.
  const double repeat = recompute                                   ? layers * layer_flops
                        : p.recompute == Recompute::kSelective ? layers * 4 * b * s * s * h / tp
                                                                    : 0.0;
  // The embeddings (tokens and positions) on the first stage; the final LayerNorm and the LM
  // head, untied (its own copy on the last rank, as Megatron-LM's pipeline keeps), on the last.
  // Tensor-parallel, the vocabulary is split over the group (the position embeddings and the
  // LayerNorm are replicated).
  const double embedding = tp == 1 ? static_cast<double>(GptEmbeddingParams(t.vocab, t.seq, t.hidden))
                                   : (V / tp + s) * h;
  // Tied embeddings on one stage: the head is the embedding already counted; elsewhere the last
  // stage keeps a copy (and its gradients), as Megatron-LM does.
  const double head = t.tied_embeddings && stages == 1 ? 2 * h
                      : tp == 1                         ? static_cast<double>(GptHeadParams(t.vocab, t.hidden))
                                                        : V * h / tp + 2 * h;
  const double params = layers * layer_params + (st == 0 ? embedding : 0.0) + (last ? head : 0.0);
  const double tensor_ns = 2 * layers * TensorAllReduceNs(sc, rank, s * b * h * d);  // per forward or backward pass
  const StageChecks check(sc.path, st, keys);
  const auto ns = [&](double flops, std::string_view what) { return check.Ns(flops / rate * 1e9, what); };
  StageCost cost;
  // With the tensor group's all-reduces (none at T = 1; a repeated forward repeats them).
  cost.forward_ns = check.Ns(forward / rate * 1e9 + tensor_ns, "a forward");
  cost.backward_input_ns =
      check.Ns((forward + repeat) / rate * 1e9 + tensor_ns * (recompute ? 2 : 1), "a backward for inputs");
  cost.backward_weight_ns = ns(forward, "a backward for weights");
  // The logits' gradient (its vocabulary share) is kept from F to the backward on the last stage.
  const double kept = layers * layer_kept + (last ? s * b * V / tp * d : 0.0);
  cost.activation_bytes = check.Bytes(kept, "the activations per microbatch");
  // Recomputing, one layer's activations are rebuilt at a time.
  if (recompute) cost.recompute_bytes = check.Bytes(layer_activation, "the recomputed activations");
  // Tensor-parallel, the attention output's and the MLP down-projection's inputs are split (and
  // with sequence parallelism the other two as well).
  const double ffn = static_cast<double>(t.Ffn()) / h;  // the MLP down-projection's input width, in h
  const double stash_widths = tp == 1 ? 3 + ffn : (p.sequence_parallel ? (3 + ffn) / tp : 2 + (1 + ffn) / tp);
  cost.w_stash_bytes = check.Bytes(layers * stash_widths * s * b * h * d, "the W stash per microbatch");
  cost.weight_bytes = check.Bytes(params * d, "the weights");
  cost.grad_bytes = cost.weight_bytes;
  // ZeRO-1 shards the optimizer state over the stage's replicas.
  const double zero_shards = p.zero == 1 ? p.data_parallel : 1;
  cost.optimizer_bytes = check.Bytes(params * optimizer_per_param / zero_shards, "the optimizer state");
  // Tensor-parallel, each device of the group sends its 1/T of the activation (Megatron-LM's
  // scatter-gather between stages).
  cost.send_bytes = check.Bytes(s * b * h * d / tp, "the activation sent per microbatch");
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
  for (int st = 0; st < stages; ++st) {
    table.stages.push_back(TransformerStage(sc, st, stages, query.shape.RankOf(st), layers[st], keys));
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
