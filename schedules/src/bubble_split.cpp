// The bubble split (bubble_split.h): gaps on each rank's compute stream classified by the
// timing of the transfer that fed the op after the gap, or of the collective a STEP waited for.
#include "stagecraft/schedules/bubble_split.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "stagecraft/base/stop.h"
#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/tensors.h"

namespace stagecraft::schedules {
namespace {

struct TransferTimes {
  int64_t send_start_ns = -1, recv_post_ns = -1, arrival_ns = -1;
};

// What identifies an edge whatever the schedule's size.
struct EdgeId {
  int32_t to_stage, step, microbatch;
  Flow flow;
  friend bool operator==(const EdgeId&, const EdgeId&) = default;
};
struct EdgeIdHash {
  size_t operator()(const EdgeId& e) const {
    const uint64_t a = static_cast<uint64_t>(static_cast<uint32_t>(e.to_stage)) << 32 | static_cast<uint32_t>(e.step);
    const uint64_t b = static_cast<uint64_t>(static_cast<uint32_t>(e.microbatch)) << 1 | static_cast<uint64_t>(e.flow);
    return std::hash<uint64_t>{}(a * 0x9E3779B97F4A7C15ULL ^ b);
  }
};
EdgeId Id(const Edge& e) { return {e.to_stage, e.step, e.microbatch, e.flow}; }

using TransferMap = std::unordered_map<EdgeId, TransferTimes, EdgeIdHash>;

void Add(RankSplit* split, bool keep, GapCause cause, int64_t from, int64_t to) {
  if (to <= from) return;
  const int64_t d = to - from;
  switch (cause) {
    case GapCause::kWait: split->wait_ns += d; break;
    case GapCause::kTransfer: split->transfer_ns += d; break;
    case GapCause::kCollective: split->collective_ns += d; break;
    case GapCause::kOverhead: split->overhead_ns += d; break;
    case GapCause::kIdle: split->idle_ns += d; break;
    case GapCause::kOffloadWait: split->offload_wait_ns += d; break;
  }
  if (keep) split->gaps.push_back({from, to, cause});
}

// Every transfer's times, by the edge it carries.
TransferMap Transfers(const Shape& shape, const std::vector<std::vector<TimedOp>>& ranks, StopCheck& check) {
  TransferMap transfers;
  for (const auto& ops : ranks) {
    for (const TimedOp& t : ops) {
      check();
      if (!IsComm(t.op.kind)) continue;
      const auto edge = CommEdge(shape, t.op);
      if (!edge) continue;
      TransferTimes& x = transfers[Id(*edge)];
      if (IsSend(t.op.kind)) {
        x.send_start_ns = t.start_ns;
      } else {
        x.recv_post_ns = t.start_ns;
        x.arrival_ns = t.end_ns;
      }
    }
  }
  return transfers;
}

// When each REDUCE_GRAD of one rank that ran completed, by (stage, version): the STEP of that
// stage producing that version waits for it.
using CollectiveEnds = std::map<std::pair<int32_t, int32_t>, int64_t>;
CollectiveEnds ReduceGradEnds(const std::vector<TimedOp>& ops) {
  CollectiveEnds ends;
  for (const TimedOp& t : ops) {
    if (ReducesGradients(t.op.kind) && t.start_ns >= 0) ends[{t.op.stage, t.op.version}] = t.end_ns;
  }
  return ends;
}

// Splits the gap [free_ns, t.start_ns) before compute op `t`: collective while a STEP's
// REDUCE_GRAD ran or the ALL_TO_ALLs before it in the list did (until `a2a_end_ns`, -1: none), offload wait while a RELOAD it reads from (`reload_end_ns`, -1: none) ran,
// then wait until its input's transfer started, transfer until it arrived, overhead after.
void SplitGap(const Shape& shape, const TransferMap& transfers, const CollectiveEnds& collectives, const TimedOp& t,
              int64_t free_ns, int64_t reload_end_ns, int64_t a2a_end_ns, bool keep, RankSplit* split) {
  int64_t from = free_ns;
  if (a2a_end_ns >= 0) {
    from = std::clamp(a2a_end_ns, free_ns, t.start_ns);
    Add(split, keep, GapCause::kCollective, free_ns, from);
  }
  if (ProducesVersion(t.op.kind)) {
    const Op reduce = ReduceGradOf(t.op);
    if (const auto it = collectives.find({reduce.stage, reduce.version}); it != collectives.end()) {
      const int64_t until = std::clamp(it->second, from, t.start_ns);
      Add(split, keep, GapCause::kCollective, from, until);
      from = until;
    }
  }
  if (reload_end_ns >= 0) {
    const int64_t until = std::clamp(reload_end_ns, from, t.start_ns);
    Add(split, keep, GapCause::kOffloadWait, from, until);
    from = until;
  }
  int64_t wait_until = from, arrival = from;
  if (const auto edge = InputEdge(shape, t.op); edge && edge->CrossesRanks()) {
    if (const auto it = transfers.find(Id(*edge)); it != transfers.end() && it->second.arrival_ns >= 0) {
      const TransferTimes& x = it->second;
      wait_until = std::clamp(std::max(x.send_start_ns, x.recv_post_ns), from, t.start_ns);
      arrival = std::clamp(x.arrival_ns, wait_until, t.start_ns);
    }
  }
  Add(split, keep, GapCause::kWait, from, wait_until);
  Add(split, keep, GapCause::kTransfer, wait_until, arrival);
  Add(split, keep, GapCause::kOverhead, arrival, t.start_ns);
}

// CopyWaits of one rank's timed list; empty without copies.
std::vector<std::vector<int32_t>> CopyWaitsOf(const std::vector<TimedOp>& ops) {
  if (std::none_of(ops.begin(), ops.end(), [](const TimedOp& t) { return IsCopy(t.op.kind); })) return {};
  std::vector<Op> list;
  list.reserve(ops.size());
  for (const TimedOp& t : ops) list.push_back(t.op);
  return CopyWaits(list);
}

}  // namespace

std::vector<RankSplit> SplitBubbles(const Shape& shape, const std::vector<std::vector<TimedOp>>& ranks,
                                    int64_t run_start_ns, int64_t run_end_ns, bool keep_gaps,
                                    const std::atomic<bool>* stop) {
  StopCheck check(stop);
  const TransferMap transfers = Transfers(shape, ranks, check);
  std::vector<RankSplit> out(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    RankSplit& split = out[r];
    const CollectiveEnds collectives = ReduceGradEnds(ranks[r]);
    const std::vector<std::vector<int32_t>> copy_waits = CopyWaitsOf(ranks[r]);
    int64_t free_ns = -1;  // end of the previous compute op; -1 before the first
    int64_t a2a_end = -1;  // of the ALL_TO_ALLs since it; -1: none
    for (size_t i = 0; i < ranks[r].size(); ++i) {
      const TimedOp& t = ranks[r][i];
      check();
      if (IsAllToAll(t.op.kind) && t.start_ns >= 0) a2a_end = std::max(a2a_end, t.end_ns);
      if (!RunsOnCompute(t.op.kind)) continue;
      if (t.start_ns < 0) continue;  // not run (a failed rank's record)
      if (free_ns < 0) {
        Add(&split, keep_gaps, GapCause::kIdle, run_start_ns, t.start_ns);
      } else if (t.start_ns > free_ns) {
        int64_t reload_end = -1;
        if (!copy_waits.empty()) {
          for (const int32_t c : copy_waits[i]) reload_end = std::max(reload_end, ranks[r][c].end_ns);
        }
        SplitGap(shape, transfers, collectives, t, free_ns, reload_end, a2a_end, keep_gaps, &split);
      }
      a2a_end = -1;
      split.compute_ns += t.end_ns - t.start_ns;
      free_ns = std::max(free_ns, t.end_ns);
    }
    Add(&split, keep_gaps, GapCause::kIdle, free_ns < 0 ? run_start_ns : free_ns, run_end_ns);
  }
  return out;
}

std::vector<RankSplit> SplitBubbles(const Schedule& s, const RunRecord& record, bool keep_gaps,
                                    const std::atomic<bool>* stop) {
  std::vector<std::vector<TimedOp>> ranks(s.ranks());
  for (int r = 0; r < s.ranks(); ++r) {
    ThrowIfStopped(stop);
    const auto& ops = s.ops[r];
    const auto& timing = record.ranks[r].ops;
    ranks[r].reserve(ops.size());
    for (size_t i = 0; i < ops.size() && i < timing.size(); ++i) {
      ranks[r].push_back({ops[i], timing[i].start_ns, timing[i].end_ns});
    }
  }
  return SplitBubbles(s.shape, ranks, record.start_ns, record.end_ns, keep_gaps, stop);
}

std::vector<RankSplit> SplitBubbles(const Trace& trace, bool keep_gaps) {
  int ranks = 0;
  int64_t start = 0, end = 0;
  bool any = false;
  for (const TraceOp& t : trace.ops) {
    if (t.rank < 0) continue;
    ranks = std::max(ranks, t.rank + 1);
    start = any ? std::min(start, t.start_ns) : t.start_ns;
    any = true;
    if (t.stream == Stream::kCompute) end = std::max(end, t.start_ns + t.duration_ns);
  }
  std::vector<std::vector<const TraceOp*>> by_rank(ranks);
  for (const TraceOp& t : trace.ops) {
    if (t.rank >= 0) by_rank[t.rank].push_back(&t);
  }
  std::vector<std::vector<TimedOp>> timed(ranks);
  for (int r = 0; r < ranks; ++r) {
    std::stable_sort(by_rank[r].begin(), by_rank[r].end(),
                     [](const TraceOp* a, const TraceOp* b) { return a->op_index < b->op_index; });
    for (const TraceOp* t : by_rank[r]) timed[r].push_back({t->op, t->start_ns, t->start_ns + t->duration_ns});
  }
  const std::optional<Shape> shape = TraceShape(trace);
  if (!shape) {
    // No edges to match: strip the comm ops, so every gap is overhead.
    for (auto& ops : timed) std::erase_if(ops, [](const TimedOp& t) { return IsComm(t.op.kind); });
  }
  return SplitBubbles(shape.value_or(Shape{std::max(ranks, 1), 1, Placement::kLoop}), timed, start, end, keep_gaps);
}

}  // namespace stagecraft::schedules
