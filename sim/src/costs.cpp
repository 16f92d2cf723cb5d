// Per-stage costs: explicit per-rank costs and the analytical transformer and MLP models whose
// formulas (and papers) are listed in costs.h; the profile's table is in profile_costs.cpp. Derived
// values are computed in double and checked into int64 (cost_checks.h).
#include "stagecraft/sim/costs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cost_checks.h"
#include "profile_costs.h"
#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::sim {

using stagecraft::InputError;
using detail::CheckedBytes;
using detail::CheckedOpNs;
using detail::KeysOf;

namespace {

// The balanced partition's exact search (PartitionLayers): its table and its steps.
constexpr double kMaxPartitionCells = double{1 << 25};
constexpr double kMaxPartitionSteps = 2147483648.0;  // 2^31

// PartitionLayers' search takes about k (n - k + 1)^2 / 2 steps over a (k + 1) x (n + 1) table.
void CheckPartitionSize(int n, int k, std::string_view what) {
  const double span = n - k + 1.0;
  if ((k + 1.0) * (n + 1.0) > kMaxPartitionCells || k * span * span / 2 > kMaxPartitionSteps) {
    throw InputError(fmt::format("{} has {} layers over {} stages: too many for pipeline.partition: balanced (an "
                                 "exact search of every split, at most 2^25 layers x stages and 2^31 steps); use "
                                 "partition: even",
                                 what, n, k));
  }
}

}  // namespace

std::vector<int> SplitLayers(int layers, int stages, std::string_view what) {
  if (layers < stages) {
    throw InputError(fmt::format("{} has {} layers; it cannot be split over {} stages", what, layers, stages));
  }
  std::vector<int> counts(stages, layers / stages);
  for (int s = 0; s < layers % stages; ++s) ++counts[s];
  return counts;
}

std::vector<int> PartitionLayers(const std::vector<double>& layer_cost, const std::vector<double>& stage_extra,
                                 std::string_view what) {
  const int n = static_cast<int>(layer_cost.size());
  const int k = static_cast<int>(stage_extra.size());
  if (n < k) throw InputError(fmt::format("{} has {} layers; it cannot be split over {} stages", what, n, k));
  if (n == k) return std::vector<int>(k, 1);
  CheckPartitionSize(n, k, what);
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + layer_cost[i];
  const std::vector<int> even = SplitLayers(n, k, what);
  // best[s][i]: the smallest possible max stage cost when stages s.. hold layers i..n-1.
  const double kInf = HUGE_VAL;
  std::vector<std::vector<double>> best(k + 1, std::vector<double>(n + 1, kInf));
  best[k][n] = 0;
  for (int st = k - 1; st >= 0; --st) {
    for (int i = n - (k - st); i >= st; --i) {
      for (int j = i + 1; j <= n - (k - st - 1); ++j) {
        const double cost = std::max(prefix[j] - prefix[i] + stage_extra[st], best[st + 1][j]);
        best[st][i] = std::min(best[st][i], cost);
      }
    }
  }
  // Walk forward; among the split points that keep the optimum (to rounding), take the one
  // closest to the even split's boundary.
  std::vector<int> counts;
  int i = 0, even_end = 0;
  for (int st = 0; st < k; ++st) {
    even_end += even[st];
    int pick = -1;
    for (int j = i + 1; j <= n - (k - st - 1); ++j) {
      const double cost = std::max(prefix[j] - prefix[i] + stage_extra[st], best[st + 1][j]);
      if (cost > best[0][0] * (1 + 1e-12) + 1e-9) continue;
      if (pick < 0 || std::abs(j - even_end) < std::abs(pick - even_end)) pick = j;
    }
    SC_CHECK(pick > i, "a balanced split exists");
    counts.push_back(pick - i);
    i = pick;
  }
  return counts;
}

