// Lowering: inserts SEND/RECV for cross-rank data dependencies by walking the ranks in lock
// step, the rule torch.distributed.pipelining uses (see lower.h).
#include "stagecraft/schedules/lower.h"

#include <deque>
#include <optional>

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/edges.h"

namespace stagecraft::schedules {
namespace {

class Lowerer {
 public:
  explicit Lowerer(const Schedule& s) : s_(s), units_(s), produced_(EdgeKeyCount(units_)) {}

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
        if (q.empty() || !Ready(q.front())) continue;
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
  size_t FlushSteps(int rank, std::deque<Op>* q) {
    size_t n = 0;
    while (!q->empty() && (q->front().kind == OpKind::kStep || !units_.InRange(q->front()))) {
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

  void Place(int rank, const Op& op) {
    out_->ops[rank].push_back(op);
    const std::optional<Edge> out = OutputEdge(s_.shape, op);
    if (!out) return;
    produced_[EdgeKey(units_, *out)] = true;
    if (!out->CrossesRanks()) return;
    out_->ops[rank].push_back(SendOf(*out));
    out_->ops[out->to_rank].push_back(RecvOf(*out));
  }

  const Schedule& s_;
  UnitIndex units_;
  std::vector<bool> produced_;  // by EdgeKey: the producer has been placed
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
