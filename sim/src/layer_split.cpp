// The split of a model's layers over the stages (layer_split.h): even by count, or the exact
// balanced partition by cost, with the weights of the cost model that has the layers.
#include "stagecraft/sim/layer_split.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/sim/cost_models.h"

namespace stagecraft::sim {
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
                                 std::string_view what, const std::vector<double>& stage_scale) {
  const int n = static_cast<int>(layer_cost.size());
  const int k = static_cast<int>(stage_extra.size());
  SC_CHECK(stage_scale.empty() || static_cast<int>(stage_scale.size()) == k, "a scale per stage");
  const auto scale = [&](int st) { return stage_scale.empty() ? 1.0 : stage_scale[static_cast<size_t>(st)]; };
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
        const double cost = std::max((prefix[j] - prefix[i] + stage_extra[st]) * scale(st), best[st + 1][j]);
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
      const double cost = std::max((prefix[j] - prefix[i] + stage_extra[st]) * scale(st), best[st + 1][j]);
      if (cost > best[0][0] * (1 + 1e-12) + 1e-9) continue;
      if (pick < 0 || std::abs(j - even_end) < std::abs(pick - even_end)) pick = j;
    }
    SC_CHECK(pick > i, "a balanced split exists");
    counts.push_back(pick - i);
    i = pick;
  }
  return counts;
}

std::vector<int> SplitWeights(const LayerWeights& weights, int stages, Partition partition,
                              const std::vector<int>& given, const std::vector<double>& stage_scale) {
  if (partition == Partition::kGiven) {
    int64_t sum = 0;
    for (const int n : given) sum += n;
    if (static_cast<int>(given.size()) != stages || sum != weights.layers) {
      throw InputError(fmt::format("pipeline.partition lists {} stage(s) holding {} layer(s); {} has {} layer(s) over {} "
                                   "stage(s) (ranks x chunks)",
                                   given.size(), sum, weights.what, weights.layers, stages));
    }
    return given;
  }
  if (partition == Partition::kEven) return SplitLayers(weights.layers, stages, weights.what);
  SC_CHECK(weights.cost.empty() || static_cast<int>(weights.cost.size()) == weights.layers, "a cost per layer");
  std::vector<double> extra(stages, 0.0);
  if (stages > 0) {
    extra.front() += weights.first_extra;
    extra.back() += weights.last_extra;
  }
  std::vector<double> uniform;
  if (weights.cost.empty()) uniform.assign(weights.layers, 1.0);
  return PartitionLayers(weights.cost.empty() ? uniform : weights.cost, extra, weights.what, stage_scale);
}

std::vector<int> SplitWeights(const LayerWeights& weights, const schedules::Shape& shape, const PipelineSpec& pipeline) {
  const std::vector<int>& given = pipeline.partition_layers;
  const bool per_rank = pipeline.partition == Partition::kGiven && shape.chunks > 1 &&
                        static_cast<int>(given.size()) == shape.ranks;
  std::vector<double> stage_scale;
  if (!weights.rank_scale.empty()) {
    SC_CHECK(static_cast<int>(weights.rank_scale.size()) == shape.ranks, "a scale per rank of the shape");
    for (int st = 0; st < shape.stages(); ++st) stage_scale.push_back(weights.rank_scale[shape.RankOf(st)]);
  }
  if (!per_rank) return SplitWeights(weights, shape.stages(), pipeline.partition, given, stage_scale);
  std::vector<int> stages(static_cast<size_t>(shape.stages()));
  for (int r = 0; r < shape.ranks; ++r) {
    if (given[r] < shape.chunks) {
      throw InputError(fmt::format("pipeline.partition gives rank {} {} layer(s), fewer than its {} stages", r,
                                   given[r], shape.chunks));
    }
    const std::vector<int> split = SplitLayers(given[r], shape.chunks, weights.what);
    for (int c = 0; c < shape.chunks; ++c) stages[shape.StageOf(r, c)] = split[c];
  }
  return SplitWeights(weights, shape.stages(), Partition::kGiven, stages);  // checks the sum
}

std::vector<int> StageLayers(const Scenario& sc, const schedules::Shape& shape) {
  for (const CostModel& model : CostModels()) {
    if (model.layers != nullptr && model.applies(sc)) {
      return SplitWeights(model.layers(sc), shape, sc.pipeline);
    }
  }
  throw InputError(fmt::format("{}: the model has no layers to split over stages (explicit costs are per rank)",
                               sc.path));
}

}  // namespace stagecraft::sim