namespace {

// Optimizer state bytes per parameter (see costs.h).
int64_t OptimizerBytesPerParam(const std::string& optimizer, double momentum, int dtype_bytes) {
  const int64_t master = dtype_bytes < 4 ? 4 : 0;
  if (optimizer == "adam") return master + 8;
  return master + (momentum > 0 ? 4 : 0);
}

// Value / v for chunk c of v, the remainder spread one unit each over the lowest chunks.
int64_t Share(int64_t value, int v, int c) { return value / v + (c < value % v ? 1 : 0); }

CostTable ExplicitTable(const Scenario& sc, int stages) {
  const ExplicitCosts& c = *sc.model.costs;
  const int ranks = sc.pipeline.ranks;
  const int v = stages / ranks;
  CostTable table;
  table.source = "explicit";
  table.p2p_latency_ns = c.p2p_latency_ns;
  for (int s = 0; s < stages; ++s) {
    const int r = s % ranks;
    const int chunk = s / ranks;
    StageCost cost;
    cost.forward_ns = Share(c.forward_ns[r], v, chunk);
    cost.backward_input_ns = Share(c.backward_input_ns[r], v, chunk);
    cost.backward_weight_ns = Share(c.backward_weight_ns[r], v, chunk);
    cost.activation_bytes = Share(c.activation_bytes[r], v, chunk);
    cost.weight_bytes = Share(c.weight_bytes[r], v, chunk);
    cost.grad_bytes = cost.weight_bytes;
    cost.send_bytes = c.send_bytes;
    table.stages.push_back(cost);
  }
  // Each value is within its range; only a full backward adds two of them.
  detail::CheckComposedOps(table, sc, [ranks](int stage) {
    return fmt::format("model.costs: backward_input + backward_weight of rank {}", stage % ranks);
  });
  return table;
}

int DtypeBytes(const std::string& dtype) { return dtype == "fp32" ? 4 : 2; }

// "on topology.device: peak 1e+06 FLOPS x efficiency 1", for the analytical models' errors.
std::string DeviceKeys(const DeviceSpec& device) {
  return fmt::format("on topology.device: peak {:g} FLOPS x efficiency {:g}", device.peak_flops, device.efficiency);
}

// The transformer's analytical costs of one stage of `layers` layers (formulas in costs.h).
StageCost TransformerStage(const Scenario& sc, int st, int stages, double layers, const KeysOf& keys) {
  const TransformerSpec& t = *sc.model.transformer;
  const DeviceSpec& device = sc.topology.device;
  const double b = sc.pipeline.microbatch_size, s = t.seq, h = t.hidden, a = t.heads, V = t.vocab;
  const double d = DtypeBytes(t.dtype);
  const double rate = device.peak_flops * device.efficiency;
  const double layer_flops = 24 * b * s * h * h + 4 * b * s * s * h;
  const double layer_params = 12 * h * h + 13 * h;
  // Korthikanti Eq. 2 in 16-bit bytes, scaled to the dtype.
  const double layer_activation = (34 * s * b * h + 5 * a * s * s * b) * d / 2;
  const std::string optimizer = sc.has_training ? sc.training.optimizer : "adam";
  const double optimizer_per_param =
      static_cast<double>(OptimizerBytesPerParam(optimizer, sc.training.momentum, static_cast<int>(d)));
  const bool last = st == stages - 1;
  const bool recompute = sc.pipeline.recompute;
  const double forward = layers * layer_flops + (last ? 2 * b * s * h * V : 0.0);  // + the LM head
  const double repeat = recompute ? layers * layer_flops : 0.0;
  // The embeddings (tokens and positions) on the first stage; the final LayerNorm and the LM
  // head, untied (its own copy on the last rank, as Megatron-LM's pipeline keeps), on the last.
  const double params = layers * layer_params + (st == 0 ? (V + s) * h : 0) + (last ? V * h + 2 * h : 0);
  const auto ns = [&](double flops, std::string_view what) {
    return CheckedOpNs(flops / rate * 1e9, sc, {what, st}, keys);
  };
  const auto bytes = [&](double value, std::string_view what) { return CheckedBytes(value, sc, {what, st}, keys); };
  StageCost cost;
  cost.forward_ns = ns(forward, "a forward");
  cost.backward_input_ns = ns(forward + repeat, "a backward for inputs");
  cost.backward_weight_ns = ns(forward, "a backward for weights");
  // The logits' gradient is kept from F to the backward on the last stage.
  cost.activation_bytes = bytes((recompute ? layers * s * b * h * d : layers * layer_activation) +
                                    (last ? s * b * V * d : 0.0),
                                "the activations per microbatch");
  if (recompute) cost.recompute_bytes = bytes(layer_activation, "the recomputed activations");  // one layer at a time
  cost.w_stash_bytes = bytes(layers * 7 * s * b * h * d, "the W stash per microbatch");
  cost.weight_bytes = bytes(params * d, "the weights");
  cost.grad_bytes = cost.weight_bytes;
  cost.optimizer_bytes = bytes(params * optimizer_per_param, "the optimizer state");
  cost.send_bytes = bytes(s * b * h * d, "the activation sent per microbatch");
  return cost;
}

CostTable TransformerTable(const Scenario& sc, int stages) {
  const TransformerSpec& t = *sc.model.transformer;
  CostTable table;
  table.source = "transformer";
  const std::vector<int> layers = StageLayers(sc, stages);
  const KeysOf keys = [&](int st) {
    return fmt::format("model.transformer: {} of hidden {}, heads {}, seq {}{}, microbatch {}, {}",
                       detail::Count(layers[st], "layer"),
                       t.hidden, t.heads, t.seq, st == stages - 1 ? fmt::format(", vocab {}", t.vocab) : "",
                       sc.pipeline.microbatch_size, DeviceKeys(sc.topology.device));
  };
  for (int st = 0; st < stages; ++st) table.stages.push_back(TransformerStage(sc, st, stages, layers[st], keys));
  detail::CheckComposedOps(table, sc, keys);
  return table;
}

CostTable MlpTable(const Scenario& sc, int stages) {
  const MlpSpec& m = *sc.model.mlp;
  const DeviceSpec& device = sc.topology.device;
  const double b = sc.pipeline.microbatch_size, h = m.hidden;
  constexpr double kFloat = 4;
  const double rate = device.peak_flops * device.efficiency;
  const double layer_flops = 2.0 * b * h * h;
  const std::string optimizer = sc.has_training ? sc.training.optimizer : "sgd";
  const double optimizer_per_param =
      static_cast<double>(OptimizerBytesPerParam(optimizer, sc.training.momentum, static_cast<int>(kFloat)));

  CostTable table;
  table.source = "mlp";
  const std::vector<int> layers = StageLayers(sc, stages);
  const KeysOf keys = [&](int st) {
    return fmt::format("model.mlp: {} of hidden {}, microbatch {}, {}", detail::Count(layers[st], "layer"), m.hidden,
                       sc.pipeline.microbatch_size, DeviceKeys(device));
  };
  for (int st = 0; st < stages; ++st) {
    const double n = layers[st];
    const double params = n * (h * h + h);
    const auto ns = [&](double flops, std::string_view what) {
      return CheckedOpNs(flops / rate * 1e9, sc, {what, st}, keys);
    };
    const auto bytes = [&](double value, std::string_view what) { return CheckedBytes(value, sc, {what, st}, keys); };
    StageCost cost;
    cost.forward_ns = ns(n * layer_flops, "a forward");
    cost.backward_input_ns = ns((sc.pipeline.recompute ? 2 : 1) * n * layer_flops, "a backward for inputs");
    cost.backward_weight_ns = ns(n * layer_flops, "a backward for weights");
    // Recomputing, a stage keeps only its input and rebuilds every layer's during the backward;
    // the last stage keeps the loss gradient from F to its backward.
    cost.activation_bytes = bytes((sc.pipeline.recompute ? b * h * kFloat : n * 2 * b * h * kFloat) +
                                      (st == stages - 1 ? b * h * kFloat : 0.0),
                                  "the activations per microbatch");
    if (sc.pipeline.recompute) cost.recompute_bytes = bytes(n * 2 * b * h * kFloat, "the recomputed activations");
    cost.w_stash_bytes = bytes(n * 2 * b * h * kFloat, "the W stash per microbatch");  // each layer's input and dz
    cost.weight_bytes = bytes(params * kFloat, "the weights");
    cost.grad_bytes = cost.weight_bytes;
    cost.optimizer_bytes = bytes(params * optimizer_per_param, "the optimizer state");
    cost.send_bytes = bytes(b * h * kFloat, "the activation sent per microbatch");
    table.stages.push_back(cost);
  }
  detail::CheckComposedOps(table, sc, keys);
  return table;
}

}  // namespace

