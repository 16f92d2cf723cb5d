// How a model's layers are split over a pipeline's stages, the same in the simulator and the
// executor: evenly by count, or balanced by cost (pipeline.partition), with the weights of the
// cost model that describes the layers (cost_models.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::sim {

// How a model's layers weigh, for the balanced split (in any one unit).
struct LayerWeights {
  std::string what;          // names the model in errors: "model.mlp", "profile PATH"
  int layers = 0;
  std::vector<double> cost;  // per layer; empty: every layer costs 1
  double first_extra = 0;    // on the first stage beside its layers (the embeddings)
  double last_extra = 0;     // on the last stage beside its layers (the LM head)
  // Per pipeline rank, how long a unit of the weights takes on its device relative to the
  // others (node groups of different devices: topology.groups); empty: alike. The balanced
  // split charges a stage its layers' and extras' weight times its rank's entry.
  std::vector<double> rank_scale;
};

// Layers per stage, even: the first layers % stages stages take one more. Throws InputError
// (naming `what`) when there are fewer layers than stages.
std::vector<int> SplitLayers(int layers, int stages, std::string_view what);

// Balanced split: contiguous layers per stage (each stage at least one) minimizing the most
// expensive stage, where stage s costs its layers' `layer_cost` plus `stage_extra[s]` (e.g.
// the LM head on the last stage), times `stage_scale[s]` (its device's pace; empty: 1). Exact (dynamic programming over split points, O(stages ·
// layers²)); among equally good splits the one closest to even is taken, earlier stages
// taking the extra layer. Throws InputError when there are fewer layers than stages, or when
// the search would pass 2^25 table cells ((stages + 1) x (layers + 1)) or 2^31 steps.
std::vector<int> PartitionLayers(const std::vector<double>& layer_cost, const std::vector<double>& stage_extra,
                                 std::string_view what, const std::vector<double>& stage_scale = {});

// `weights` over `stages`: SplitLayers under Partition::kEven, PartitionLayers under kBalanced
// (each stage scaled by `stage_scale`, empty: alike), `given` as it is under kGiven (InputError
// unless it has `stages` entries summing to the layers).
std::vector<int> SplitWeights(const LayerWeights& weights, int stages, Partition partition,
                              const std::vector<int>& given = {}, const std::vector<double>& stage_scale = {});
// The same under a scenario's pipeline.partition (its kind and, for kGiven, its list) for the
// stages of `shape`. A list with an entry per stage is taken as it is; one with an entry per
// rank (pipeline.ranks entries, for a shape of several stages per rank) gives each rank's
// layers, split over that rank's stages as evenly as they go, its earlier chunks taking the
// remainder: one list then serves the schedules of every stage count (`schedule: all`).
std::vector<int> SplitWeights(const LayerWeights& weights, const schedules::Shape& shape, const PipelineSpec& pipeline);

// The layers per stage a scenario uses for the stages of `shape`: SplitWeights of the first cost
// model of the table that applies and has layers (the profile's measured forward +
// backward_input + backward_weight + step per layer, else the analytical FLOPs with the
// transformer's LM head on the last stage). Throws InputError for a model without layers
// (explicit costs are per rank).
std::vector<int> StageLayers(const Scenario& scenario, const schedules::Shape& shape);
// The same for `stages` stages of one per rank.
inline std::vector<int> StageLayers(const Scenario& scenario, int stages) {
  return StageLayers(scenario, schedules::Shape{stages, 1, schedules::Placement::kLoop});
}

}  // namespace stagecraft::sim
