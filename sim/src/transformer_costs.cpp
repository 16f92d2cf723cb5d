// The transformer's analytical cost model (model.transformer; Narayanan et al., SC'21, Appendix;
// Korthikanti et al., 2022).
//
// Time = FLOPs / (peak_flops x efficiency), rounded to the nearest ns; with b = microbatch_size,
// s = seq, h = hidden, a = heads, V = vocab, d = training.dtype's bytes:
//   forward FLOPs per layer 24·b·s·h²·(1 + s/(6h)) = 24bsh² + 4bs²h; the last stage adds the
//     LM head 2·b·s·h·V. backward_input = backward_weight = forward (each half of the 2×
//     backward); with recompute backward_input also repeats the layers' forward.
//   parameters 12h² + 13h per layer, plus the (V + s)·h token and position embeddings on the
//     first stage and the V·h LM head with the final LayerNorm's 2h on the last (untied: the
//     last rank keeps its own, as Megatron-LM's pipeline and stagecraft's executor do).
//     weight_bytes = grad_bytes = params·d.
//   optimizer_bytes per parameter as analytical_costs.h, with training.optimizer, else adam.
//   activation_bytes per layer s·b·h·(34 + 5·a·s/h)·d/2 (Korthikanti Eq. 2, no tensor
//     parallelism; the 34 and 5as/h terms are for 16-bit tensors, scaled by d/2 for fp32);
//     with recompute only the layer input s·b·h·d, and one layer's activations rebuilt at a
//     time during the backward (recompute_bytes); the last stage adds the logits' gradient
//     s·b·V·d, kept from F to its backward. Other embedding and LM-head activations are not
//     counted.
//   w_stash_bytes per layer: the inputs of the four linear layers (QKV h, attention output h,
//     MLP up h, MLP down 4h) = 7·s·b·h·d.
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

// In units of one layer's forward FLOPs, 24bsh²(1 + s/6h); the LM head adds 2bshV.
LayerWeights TransformerWeights(const Scenario& sc) {
  const TransformerSpec& t = *sc.model.transformer;
  const double h = t.hidden, s = t.seq, V = t.vocab;
  return {"model.transformer", t.layers, {}, 0.0, 2 * V / (24 * h * (1 + s / (6 * h))), FlatRankScale(sc)};
}

namespace {

// One layer's activations kept for its backward, in bytes of 16-bit tensors (Korthikanti et al.
// 2022, Table 2), over a tensor-parallel group of t: without recompute sbh(34 + 5as/h) at t = 1,
// sbh(10 + 24/t + 5as/(ht)) with tensor parallelism, sbh/t·(34 + 5as/h) with sequence
// parallelism too; selective recompute drops the 5as/h term (sbh(10 + 24/t), or sbh·34/t); full
// recompute keeps only the layer input 2sbh (2sbh/t sequence-parallel).
double LayerActivationBytes16(double s, double b, double h, double a, double t, bool sp, Recompute recompute) {
  const double sbh = s * b * h;
  switch (recompute) {
    case Recompute::kFull: return 2 * sbh / (sp ? t : 1);
    case Recompute::kSelective: return sp ? sbh * 34 / t : sbh * (10 + 24 / t);
    case Recompute::kNone: break;
  }
  if (t == 1) return 34 * sbh + 5 * a * s * s * b;
  return sp ? sbh / t * (34 + 5 * a * s / h) : sbh * (10 + 24 / t + 5 * a * s / (h * t));
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
  const double layer_flops = (24 * b * s * h * h + 4 * b * s * s * h) / tp;
  // A block's parameters on one device of the tensor group: the column- and row-parallel GEMMs'
  // weights and the column-parallel biases are split, the row-parallel biases (2h) and the two
  // LayerNorms (4h) replicated.
  const double layer_params = tp == 1 ? static_cast<double>(GptBlockParams(t.hidden))
                                      : (12 * h * h + 7 * h) / tp + 6 * h;
  // Korthikanti's activations in 16-bit bytes, scaled to the dtype; without recompute (what a
  // full recompute rebuilds, one layer at a time).
  const double layer_activation = LayerActivationBytes16(s, b, h, a, tp, p.sequence_parallel, Recompute::kNone) * d / 2;
  const double layer_kept = LayerActivationBytes16(s, b, h, a, tp, p.sequence_parallel, p.recompute) * d / 2;
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
  const double head = tp == 1 ? static_cast<double>(GptHeadParams(t.vocab, t.hidden)) : V * h / tp + 2 * h;
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
  const double stash_widths = tp == 1 ? 7.0 : (p.sequence_parallel ? 7.0 / tp : 2 + 5.0 / tp);
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