std::vector<int> StageLayers(const Scenario& sc, int stages) {
  const ModelSpec& m = sc.model;
  if (!m.profile_path.empty()) return detail::ProfileStageLayers(sc, detail::ReadProfile(m.profile_path, &sc), stages);
  const bool balanced = sc.pipeline.partition == "balanced";
  if (m.transformer) {
    const TransformerSpec& t = *m.transformer;
    if (!balanced) return SplitLayers(t.layers, stages, "model.transformer");
    // In units of one layer's forward FLOPs, 24bsh²(1 + s/6h); the LM head adds 2bshV.
    const double h = t.hidden, s = t.seq, V = t.vocab;
    std::vector<double> extra(stages, 0.0);
    extra.back() = 2 * V / (24 * h * (1 + s / (6 * h)));
    return PartitionLayers(std::vector<double>(t.layers, 1.0), extra, "model.transformer");
  }
  if (m.mlp) {
    if (!balanced) return SplitLayers(m.mlp->layers, stages, "model.mlp");
    return PartitionLayers(std::vector<double>(m.mlp->layers, 1.0), std::vector<double>(stages, 0.0), "model.mlp");
  }
  throw InputError(fmt::format("{}: the model has no layers to split over stages (explicit costs are per rank)",
                               sc.path));
}

