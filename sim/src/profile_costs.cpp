// The measured profile's cost model (profile_costs.h): per stage, the sums over its layers of
// their measured times (scaled by the calibration) and sizes, in double, then checked into int64
// (limits.h).
#include "stagecraft/sim/profile_costs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cost_checks.h"
#include "cost_model_rows.h"
#include "stagecraft/base/error.h"
#include "stagecraft/sim/layer_split.h"

namespace stagecraft::sim {
namespace {

using detail::KeysOf;

// A layer weighs its measured forward + backward_input + backward_weight + step; the embedding
// joins the first stage, the head the last.
LayerWeights ProfileWeights(const Scenario& sc, const Profile& p) {
  auto total = [](const LayerProfile& l) {
    return static_cast<double>(l.forward_ns + l.backward_input_ns + l.backward_weight_ns + l.step_ns);
  };
  LayerWeights weights;
  weights.what = fmt::format("profile {}", sc.model.profile_path);
  weights.layers = static_cast<int>(p.layers.size());
  for (const LayerProfile& l : p.layers) weights.cost.push_back(total(l));
  if (p.embedding) weights.first_extra = total(*p.embedding);
  if (p.head) weights.last_extra = total(*p.head);
  return weights;
}

std::vector<int> ProfileStageLayers(const Scenario& sc, const Profile& p, const schedules::Shape& shape) {
  return SplitWeights(ProfileWeights(sc, p), shape, sc.pipeline);
}

// The calibration's scales per layer: those of the rank that held the layer in the calibration
// runs (one stage per rank: the split the profile records, else the scenario's). The caller
// has checked that p.ranks has one entry per pipeline rank.
std::vector<OpScale> LayerScales(const Scenario& sc, const Profile& p, bool per_microbatch) {
  std::vector<OpScale> out(p.layers.size());
  // The split the calibration ran with, when the profile records it.
  std::vector<int> counts;
  size_t total = 0;
  for (const RankScale& r : p.ranks) {
    counts.push_back(r.layers);
    total += static_cast<size_t>(std::max(r.layers, 0));
  }
  if (total != p.layers.size()) counts = ProfileStageLayers(sc, p, schedules::Shape{sc.pipeline.ranks, 1, schedules::Placement::kLoop});
  size_t next = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    const OpScale& scale = per_microbatch ? p.ranks[r].per_microbatch : p.ranks[r].per_step;
    for (int i = 0; i < counts[r]; ++i, ++next) out[next] = scale;
  }
  return out;
}

double Scaled(int64_t ns, double scale) { return static_cast<double>(ns) * scale; }

// A stage's sums over its layers, before the checked conversion.
struct StageSums {
  double forward_ns = 0, backward_input_ns = 0, backward_weight_ns = 0, backward_ns = 0, step_ns = 0, copy_ns = 0;
  double correction_ns = 0, velocity_ns = 0;
  double activation_bytes = 0, recompute_bytes = 0, w_stash_bytes = 0, weight_bytes = 0, grad_bytes = 0;
  double optimizer_bytes = 0, workspace_bytes = 0;

  void Add(const LayerProfile& layer, const OpScale& k, bool recompute) {
    const int64_t input = layer.backward_input_ns + (recompute ? layer.forward_ns : 0);
    forward_ns += Scaled(layer.forward_ns, k.forward);
    backward_input_ns += Scaled(input, k.backward_input);
    backward_weight_ns += Scaled(layer.backward_weight_ns, k.backward_weight);
    backward_ns += Scaled(input + layer.backward_weight_ns, k.backward);
    step_ns += Scaled(layer.step_ns, k.step);
    copy_ns += Scaled(layer.version_copy_ns, k.step);
    correction_ns += Scaled(layer.correction_ns, k.backward);
    velocity_ns += Scaled(layer.velocity_ns, k.step);
    // Recomputing, the stage rebuilds these during its backward (below).
    (recompute ? recompute_bytes : activation_bytes) += static_cast<double>(layer.activation_bytes);
    w_stash_bytes += static_cast<double>(layer.w_stash_bytes);
    weight_bytes += static_cast<double>(layer.weight_bytes);
    grad_bytes += static_cast<double>(layer.grad_bytes);
    optimizer_bytes += static_cast<double>(layer.optimizer_bytes);
    // One layer runs at a time.
    workspace_bytes = std::max(workspace_bytes, static_cast<double>(layer.workspace_bytes));
  }
};

// Stage `st`'s sums: its layers (with the embedding on the first, the head on the last), the
// input copy and the loss, and what recompute keeps.
StageSums SumStage(const Scenario& sc, const Profile& p, const std::vector<OpScale>& scales, int st, int stages,
                   size_t first_layer, int layers) {
  StageSums sums;
  const bool recompute = sc.pipeline.full_recompute();
  if (st == 0 && p.embedding) sums.Add(*p.embedding, scales.front(), recompute);
  for (int i = 0; i < layers; ++i) sums.Add(p.layers[first_layer + i], scales[first_layer + i], recompute);
  if (st == stages - 1 && p.head) sums.Add(*p.head, scales.back(), recompute);
  // Recomputing, a stage keeps its input alone from F to its backward: the tokens (the
  // embeddings' own activations) on the transformer's first stage, the activation sent
  // between stages elsewhere.
  if (recompute) {
    sums.activation_bytes = static_cast<double>(st == 0 && p.embedding ? p.embedding->activation_bytes : p.send_bytes);
  }
  if (st == 0) sums.forward_ns += Scaled(p.input_copy_ns, scales.front().forward);
  if (st == stages - 1) {
    sums.forward_ns += Scaled(p.loss_ns, scales.back().forward);
    // The loss gradient, kept from F to its backward: the size of the output (the logits, for
    // the transformer: send_bytes / hidden · vocab).
    const TransformerSpec* t = sc.model.transformer ? &*sc.model.transformer : nullptr;
    const double output_bytes = t != nullptr ? static_cast<double>(p.send_bytes / t->hidden) * t->vocab
                                             : static_cast<double>(p.send_bytes);
    sums.activation_bytes += output_bytes;  // the loss writes it over the output (exec's runtime)
  }
  return sums;
}

StageCost CheckedStage(const StageSums& s, const Scenario& sc, int st, bool fused, const KeysOf& keys) {
  StageCost cost;
  const detail::StageChecks check(sc.path, st, keys);
  cost.forward_ns = check.Ns(s.forward_ns, "a forward");
  cost.backward_input_ns = check.Ns(s.backward_input_ns, "a backward for inputs");
  cost.backward_weight_ns = check.Ns(s.backward_weight_ns, "a backward for weights");
  if (fused) cost.fused_backward_ns = check.Ns(s.backward_ns, "a backward");
  cost.step_ns = check.Ns(s.step_ns, "an optimizer step");
  cost.version_copy_ns = check.Ns(s.copy_ns, "a weight version copy");
  cost.correction_ns = check.Ns(s.correction_ns, "PipeMare's correction");
  cost.velocity_ns = check.Ns(s.velocity_ns, "PipeMare's velocity update");
  cost.activation_bytes = check.Bytes(s.activation_bytes, "the activations per microbatch");
  cost.recompute_bytes = check.Bytes(s.recompute_bytes, "the recomputed activations");
  cost.w_stash_bytes = check.Bytes(s.w_stash_bytes, "the W stash per microbatch");
  cost.weight_bytes = check.Bytes(s.weight_bytes, "the weights");
  cost.grad_bytes = check.Bytes(s.grad_bytes, "the gradients");
  cost.optimizer_bytes = check.Bytes(s.optimizer_bytes, "the optimizer state");
  cost.workspace_bytes = check.Bytes(s.workspace_bytes, "the workspace");
  return cost;
}

}  // namespace

