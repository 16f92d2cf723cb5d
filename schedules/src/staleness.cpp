// Weight delays per stage (staleness.h).
#include "stagecraft/schedules/staleness.h"

#include <algorithm>
#include <map>

#include "stagecraft/schedules/unit_index.h"
#include "stagecraft/schedules/weights.h"

namespace stagecraft::schedules {

std::vector<StageDelay> WeightDelays(const Schedule& s) {
  std::vector<StageDelay> delays(static_cast<size_t>(s.stages()));
  for (int stage = 0; stage < s.stages(); ++stage) delays[static_cast<size_t>(stage)].stage = stage;
  const UnitIndex idx(s);
  std::vector<int> f_version(idx.size(), -1);  // the version each unit's F read
  for (const std::vector<Op>& ops : s.ops) {
    for (const Op& op : ops) {
      const bool forward = IsForward(op.kind);
      if ((!forward && !IsBackward(op.kind)) || !idx.InRange(op)) continue;
      StageDelay& d = delays[static_cast<size_t>(op.stage)];
      const int behind = static_cast<int>(UpdateIndex(s, op) - VersionRead(op));
      int& read = f_version[idx(op)];
      if (forward) {
        d.forward = std::max(d.forward, behind);
        read = op.version;
      } else {
        d.backward = std::max(d.backward, behind);
        d.differ = d.differ || (read >= 0 && read != op.version);
      }
    }
  }
  return delays;
}

std::vector<int> CorrectionSpans(const Schedule& s, int rank) {
  const std::vector<Op>& ops = s.ops.at(static_cast<size_t>(rank));
  std::vector<int> spans(ops.size(), 0);
  const UnitIndex idx(s);
  std::map<size_t, int> forward_version;  // by unit, while its backward is to come
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (!idx.InRange(op)) continue;
    if (IsForward(op.kind)) {
      forward_version[idx(op)] = op.version;
    } else if (Info(op.kind).phase == Phase::kInputBackward) {  // B or I: what reads the weights for dX
      const auto f = forward_version.find(idx(op));
      if (f == forward_version.end()) continue;
      spans[i] = op.version - f->second;
      forward_version.erase(f);
    }
  }
  return spans;
}

}  // namespace stagecraft::schedules
