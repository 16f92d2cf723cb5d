// Lowering: inserts SEND/RECV for cross-rank data dependencies by walking the ranks in lock
// step, the rule torch.distributed.pipelining uses, then optionally posts receives ahead
// (see lower.h).
#include "stagecraft/schedules/lower.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <tuple>
#include <optional>
#include <queue>
#include <vector>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/stop.h"
#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/weights.h"

namespace stagecraft::schedules {
namespace {

class Lowerer {
 public:
  Lowerer(const Schedule& s, const std::atomic<bool>* stop)
      : s_(s), units_(s), produced_(EdgeKeyCount(units_)), stop_(stop) {}

  // The lock-step walk visits the ranks in order, round after round, and places at most one
  // compute op (or overlapped pair) per rank per visit. A visit places nothing unless the rank
  // placed in the round before or an input of it was produced since its last visit, so only
  // those ranks are visited: in this round when the producer's rank comes before theirs, else
  // in the next. The output is the full walk's; the work is O(ops log ranks), not O(rounds x
  // ranks) (a backward crossing 65,536 ranks takes 65,536 rounds).
  Schedule Run() {
    Schedule out = StripComms(s_);
    stop_.Now();
    const int ranks = s_.ranks();
    pending_.assign(ranks, {});
    for (int r = 0; r < ranks; ++r) {
      stop_.Now();
      pending_[r].assign(out.ops[r].begin(), out.ops[r].end());
    }
    for (auto& rank_ops : out.ops) rank_ops.clear();
    out_ = &out;
    for (const auto& q : pending_) left_ += q.size();
    now_.Reset(ranks);
    next_.Reset(ranks);
    for (int r = 0; r < ranks; ++r) now_.Add(r);
    while (left_ > 0) {
      while (!now_.Empty()) {
        stop_();
        visiting_ = now_.Pop();
        if (Visit(visiting_)) next_.Add(visiting_);
      }
      if (next_.Empty() && left_ > 0) ThrowDeadlock();
      std::swap(now_, next_);
    }
    out.lowered = true;
    return out;
  }

 private:
  // Ranks to visit in one round, in increasing order, each once.
  class RankQueue {
   public:
    void Reset(int ranks) {
      queued_.assign(ranks, false);
      heap_ = {};
    }
    void Add(int rank) {
      if (!queued_[rank]) queued_[rank] = true, heap_.push(rank);
    }
    bool Empty() const { return heap_.empty(); }
    int Pop() {
      const int rank = heap_.top();
      heap_.pop();
      queued_[rank] = false;
      return rank;
    }

   private:
    std::vector<bool> queued_;
    std::priority_queue<int, std::vector<int>, std::greater<int>> heap_;
  };

  // One visit of the walk; true when it placed an op.
  bool Visit(int r) {
    auto& q = pending_[r];
    left_ -= FlushSteps(r, &q);
    if (q.empty()) return false;
    // An overlapped pair (Op::overlapped) is placed as one: both inputs there first, then
    // the two ops side by side and their SENDs after them.
    const size_t n = q.size() > 1 && q[1].overlapped ? 2 : 1;
    if (!Ready(q[0]) || (n == 2 && !Ready(q[1]))) return false;
    for (size_t k = 0; k < n; ++k) out_->ops[r].push_back(q[k]);
    for (size_t k = 0; k < n; ++k) Produce(r, q[k]);
    q.erase(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(n));
    left_ -= n;
    left_ -= FlushSteps(r, &q);
    return true;
  }

  [[noreturn]] void ThrowDeadlock() const {
    for (int r = 0; r < s_.ranks(); ++r) {
      if (pending_[r].empty()) continue;
      throw InputError(fmt::format(
          "cannot lower {}: rank {} waits forever at {} (its input is never produced first); "
          "the compute order deadlocks", s_.name, r, ActionString(pending_[r].front(), s_.microbatches)));
    }
    SC_CHECK(false, "a deadlock leaves some op unplaced");
  }

  size_t FlushSteps(int rank, std::deque<Op>* q) {
    size_t n = 0;
    while (!q->empty() && (!IsCompute(q->front().kind) || !units_.InRange(q->front()))) {
      out_->ops[rank].push_back(q->front());
      q->pop_front();
      ++n;
    }
    return n;
  }

  // An op may be placed once its input's producer is: on the same rank it then precedes the
  // op, across ranks the matching RECV was posted when the producer was placed.
  bool Ready(const Op& op) const {
    const std::optional<Edge> in = InputEdge(s_.shape, op);
    return !in || produced_[EdgeKey(units_, *in)];
  }

  // Marks what `op` (just placed on `rank`) produces and posts its SEND and the RECV.
  void Produce(int rank, const Op& op) {
    const std::optional<Edge> out = OutputEdge(s_.shape, op);
    if (!out) return;
    produced_[EdgeKey(units_, *out)] = true;
    if (!out->CrossesRanks()) return;
    out_->ops[rank].push_back(SendOf(*out));
    out_->ops[out->to_rank].push_back(RecvOf(*out));
    // Its consumer may go on: later in this round when the walk has yet to reach it.
    (out->to_rank > visiting_ ? now_ : next_).Add(out->to_rank);
  }

