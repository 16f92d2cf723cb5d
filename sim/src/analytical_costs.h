// What the analytical cost models (transformer_costs.cpp, mlp_costs.cpp) share: optimizer state
// per parameter and how an error names the device. Internal to sim/src.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "stagecraft/sim/collectives.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::sim::detail {

// Optimizer state bytes per parameter: adam 8 (m, v in fp32), sgd 4 if momentum > 0, plus 4 for
// an fp32 master copy when the tensors are 16-bit (so adam bf16 = 12, adam fp32 = 8, sgd fp32 = 4).
inline int64_t OptimizerBytesPerParam(Optimizer optimizer, double momentum, int dtype_bytes) {
  const int64_t master = dtype_bytes < 4 ? 4 : 0;
  if (optimizer == Optimizer::kAdam) return master + 8;
  return master + (momentum > 0 ? 4 : 0);
}

// The same for a scenario's run: training.optimizer (adam without a training block) at its dtype.
inline int64_t OptimizerBytesPerParam(const Scenario& sc) {
  return OptimizerBytesPerParam(sc.has_training ? sc.training.optimizer : Optimizer::kAdam, sc.training.momentum,
                                DtypeBytes(sc.training.dtype));
}

// The device that prices pipeline rank `rank` in the flat FLOPs models: the slowest (least
// peak x efficiency) of the devices that run it (RankGroups), and the key it is stated at
// ("topology.device", or "topology.groups.N.device").
struct RankDevice {
  const DeviceSpec* device = nullptr;
  std::string key;
};
inline RankDevice SlowestFlatDevice(const Scenario& sc, int rank) {
  RankDevice slowest;
  for (const int g : RankGroups(sc, rank)) {
    const DeviceSpec& d = sc.topology.GroupDevice(g);
    if (slowest.device == nullptr || d.peak_flops * d.efficiency < slowest.device->peak_flops * slowest.device->efficiency) {
      slowest = {&d, sc.topology.grouped() ? fmt::format("topology.groups.{}.device", g) : "topology.device"};
    }
  }
  return slowest;
}

// LayerWeights::rank_scale from `unit_ns(device, rank)`, the time of one unit of a model's
// weights on a device for pipeline rank `rank`: each rank's slowest device's over rank 0's;
// empty without node groups (every rank alike).
template <class UnitNs>
std::vector<double> RankScale(const Scenario& sc, UnitNs unit_ns) {
  if (!sc.topology.grouped()) return {};
  std::vector<double> scale;
  for (int r = 0; r < sc.pipeline.ranks; ++r) {
    double slowest = 0;
    for (const int g : RankGroups(sc, r)) slowest = std::max(slowest, unit_ns(sc.topology.GroupDevice(g), r));
    scale.push_back(slowest);
  }
  const double first = scale.front();
  for (double& s : scale) s /= first;
  return scale;
}
// For the flat FLOPs models: a FLOP at peak x efficiency.
inline std::vector<double> FlatRankScale(const Scenario& sc) {
  return RankScale(sc, [](const DeviceSpec& d, int) { return 1.0 / (d.peak_flops * d.efficiency); });
}

// "on topology.device: peak 1e+06 FLOPS x efficiency 1", for the analytical models' errors.
inline std::string DeviceKeys(const RankDevice& rank) {
  return fmt::format("on {}: peak {:g} FLOPS x efficiency {:g}", rank.key, rank.device->peak_flops,
                     rank.device->efficiency);
}

// The ring over pipeline rank `rank`'s tensor-parallel group (its T devices, pipeline.placement):
// the link its tensor collectives run on (collectives.h).
inline RingLink TensorGroupLink(const Scenario& sc, int rank) {
  std::vector<int> group;
  for (int i = 0; i < sc.pipeline.tensor_parallel; ++i) group.push_back(sc.pipeline.DeviceOf(rank, 0, i));
  return RingLinkOf(sc.topology, group);
}

// Stage `st`'s layers by kind: `count` from layer `first`, `moe` of them MoE layers, `windowed`
// of them with a sliding window.
struct StageLayers {
  int first = 0, count = 0, moe = 0, windowed = 0;
  int dense() const { return count - moe; }
};

// The ring over pipeline rank `rank`'s context-parallel group (its C devices): the link its
// key-value exchanges run on.
inline RingLink ContextGroupLink(const Scenario& sc, int rank) {
  return RingLinkOf(sc.topology, sc.pipeline.ContextGroup(rank));
}

// The tokens of one sequence on one device: seq / C (pipeline.context_parallel).
inline double LocalSeq(const Scenario& sc) {
  return static_cast<double>(sc.model.transformer->seq) / sc.pipeline.context_parallel;
}

// A stage's parameters on one device: what every replica of the stage holds alike, and the
// routed experts, which only the D x C x T / E devices holding the same experts share.
struct StageParams {
  double shared = 0, routed = 0;
};
StageParams ParamsOf(const Scenario& sc, int st, int stages, const StageLayers& layers);
// The devices that hold the same routed experts, D x C x T / E (Megatron-LM's folding of expert
// over data, context and tensor parallelism).
inline double ExpertHolders(const PipelineSpec& p) {
  return static_cast<double>(p.replicas()) * p.tensor_parallel / p.expert_parallel;
}
// One device's shard of `params` sharded over the stage's D x C replicas, the routed experts over
// their holders (ZeRO's optimizer state, ZeRO-2's gradients, ZeRO-3's weights).
inline double ShardOf(const PipelineSpec& p, const StageParams& params) {
  return params.shared / p.replicas() + params.routed / ExpertHolders(p);
}

// The transformer row's table (transformer_costs.cpp): its layer weights (FLOPs), and its
// costs for `layers` layers per stage, which the roofline row (roofline_costs.cpp) keeps for
// every size and re-times (splitting the layers by its own weights: kernel times).
LayerWeights TransformerWeights(const Scenario& sc);
CostTable TransformerTable(const Scenario& sc, const CostQuery& query, const std::vector<int>& layers);

}  // namespace stagecraft::sim::detail
