// Weight delays per stage (staleness.h).
#include "stagecraft/schedules/staleness.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "stagecraft/schedules/weights.h"

namespace stagecraft::schedules {

std::vector<StageDelay> WeightDelays(const Schedule& s) {
  std::vector<StageDelay> delays(static_cast<size_t>(s.stages()));
  for (int stage = 0; stage < s.stages(); ++stage) delays[static_cast<size_t>(stage)].stage = stage;
  for (const std::vector<Op>& ops : s.ops) {
    std::map<int, std::map<std::pair<int, int>, int>> by_stage;
    for (const Op& op : ops) {
      const bool forward = op.kind == OpKind::kF;
      const bool backward = op.kind == OpKind::kB || op.kind == OpKind::kI || op.kind == OpKind::kW;
      if ((!forward && !backward) || op.stage < 0 || op.stage >= s.stages()) continue;
      StageDelay& d = delays[static_cast<size_t>(op.stage)];
      const int behind = static_cast<int>(UpdateIndex(s, op) - VersionRead(op));
      const std::pair<int, int> unit{op.step, op.microbatch};
      auto& versions = by_stage[op.stage];
      if (forward) {
        d.forward = std::max(d.forward, behind);
        versions[unit] = op.version;
      } else {
        d.backward = std::max(d.backward, behind);
        const auto f = versions.find(unit);
        d.differ = d.differ || (f != versions.end() && f->second != op.version);
      }
    }
  }
  return delays;
}

std::vector<int> CorrectionSpans(const Schedule& s, int rank) {
  const std::vector<Op>& ops = s.ops.at(static_cast<size_t>(rank));
  std::vector<int> spans(ops.size(), 0);
  std::map<std::tuple<int, int, int>, int> forward_version;  // by (stage, step, microbatch)
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const std::tuple<int, int, int> unit{op.stage, op.step, op.microbatch};
    if (op.kind == OpKind::kF) {
      forward_version[unit] = op.version;
    } else if (op.kind == OpKind::kB || op.kind == OpKind::kI) {
      const auto f = forward_version.find(unit);
      if (f == forward_version.end()) continue;
      spans[i] = op.version - f->second;
      forward_version.erase(f);
    }
  }
  return spans;
}

}  // namespace stagecraft::schedules
