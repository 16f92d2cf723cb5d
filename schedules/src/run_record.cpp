// FinishRunRecord (run_record.h): the facts a run's timings imply, derived in one place for
// the simulator and the executor.
#include "stagecraft/schedules/run_record.h"

#include <algorithm>

#include "stagecraft/base/check.h"
#include "stagecraft/schedules/analysis.h"

namespace stagecraft::schedules {

void FinishRunRecord(const Schedule& s, int64_t device_memory_bytes, RunRecord* record) {
  SC_CHECK(static_cast<int>(record->ranks.size()) == s.ranks(), "one record per rank");
  bool any = false;
  int64_t start = 0, end = 0;
  for (int r = 0; r < s.ranks(); ++r) {
    RankRecord& rr = record->ranks[r];
    SC_CHECK(rr.ops.size() == s.ops[r].size(), "one timing per op");
    rr.busy_ns = 0;
    rr.first_f_start_ns = -1;
    rr.last_compute_end_ns = 0;
    size_t ran = 0;  // the ops up to the last compute op that ran (receives are posted ahead)
    for (size_t i = 0; i < rr.ops.size(); ++i) {
      const OpTiming& t = rr.ops[i];
      if (t.start_ns < 0) continue;
      start = any ? std::min(start, t.start_ns) : t.start_ns;
      any = true;
      const OpKind kind = s.ops[r][i].kind;
      if (IsComm(kind) || IsCollective(kind)) continue;  // posted; the rank's compute went on
      ran = i + 1;
      rr.busy_ns += t.end_ns - t.start_ns;
      rr.last_compute_end_ns = std::max(rr.last_compute_end_ns, t.end_ns);
      if (kind == OpKind::kF && rr.first_f_start_ns < 0) rr.first_f_start_ns = t.start_ns;
      end = std::max(end, t.end_ns);
    }
    rr.peak_inflight = PeakInflight(s.ops[r], ran);
    rr.oom = device_memory_bytes > 0 &&
             std::max(rr.peak_memory_bytes, rr.device_peak_memory_bytes) > device_memory_bytes;
  }
  record->start_ns = start;
  record->end_ns = end;
}

}  // namespace stagecraft::schedules
