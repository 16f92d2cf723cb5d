// FinishRunRecord (run_record.h): the facts a run's timings imply, derived in one place for
// the simulator and the executor.
#include "stagecraft/schedules/run_record.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "stagecraft/base/check.h"
#include "stagecraft/schedules/analysis.h"
#include "stagecraft/schedules/shared_devices.h"

namespace stagecraft::schedules {

void FinishRunRecord(const Schedule& s, const std::vector<int64_t>& rank_memory_bytes, RunRecord* record) {
  SC_CHECK(static_cast<int>(record->ranks.size()) == s.ranks(), "one record per rank");
  SC_CHECK(rank_memory_bytes.empty() || static_cast<int>(rank_memory_bytes.size()) == s.ranks(), "a memory per rank");
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
      if (!RunsOnCompute(kind)) continue;  // posted (a transfer, collective or copy); the rank's compute went on
      ran = i + 1;
      rr.busy_ns += t.end_ns - t.start_ns;
      rr.last_compute_end_ns = std::max(rr.last_compute_end_ns, t.end_ns);
      if (IsForward(kind) && rr.first_f_start_ns < 0) rr.first_f_start_ns = t.start_ns;
      end = std::max(end, t.end_ns);
    }
    rr.peak_inflight = PeakInflight(s.ops[r], ran);
    const int64_t memory = rank_memory_bytes.empty() ? 0 : rank_memory_bytes[static_cast<size_t>(r)];
    rr.oom = memory > 0 && std::max(rr.peak_memory_bytes, rr.device_peak_memory_bytes) > memory;
  }
  record->start_ns = start;
  record->end_ns = end;
}

void SumSharedDeviceMemory(const std::vector<int>& rank_devices, RunRecord* record) {
  const SharedDevices shared = FindSharedDevices(rank_devices, static_cast<int>(record->ranks.size()));
  for (const std::vector<int>& ranks : shared.ranks) {
    // Every sample of the device's ranks in time order; the sum moves by each one's change.
    std::vector<std::pair<int64_t, std::pair<int, int64_t>>> samples;  // (time, (rank, bytes))
    for (const int r : ranks) {
      for (const MemorySample& m : record->ranks[r].memory) samples.push_back({m.time_ns, {r, m.bytes}});
    }
    std::stable_sort(samples.begin(), samples.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::map<int, int64_t> now;  // each rank's bytes
    int64_t sum = 0, peak = 0;
    for (size_t i = 0; i < samples.size(); ++i) {
      const auto& [rank, bytes] = samples[i].second;
      sum += bytes - now[rank];
      now[rank] = bytes;
      // Samples at one time are one moment: the peak is read after the last of them.
      if (i + 1 == samples.size() || samples[i + 1].first != samples[i].first) peak = std::max(peak, sum);
    }
    for (const int r : ranks) {
      record->ranks[r].device = rank_devices[static_cast<size_t>(r)];
      record->ranks[r].device_peak_memory_bytes = peak;
    }
  }
}

}  // namespace stagecraft::schedules