CostTable CostsFromProfile(const Scenario& sc, const Profile& p, const CostQuery& query) {
  const int stages = query.shape.stages();
  const bool calibrated = query.calibrated;
  CostTable table;
  table.source = "profile:" + sc.model.profile_path;
  const std::vector<int> counts = ProfileStageLayers(sc, p, query.shape);
  // Per-rank calibration applies when it was taken on as many ranks (its rank r ran where r runs).
  const bool per_rank = calibrated && static_cast<int>(p.ranks.size()) == sc.pipeline.ranks;
  const std::vector<OpScale> scales =
      per_rank ? LayerScales(sc, p, query.per_microbatch_updates) : std::vector<OpScale>(p.layers.size());
  std::vector<size_t> first(stages + 1, 0);
  for (int st = 0; st < stages; ++st) first[st + 1] = first[st] + counts[st];
  const KeysOf keys = [&](int st) {
    std::string also;
    if (st == 0 && p.embedding) also += ", the embedding";
    if (st == stages - 1 && p.head) also += ", the head";
    if (st == 0 && p.input_copy_ns > 0) also += ", input_copy";
    if (st == stages - 1 && p.loss_ns > 0) also += ", loss";
    return fmt::format("model.profile {}: layers {}..{}{} on stage {}{}", sc.model.profile_path, first[st],
                       first[st + 1] - 1, also, st, per_rank ? ", with its calibration's scales" : "");
  };
  for (int st = 0; st < stages; ++st) {
    const StageSums sums = SumStage(sc, p, scales, st, stages, first[st], counts[st]);
    StageCost cost = CheckedStage(sums, sc, st, per_rank, keys);
    cost.send_bytes = p.send_bytes;
    table.stages.push_back(cost);
  }
  detail::CheckComposedOps(table, sc.path, keys);
  if (calibrated) {
    table.op_overhead_ns = p.op_overhead_ns;
    table.op_time_cv = p.op_time_cv;
    if (per_rank) {
      for (const RankScale& r : p.ranks) {
        table.rank_op_overhead_ns.push_back(r.op_overhead_ns.value_or(p.op_overhead_ns));
      }
      // The stash's slopes were measured on the calibration's ranks, as the pipeline runs here.
      if (std::all_of(p.ranks.begin(), p.ranks.end(), [](const RankScale& r) { return r.stash.has_value(); })) {
        for (const RankScale& r : p.ranks) table.rank_stash.push_back(*r.stash);
      }
    }
    table.p2p = p.p2p;
    table.allreduce = p.allreduce;
  }
  return table;
}

CostTable CostsFromProfile(const Scenario& scenario, const Profile& profile, const schedules::Shape& shape,
                           bool per_microbatch_updates, bool calibrated) {
  return CostsFromProfile(scenario, profile, CostQuery{shape, per_microbatch_updates, calibrated});
}

CostModel detail::ProfileCostModel() {
  return {"profile", "model.profile", [](const Scenario& sc) { return sc.model.profile != nullptr; },
          [](const Scenario& sc, const CostQuery& query) { return CostsFromProfile(sc, *sc.model.profile, query); },
          [](const Scenario& sc) { return ProfileWeights(sc, *sc.model.profile); }};
}

}  // namespace stagecraft::sim