CostTable BuildCosts(const Scenario& scenario, int stages) {
  const int ranks = scenario.pipeline.ranks;
  SC_CHECK(ranks >= 1 && stages >= ranks && stages % ranks == 0,
           fmt::format("{} stages is not a multiple of {} ranks", stages, ranks));
  if (!scenario.model.profile_path.empty()) {
    // Without a schedule: loop placement, once-per-step updates.
    return detail::ProfileTable(scenario, detail::ReadProfile(scenario.model.profile_path, &scenario),
                                schedules::Shape{ranks, stages / ranks, schedules::Placement::kLoop}, false, true);
  }
  if (scenario.model.costs) return ExplicitTable(scenario, stages);
  if (scenario.model.transformer) return TransformerTable(scenario, stages);
  if (scenario.model.mlp) return MlpTable(scenario, stages);
  throw InputError(fmt::format("{}: model has no costs, profile, transformer or mlp", scenario.path));
}

bool UpdatesEveryMicrobatch(const schedules::Schedule& schedule) {
  std::vector<int> steps(static_cast<size_t>(schedule.stages()) * std::max(schedule.steps, 1), 0);
  for (const auto& ops : schedule.ops) {
    for (const schedules::Op& op : ops) {
      if (op.kind != schedules::OpKind::kStep || op.step < 0 || op.step >= std::max(schedule.steps, 1)) continue;
      if (++steps[static_cast<size_t>(op.step) * schedule.stages() + op.stage] > 1) return true;
    }
  }
  return false;
}

CostTable BuildCosts(const Scenario& scenario, const schedules::Schedule& schedule) {
  if (scenario.model.profile_path.empty()) return BuildCosts(scenario, schedule.stages());
  return detail::ProfileTable(scenario, detail::ReadProfile(scenario.model.profile_path, &scenario), schedule.shape,
                              UpdatesEveryMicrobatch(schedule), true);
}

}  // namespace stagecraft::sim
