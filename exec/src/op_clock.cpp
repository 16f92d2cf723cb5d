// The runtime's op clock (op_clock.h).
#include "stagecraft/exec/op_clock.h"

#include <algorithm>
#include <array>
#include <string>

#include "stagecraft/exec/poll.h"

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
  // On each stream the stamp queued last marks all the work before it (a copy stream's stamps
  // are reached apart from the compute stream's).
  const std::array<int, 3> latest = last_;
  const auto reached = [&] {
    const auto at = [&](int id) { return id < 0 || device_.clock().Reached(id); };
    return std::all_of(latest.begin(), latest.end(), at) && std::all_of(elsewhere_.begin(), elsewhere_.end(), at);
  };
  // A GPU step takes milliseconds: spin briefly, then sleep at most 200 µs between polls, so the
  // host is back within that of the device reaching the step's end.
  const PollPolicy policy{.deadline_ns = deadline_ns_, .spin_ns = 100'000, .min_sleep_ns = 20'000,
                          .max_sleep_ns = 200'000};
  if (!PollUntil(reached, policy)) {
    throw TimeoutError("the device did not get there within " + SecondsText(deadline_ns_) +
                       ": it is hung, or its queue waits for another rank's work that never came");
  }
  for (const TimedOp& t : timed_) {
    const int64_t start = device_.clock().StampNs(t.start) - start_ns_,
                  end = device_.clock().StampNs(t.end) - start_ns_;
    record->ops[t.op] = {start, end};
  }
  for (const TimedOp& t : marked_) record->ops[t.op].start_ns = device_.clock().StampNs(t.start) - start_ns_;
  for (const TimedOp& t : ended_) record->ops[t.op].end_ns = device_.clock().StampNs(t.end) - start_ns_;
  timed_.clear();
  marked_.clear();
  ended_.clear();
  elsewhere_.clear();
  last_ = {-1, -1, -1};
  device_.clock().ClearStamps();
}

}  // namespace stagecraft::exec
