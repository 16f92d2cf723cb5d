// Lowering: inserts SEND/RECV for cross-rank data dependencies by walking the ranks in lock
// step, the rule torch.distributed.pipelining uses (see lower.h).
#include "stagecraft/schedules/lower.h"

#include <deque>

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/unit_index.h"

namespace stagecraft::schedules {
namespace {

Op CommOp(OpKind kind, const Op& from, int stage, int peer) {
  Op op;
  op.kind = kind;
  op.stage = stage;
  op.microbatch = from.microbatch;
  op.step = from.step;
  op.peer = peer;
  return op;
}

class Lowerer {
 public:
  explicit Lowerer(const Schedule& s) : s_(s), idx_(s), placed_f_(idx_.size()), placed_b_(idx_.size()),
                                         recv_f_(idx_.size()), recv_b_(idx_.size()) {}

  Schedule Run() {
    Schedule out = StripComms(s_);
    const int ranks = s_.ranks();
    std::vector<std::deque<Op>> pending(ranks);
    for (int r = 0; r < ranks; ++r) pending[r].assign(out.ops[r].begin(), out.ops[r].end());
    for (auto& rank_ops : out.ops) rank_ops.clear();
    out_ = &out;
    size_t left = 0;
    for (const auto& q : pending) left += q.size();
    while (left > 0) {
      bool progress = false;
      for (int r = 0; r < ranks; ++r) {
        auto& q = pending[r];
        left -= FlushSteps(r, &q);
        if (q.empty() || !Ready(r, q.front())) continue;
        Place(r, q.front());
        q.pop_front();
        --left;
        left -= FlushSteps(r, &q);
        progress = true;
      }
      if (!progress && left > 0) {
        for (int r = 0; r < ranks; ++r) {
          if (pending[r].empty()) continue;
          throw InputError(fmt::format(
              "cannot lower {}: rank {} waits forever at {} (its input is never produced first); "
              "the compute order deadlocks", s_.name, r, ActionString(pending[r].front(), s_.microbatches)));
        }
      }
    }
    out.lowered = true;
    return out;
  }

 private:
  bool Valid(const Op& op) const { return idx_.InRange(op); }

  size_t FlushSteps(int rank, std::deque<Op>* q) {
    size_t n = 0;
    while (!q->empty() && (q->front().kind == OpKind::kStep || !Valid(q->front()))) {
      out_->ops[rank].push_back(q->front());
      q->pop_front();
      ++n;
    }
    return n;
  }

  bool Ready(int rank, const Op& op) const {
    const Shape& shape = s_.shape;
    if (op.kind == OpKind::kF && op.stage > 0) {
      const size_t prev = idx_(op.stage - 1, op.step, op.microbatch);
      return recv_f_[idx_(op)] || (shape.RankOf(op.stage - 1) == rank && placed_f_[prev]);
    }
    if ((op.kind == OpKind::kB || op.kind == OpKind::kI) && op.stage < s_.stages() - 1) {
      const size_t next = idx_(op.stage + 1, op.step, op.microbatch);
      return recv_b_[idx_(op)] || (shape.RankOf(op.stage + 1) == rank && placed_b_[next]);
    }
    return true;
  }

  void Place(int rank, const Op& op) {
    const Shape& shape = s_.shape;
    out_->ops[rank].push_back(op);
    if (op.kind == OpKind::kF) {
      placed_f_[idx_(op)] = true;
      const int next = op.stage + 1;
      if (next < s_.stages() && shape.RankOf(next) != rank) {
        const int peer = shape.RankOf(next);
        out_->ops[rank].push_back(CommOp(OpKind::kSendF, op, op.stage, peer));
        out_->ops[peer].push_back(CommOp(OpKind::kRecvF, op, next, rank));
        recv_f_[idx_(next, op.step, op.microbatch)] = true;
      }
    } else if (op.kind == OpKind::kB || op.kind == OpKind::kI) {
      placed_b_[idx_(op)] = true;
      const int prev = op.stage - 1;
      if (prev >= 0 && shape.RankOf(prev) != rank) {
        const int peer = shape.RankOf(prev);
        out_->ops[rank].push_back(CommOp(OpKind::kSendB, op, op.stage, peer));
        out_->ops[peer].push_back(CommOp(OpKind::kRecvB, op, prev, rank));
        recv_b_[idx_(prev, op.step, op.microbatch)] = true;
      }
    }
  }

  const Schedule& s_;
  UnitIndex idx_;
  std::vector<bool> placed_f_, placed_b_, recv_f_, recv_b_;
  Schedule* out_ = nullptr;
};

}  // namespace

Schedule StripComms(const Schedule& schedule) {
  Schedule out = schedule;
  for (auto& rank_ops : out.ops) std::erase_if(rank_ops, [](const Op& op) { return IsComm(op.kind); });
  out.lowered = false;
  return out;
}

Schedule Lower(const Schedule& schedule) { return Lowerer(schedule).Run(); }

}  // namespace stagecraft::schedules
