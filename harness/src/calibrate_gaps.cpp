// What a run's gaps and a shared device's turns say (calibrate.h): each op's own time without
// the turns of the other ranks of its device, the time another rank held it, the runtime's
// overhead per op and the transfers a receiver waited through.
#include <algorithm>
#include <utility>
#include <vector>

#include "stagecraft/harness/calibrate.h"
#include "stagecraft/schedules/bubble_split.h"
#include "stagecraft/schedules/shared_devices.h"

namespace stagecraft::harness {
namespace {

// Whether a timed op ran on its rank's device: a compute op or STEP that took time. These are
// what a shared device's ranks split (WithoutSharing) and hold it for (HeldByOthers).
bool RanOnDevice(schedules::OpKind kind, const schedules::OpTiming& t) {
  return schedules::RunsOnCompute(kind) && t.start_ns >= 0 && t.end_ns > t.start_ns;
}

// Each rank's overhead (the bubble split's), less what its device spent on other ranks then.
std::vector<int64_t> OverheadByRank(const schedules::Schedule& s, const schedules::RunRecord& record,
                                    const std::vector<int>& rank_devices) {
  const HeldByOthers held(s, record, rank_devices);
  const std::vector<schedules::RankSplit> split = schedules::SplitBubbles(s, record, !held.empty());
  std::vector<int64_t> out;
  for (int r = 0; r < s.ranks(); ++r) {
    int64_t overhead = split[static_cast<size_t>(r)].overhead_ns;
    for (const schedules::GapInterval& gap : split[static_cast<size_t>(r)].gaps) {
      if (gap.cause == schedules::GapCause::kOverhead) overhead -= held.In(r, gap.start_ns, gap.end_ns);
    }
    out.push_back(overhead);
  }
  return out;
}

}  // namespace

schedules::RunRecord WithoutSharing(const schedules::Schedule& s, const schedules::RunRecord& record,
                                    const std::vector<int>& rank_devices) {
  schedules::RunRecord out = record;
  const schedules::SharedDevices shared = schedules::FindSharedDevices(rank_devices, s.ranks());
  for (const std::vector<int>& ranks : shared.ranks) {
    // The device's ops as (rank, index); the times where the count running changes.
    std::vector<std::pair<int, size_t>> ops;
    std::vector<std::pair<int64_t, int>> changes;  // (time, +1 start / -1 end)
    for (const int r : ranks) {
      if (r >= static_cast<int>(record.ranks.size())) continue;
      for (size_t i = 0; i < s.ops[r].size() && i < record.ranks[r].ops.size(); ++i) {
        const schedules::OpTiming& t = record.ranks[r].ops[i];
        if (!RanOnDevice(s.ops[r][i].kind, t)) continue;
        ops.emplace_back(r, i);
        changes.emplace_back(t.start_ns, +1);
        changes.emplace_back(t.end_ns, -1);
      }
    }
    std::sort(changes.begin(), changes.end());
    // The device time handed out up to each change: work(t) = integral of 1 / n over [first, t],
    // n the ops running (0 running: nothing handed out).
    std::vector<int64_t> at;
    std::vector<double> work;
    int running = 0;
    double handed = 0;
    for (size_t c = 0; c < changes.size(); ++c) {
      if (c > 0 && running > 0) handed += static_cast<double>(changes[c].first - changes[c - 1].first) / running;
      running += changes[c].second;
      if (!at.empty() && at.back() == changes[c].first) {
        work.back() = handed;
      } else {
        at.push_back(changes[c].first);
        work.push_back(handed);
      }
    }
    const auto work_at = [&](int64_t t) {
      return work[static_cast<size_t>(std::lower_bound(at.begin(), at.end(), t) - at.begin())];
    };
    for (const auto& [r, i] : ops) {
      schedules::OpTiming& t = out.ranks[r].ops[i];
      t.end_ns = t.start_ns + std::llround(work_at(t.end_ns) - work_at(t.start_ns));
    }
  }
  return out;
}

HeldByOthers::HeldByOthers(const schedules::Schedule& s, const schedules::RunRecord& record,
                           const std::vector<int>& rank_devices)
    : spans_(static_cast<size_t>(s.ranks())) {
  const schedules::SharedDevices shared = schedules::FindSharedDevices(rank_devices, s.ranks());
  for (const std::vector<int>& ranks : shared.ranks) {
    for (const int r : ranks) {
      std::vector<std::pair<int64_t, int64_t>> spans;
      for (const int other : ranks) {
        if (other == r || other >= static_cast<int>(record.ranks.size())) continue;
        for (size_t i = 0; i < s.ops[other].size() && i < record.ranks[other].ops.size(); ++i) {
          const schedules::OpTiming& t = record.ranks[other].ops[i];
          if (RanOnDevice(s.ops[other][i].kind, t)) spans.emplace_back(t.start_ns, t.end_ns);
        }
      }
      std::sort(spans.begin(), spans.end());
      std::vector<std::pair<int64_t, int64_t>>& merged = spans_[static_cast<size_t>(r)];
      for (const auto& span : spans) {
        if (!merged.empty() && span.first <= merged.back().second) {
          merged.back().second = std::max(merged.back().second, span.second);
        } else {
          merged.push_back(span);
        }
      }
      empty_ = empty_ && merged.empty();
    }
  }
}

int64_t HeldByOthers::In(int rank, int64_t start_ns, int64_t end_ns) const {
  if (rank < 0 || rank >= static_cast<int>(spans_.size()) || end_ns <= start_ns) return 0;
  const auto& spans = spans_[static_cast<size_t>(rank)];
  // The first span that ends after start_ns.
  auto it = std::upper_bound(spans.begin(), spans.end(), start_ns,
                             [](int64_t t, const std::pair<int64_t, int64_t>& span) { return t < span.second; });
  int64_t held = 0;
  for (; it != spans.end() && it->first < end_ns; ++it) held += std::min(end_ns, it->second) - std::max(start_ns, it->first);
  return held;
}

std::vector<int64_t> WaitedTransfers(const schedules::Schedule& s, const schedules::RunRecord& record,
                                     const std::vector<int>& rank_devices) {
  const HeldByOthers held(s, record, rank_devices);
  std::vector<int64_t> out;
  const std::vector<schedules::RankSplit> splits = schedules::SplitBubbles(s, record, true);
  for (int r = 0; r < static_cast<int>(splits.size()); ++r) {
    const std::vector<schedules::GapInterval>& gaps = splits[static_cast<size_t>(r)].gaps;
    for (size_t g = 1; g < gaps.size(); ++g) {
      const schedules::GapInterval& wait = gaps[g - 1];
      const schedules::GapInterval& transfer = gaps[g];
      if (wait.cause == schedules::GapCause::kWait && transfer.cause == schedules::GapCause::kTransfer &&
          wait.end_ns == transfer.start_ns) {
        out.push_back(transfer.end_ns - transfer.start_ns - held.In(r, transfer.start_ns, transfer.end_ns));
      }
    }
  }
  return out;
}

OpOverheads OverheadsPerOp(const schedules::Schedule& s, const schedules::RunRecord& record,
                           const std::vector<int>& rank_devices) {
  const std::vector<int64_t> overhead = OverheadByRank(s, record, rank_devices);  // the bubbles split once
  OpOverheads out;
  double sum = 0, all_ops = 0;
  for (int r = 0; r < s.ranks(); ++r) {
    const double rank_overhead = static_cast<double>(overhead[static_cast<size_t>(r)]);
    const double ops = static_cast<double>(s.ops[r].size());
    out.by_rank.push_back(ops > 0 ? std::llround(rank_overhead / ops) : 0);
    sum += rank_overhead, all_ops += ops;
  }
  out.per_op = all_ops > 0 ? std::llround(sum / all_ops) : 0;
  return out;
}

std::vector<int64_t> OverheadPerOpByRank(const schedules::Schedule& s, const schedules::RunRecord& record,
                                         const std::vector<int>& rank_devices) {
  return OverheadsPerOp(s, record, rank_devices).by_rank;
}

int64_t OverheadPerOp(const schedules::Schedule& s, const schedules::RunRecord& record,
                      const std::vector<int>& rank_devices) {
  return OverheadsPerOp(s, record, rank_devices).per_op;
}

}  // namespace stagecraft::harness
