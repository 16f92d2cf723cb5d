#include "stagecraft/sim/stash.h"

#include <algorithm>

#include "stagecraft/schedules/lifetimes.h"

namespace stagecraft::sim {

using schedules::OpKind;

int StashKindIndex(OpKind kind) { return schedules::IsCompute(kind) ? schedules::CostIndex(kind) : -1; }

std::vector<std::vector<double>> StashDepths(const schedules::Schedule& s) {
  std::vector<std::vector<double>> out(static_cast<size_t>(s.ranks()));
  const double unit = 1.0 / s.shape.chunks;
  for (int r = 0; r < s.ranks(); ++r) {
    const schedules::ActivationLifetimes lives(s.ops[r]);
    for (size_t i = 0; i < s.ops[r].size(); ++i) out[r].push_back(lives.HeldBefore(i) * unit);
  }
  return out;
}

double StashFactor(const StashScale& scale, OpKind kind, double depth) {
  const int index = StashKindIndex(kind);
  if (index < 0) return 1.0;
  const StashSlope* k = &(scale.*kStashFields[index].second);
  return std::min(1.0 + k->slope * std::max(0.0, std::min(depth, scale.deep) - k->at), 2.0);
}

std::vector<std::array<double, 4>> MeanStashFactors(const schedules::Schedule& s,
                                                    const std::vector<StashScale>& rank_stash) {
  std::vector<std::array<double, 4>> sum(static_cast<size_t>(s.stages()), {0, 0, 0, 0});
  std::vector<std::array<int, 4>> count(static_cast<size_t>(s.stages()), {0, 0, 0, 0});
  if (!rank_stash.empty()) {
    const std::vector<std::vector<double>> depths = StashDepths(s);
    for (int r = 0; r < s.ranks() && r < static_cast<int>(rank_stash.size()); ++r) {
      for (size_t i = 0; i < s.ops[r].size(); ++i) {
        const schedules::Op& op = s.ops[r][i];
        const int k = StashKindIndex(op.kind);
        if (k < 0) continue;
        sum[op.stage][k] += StashFactor(rank_stash[r], op.kind, depths[r][i]);
        ++count[op.stage][k];
      }
    }
  }
  std::vector<std::array<double, 4>> out(sum.size(), {1, 1, 1, 1});
  for (size_t st = 0; st < sum.size(); ++st) {
    for (int k = 0; k < 4; ++k) {
      if (count[st][k] > 0) out[st][k] = sum[st][k] / count[st][k];
    }
  }
  return out;
}

}  // namespace stagecraft::sim
