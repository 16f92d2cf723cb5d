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

#include "analytical_costs.h"
#include "cost_checks.h"
#include "cost_model_rows.h"

namespace stagecraft::sim::detail {
namespace {

// In units of one layer's forward FLOPs, 24bsh²(1 + s/6h); the LM head adds 2bshV.
LayerWeights TransformerWeights(const Scenario& sc) {
  const TransformerSpec& t = *sc.model.transformer;
  const double h = t.hidden, s = t.seq, V = t.vocab;
  return {"model.transformer", t.layers, {}, 0.0, 2 * V / (24 * h * (1 + s / (6 * h)))};
}

// The analytical costs of stage `st` of `stages`, holding `layers` layers.
StageCost TransformerStage(const Scenario& sc, int st, int stages, double layers, const KeysOf& keys) {
  const TransformerSpec& t = *sc.model.transformer;
  const DeviceSpec& device = sc.topology.device;
  const double b = sc.pipeline.microbatch_size, s = t.seq, h = t.hidden, a = t.heads, V = t.vocab;
  const double d = DtypeBytes(sc.training.dtype);
  const double rate = device.peak_flops * device.efficiency;
  const double layer_flops = 24 * b * s * h * h + 4 * b * s * s * h;
  const double layer_params = static_cast<double>(GptBlockParams(t.hidden));
  // Korthikanti Eq. 2 in 16-bit bytes, scaled to the dtype.
  const double layer_activation = (34 * s * b * h + 5 * a * s * s * b) * d / 2;
  const Optimizer optimizer = sc.has_training ? sc.training.optimizer : Optimizer::kAdam;
  const double optimizer_per_param =
      static_cast<double>(OptimizerBytesPerParam(optimizer, sc.training.momentum, static_cast<int>(d)));
  const bool last = st == stages - 1;
  const bool recompute = sc.pipeline.recompute;
  const double forward = layers * layer_flops + (last ? 2 * b * s * h * V : 0.0);  // + the LM head
  const double repeat = recompute ? layers * layer_flops : 0.0;
  // The embeddings (tokens and positions) on the first stage; the final LayerNorm and the LM
  // head, untied (its own copy on the last rank, as Megatron-LM's pipeline keeps), on the last.
  const double params = layers * layer_params + static_cast<double>(st == 0 ? GptEmbeddingParams(t.vocab, t.seq, t.hidden) : 0) +
                        static_cast<double>(last ? GptHeadParams(t.vocab, t.hidden) : 0);
  const StageChecks check(sc.path, st, keys);
  const auto ns = [&](double flops, std::string_view what) { return check.Ns(flops / rate * 1e9, what); };
  StageCost cost;
  cost.forward_ns = ns(forward, "a forward");
  cost.backward_input_ns = ns(forward + repeat, "a backward for inputs");
  cost.backward_weight_ns = ns(forward, "a backward for weights");
  // The logits' gradient is kept from F to the backward on the last stage.
  const double kept = (recompute ? layers * s * b * h * d : layers * layer_activation) + (last ? s * b * V * d : 0.0);
  cost.activation_bytes = check.Bytes(kept, "the activations per microbatch");
  // Recomputing, one layer's activations are rebuilt at a time.
  if (recompute) cost.recompute_bytes = check.Bytes(layer_activation, "the recomputed activations");
  cost.w_stash_bytes = check.Bytes(layers * 7 * s * b * h * d, "the W stash per microbatch");
  cost.weight_bytes = check.Bytes(params * d, "the weights");
  cost.grad_bytes = cost.weight_bytes;
  cost.optimizer_bytes = check.Bytes(params * optimizer_per_param, "the optimizer state");
  cost.send_bytes = check.Bytes(s * b * h * d, "the activation sent per microbatch");
  return cost;
}

CostTable TransformerTable(const Scenario& sc, const CostQuery& query) {
  const TransformerSpec& t = *sc.model.transformer;
  const int stages = query.shape.stages();
  CostTable table;
  table.source = "transformer";
  const std::vector<int> layers = SplitWeights(TransformerWeights(sc), stages, sc.pipeline.partition);
  const KeysOf keys = [&](int st) {
    return fmt::format("model.transformer: {} of hidden {}, heads {}, seq {}{}, microbatch {}, {}",
                       Count(layers[st], "layer"), t.hidden, t.heads, t.seq,
                       st == stages - 1 ? fmt::format(", vocab {}", t.vocab) : "", sc.pipeline.microbatch_size,
                       DeviceKeys(sc.topology.device));
  };
  for (int st = 0; st < stages; ++st) table.stages.push_back(TransformerStage(sc, st, stages, layers[st], keys));
  CheckComposedOps(table, sc.path, keys);
  return table;
}

}  // namespace

CostModel TransformerCostModel() {
  return {"transformer", "model.transformer", [](const Scenario& sc) { return sc.model.transformer.has_value(); },
          TransformerTable, TransformerWeights};
}

}  // namespace stagecraft::sim::detail
