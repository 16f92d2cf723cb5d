// The runtime's op clock (op_clock.h).
#include "stagecraft/exec/op_clock.h"

#include <algorithm>

namespace stagecraft::exec {

std::vector<bool> ResolvePoints(const std::vector<schedules::Op>& ops, int steps, const std::vector<int>& also_after) {
  std::vector<int> last(static_cast<size_t>(steps), -1);
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    if (schedules::IsCompute(ops[i].kind)) last[ops[i].step] = i;
  }
  for (int t = 0; t < steps && t < static_cast<int>(also_after.size()); ++t) last[t] = std::max(last[t], also_after[t]);
  std::vector<bool> after(ops.size(), false);
  for (const int i : last) {
    if (i >= 0) after[i] = true;
  }
  return after;
}

void OpClock::Resolve(schedules::RankRecord* record) {
  for (const TimedOp& t : timed_) {
    const int64_t start = device_.StampNs(t.start) - start_ns_, end = device_.StampNs(t.end) - start_ns_;
    record->ops[t.op] = {start, end};
  }
  for (const TimedOp& t : marked_) record->ops[t.op].start_ns = device_.StampNs(t.start) - start_ns_;
  timed_.clear();
  marked_.clear();
  device_.ClearStamps();
}

}  // namespace stagecraft::exec
