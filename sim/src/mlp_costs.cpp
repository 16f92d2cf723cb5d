// The MLP's analytical cost model (model.mlp: per layer Linear(h, h) + bias -> activation, fp32
// tensors whatever training.dtype, which sets only its GEMMs' precision).
//
// With b = microbatch_size, time = FLOPs / (peak_flops x efficiency) of the stage's rank's device
// (the slowest of its devices with node groups), rounded to the nearest ns:
//   forward = backward_input = backward_weight = 2·b·h² FLOPs per layer (bias and activation
//     ignored); params h² + h per layer, 4 bytes each for weights and grads; optimizer as
//     analytical_costs.h with training.optimizer, else sgd with training.momentum;
//   activation_bytes 2·b·h·4 per layer (input and pre-activation), with recompute b·h·4 per stage
//     (its input) and the layers' 2·b·h·4 each rebuilt during the backward (recompute_bytes); the
//     last stage adds b·h·4 for the loss gradient it keeps from F to its backward;
//   w_stash_bytes 2·b·h·4 per layer (the layer's input and dz, what W reads); send_bytes b·h·4.
#include <fmt/format.h>

#include "analytical_costs.h"
#include "cost_checks.h"
#include "cost_model_rows.h"

namespace stagecraft::sim::detail {
namespace {

constexpr double kFloat = 4;

// Every layer alike.
LayerWeights MlpWeights(const Scenario& sc) {
  return {"model.mlp", sc.model.mlp->layers, {}, 0.0, 0.0, FlatRankScale(sc)};
}

// The analytical costs of stage `st` of `stages`, holding `layers` layers.
StageCost MlpStage(const Scenario& sc, int st, int stages, double layers, const DeviceSpec& device,
                   const KeysOf& keys) {
  const double b = sc.pipeline.microbatch_size, h = sc.model.mlp->hidden;
  const double rate = device.peak_flops * device.efficiency;
  const double layer_flops = 2.0 * b * h * h;
  const Optimizer optimizer = sc.has_training ? sc.training.optimizer : Optimizer::kSgd;
  const double optimizer_per_param =
      static_cast<double>(OptimizerBytesPerParam(optimizer, sc.training.momentum, static_cast<int>(kFloat)));
  const bool recompute = sc.pipeline.full_recompute();
  const double params = layers * (h * h + h);
  const StageChecks check(sc.path, st, keys);
  const auto ns = [&](double flops, std::string_view what) { return check.Ns(flops / rate * 1e9, what); };
  StageCost cost;
  cost.forward_ns = ns(layers * layer_flops, "a forward");
  cost.backward_input_ns = ns((recompute ? 2 : 1) * layers * layer_flops, "a backward for inputs");
  cost.backward_weight_ns = ns(layers * layer_flops, "a backward for weights");
  // Recomputing, a stage keeps only its input and rebuilds every layer's during the backward;
  // the last stage keeps the loss gradient from F to its backward.
  const double loss_gradient = st == stages - 1 ? b * h * kFloat : 0.0;
  const double kept = (recompute ? b * h * kFloat : layers * 2 * b * h * kFloat) + loss_gradient;
  cost.activation_bytes = check.Bytes(kept, "the activations per microbatch");
  if (recompute) cost.recompute_bytes = check.Bytes(layers * 2 * b * h * kFloat, "the recomputed activations");
  // Each layer's input and dz, what W reads.
  cost.w_stash_bytes = check.Bytes(layers * 2 * b * h * kFloat, "the W stash per microbatch");
  cost.weight_bytes = check.Bytes(params * kFloat, "the weights");
  cost.grad_bytes = cost.weight_bytes;
  cost.optimizer_bytes = check.Bytes(params * optimizer_per_param, "the optimizer state");
  cost.send_bytes = check.Bytes(b * h * kFloat, "the activation sent per microbatch");
  return cost;
}

CostTable MlpTable(const Scenario& sc, const CostQuery& query) {
  const int stages = query.shape.stages();
  CostTable table;
  table.source = "mlp";
  const std::vector<int> layers = SplitWeights(MlpWeights(sc), query.shape, sc.pipeline);
  const KeysOf keys = [&](int st) {
    return fmt::format("model.mlp: {} of hidden {}, microbatch {}, {}", Count(layers[st], "layer"),
                       sc.model.mlp->hidden, sc.pipeline.microbatch_size,
                       DeviceKeys(SlowestFlatDevice(sc, query.shape.RankOf(st))));
  };
  for (int st = 0; st < stages; ++st) {
    const DeviceSpec& device = *SlowestFlatDevice(sc, query.shape.RankOf(st)).device;
    table.stages.push_back(MlpStage(sc, st, stages, layers[st], device, keys));
  }
  CheckComposedOps(table, sc.path, keys);
  return table;
}

}  // namespace

CostModel MlpCostModel() {
  return {"mlp", "model.mlp", [](const Scenario& sc) { return sc.model.mlp.has_value(); }, MlpTable, MlpWeights};
}

}  // namespace stagecraft::sim::detail