  const Schedule& s_;
  UnitIndex units_;
  std::vector<bool> produced_;  // by EdgeKey: the producer has been placed
  Schedule* out_ = nullptr;
  std::vector<std::deque<Op>> pending_;  // per rank: compute ops (and STEPs, REDUCE_GRADs) not placed yet
  size_t left_ = 0;                      // ops in pending_
  RankQueue now_, next_;                 // ranks to visit in this round and the next
  int visiting_ = -1;
  StopCheck stop_;
};

// Hoists each rank's RECVs (kAhead, see lower.h). Non-RECV ops keep their order and RECVs
// theirs; each RECV goes at the earlier of the point where a receive buffer is free and its
// lock-step position (which is before its consumer), so no receive is ever posted later
// than in lock step and the depth is exceeded only where the lock-step order needs it.
std::vector<Op> HoistReceives(const Shape& shape, const std::vector<Op>& ops, int buffers) {
  const int depth = buffers * shape.chunks;
  std::vector<size_t> recvs;  // positions of RECVs in `ops`, in order
  for (size_t i = 0; i < ops.size(); ++i) {
    if (IsRecv(ops[i].kind)) recvs.push_back(i);
  }
  std::vector<Op> out;
  out.reserve(ops.size());
  int outstanding = 0;  // posted receives whose consumer has not run yet
  size_t next = 0;      // next RECV to post
  auto post = [&] {
    out.push_back(ops[recvs[next++]]);
    ++outstanding;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (IsRecv(op.kind)) {
      while (next < recvs.size() && recvs[next] <= i) post();  // its lock-step place
      continue;
    }
    // A buffer is free; never between the two ops of an overlapped pair.
    if (!op.overlapped) {
      while (next < recvs.size() && outstanding < depth) post();
    }
    const std::optional<Edge> in = InputEdge(shape, op);
    if (IsCompute(op.kind) && in && in->CrossesRanks()) --outstanding;
    out.push_back(op);
  }
  // (A RECV whose consumer is missing, in an imported schedule, stays posted: Validate reports it.)
  SC_CHECK(next == recvs.size(), "every RECV is posted once");
  return out;
}

// One rank's list with a REDUCE_GRAD per STEP when there are replicas (see
// lower.h): the REDUCE_GRAD right after the last backward of the STEP's update, the STEP moved
// to just before the next compute op of its stage (or the end), so that the collective runs
// while the rank's other work goes on. REDUCE_GRADs already present are placed anew.
std::vector<Op> PlaceRankReduceGrads(const Schedule& s, const std::vector<Op>& in) {
  std::vector<Op> ops;
  ops.reserve(in.size() * 2);
  for (const Op& op : in) {
    if (!ReducesGradients(op.kind)) ops.push_back(op);
  }
  if (s.data_parallel <= 1) return ops;
  const auto key = [&](const Op& op) { return std::pair<int32_t, int64_t>(op.stage, UpdateIndex(s, op)); };
  std::map<std::pair<int32_t, int64_t>, size_t> last_backward;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (IsBackward(ops[i].kind)) last_backward[key(ops[i])] = i;
  }
  // Each op gets (position, class, index): a STEP goes before op `position` (class 0), every
  // other op at its own (class 1), a REDUCE_GRAD after op `position` (class 2).
  struct Placed {
    size_t position;
    int cls;
    size_t index;
    Op op;
  };
  std::vector<Placed> placed;
  placed.reserve(ops.size() * 2);
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (!ProducesVersion(op.kind)) {
      placed.push_back({i, 1, i, op});
      continue;
    }
    const Op reduce = ReduceGradOf(op);
    const auto last = last_backward.find(key(op));
    if (last == last_backward.end()) {  // no gradient on this rank (an invalid import): in place
      placed.push_back({i, 0, i, reduce});
      placed.push_back({i, 0, i, op});
      continue;
    }
    placed.push_back({last->second, 2, i, reduce});
    size_t next = last->second + 1;
    while (next < ops.size() && !(IsCompute(ops[next].kind) && ops[next].stage == op.stage)) ++next;
    placed.push_back({next, 0, i, op});
  }
  std::stable_sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    return std::tie(a.position, a.cls, a.index) < std::tie(b.position, b.cls, b.index);
  });
  std::vector<Op> out;
  out.reserve(placed.size());
  for (const Placed& p : placed) out.push_back(p.op);
  return out;
}

}  // namespace

std::string_view P2pName(P2p p2p) { return p2p == P2p::kAhead ? "ahead" : "lockstep"; }

bool ParseP2p(std::string_view text, P2p* p2p) {
  for (P2p p : {P2p::kAhead, P2p::kLockstep}) {
    if (P2pName(p) == text) {
      *p2p = p;
      return true;
    }
  }
  return false;
}

Schedule StripComms(const Schedule& schedule) {
  Schedule out = schedule;
  for (auto& rank_ops : out.ops) std::erase_if(rank_ops, [](const Op& op) { return IsComm(op.kind); });
  out.lowered = false;
  return out;
}

Schedule PlaceReduceGrads(const Schedule& schedule) {
  Schedule out = schedule;
  for (auto& rank_ops : out.ops) rank_ops = PlaceRankReduceGrads(out, rank_ops);
  return out;
}

Schedule Lower(const Schedule& schedule, P2p p2p, int ahead_buffers, const std::atomic<bool>* stop) {
  SC_CHECK(ahead_buffers >= 1, "at least one receive buffer per stage");
  const Schedule placed = PlaceReduceGrads(schedule);
  ThrowIfStopped(stop);
  Schedule out = Lowerer(placed, stop).Run();  // (the walk drops any SEND/RECV first)
  if (p2p == P2p::kAhead) {
    for (auto& rank_ops : out.ops) {
      ThrowIfStopped(stop);
      rank_ops = HoistReceives(out.shape, rank_ops, ahead_buffers);
    }
  }
  return out;
}

}  // namespace stagecraft::schedules
