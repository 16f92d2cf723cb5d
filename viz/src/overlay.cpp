// Predicted vs measured: ops matched by (rank, op_index), the position of the op in its rank's
// IR list (DESIGN.md §6), so the same schedule's two traces pair up one to one whatever stream
// each op ran on. The measured trace is drawn shifted so both start their first step together;
// each op's start difference is measured from its own step's start in each trace.
#include "stagecraft/viz/overlay.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include <fmt/format.h>

#include "stagecraft/base/printable.h"

namespace stagecraft::viz {
namespace {

using schedules::TraceOp;

// (rank, op_index) packed so that sorting groups a rank's ops; ties keep the op order.
struct Key {
  uint64_t key;
  int op;
  friend bool operator<(const Key& a, const Key& b) { return a.key < b.key || (a.key == b.key && a.op < b.op); }
};

std::vector<Key> SortedKeys(const std::vector<TraceOp>& ops) {
  std::vector<Key> keys(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    keys[i] = Key{static_cast<uint64_t>(ops[i].rank) << 32 | static_cast<uint32_t>(ops[i].op_index), static_cast<int>(i)};
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

// Two ops at the same (rank, op_index) are one op only when they say so: traces of different
// shapes that share a schedule name would otherwise pair unrelated ops.
bool SameOp(const TraceOp& a, const TraceOp& b) {
  return a.op.kind == b.op.kind && a.op.stage == b.op.stage && a.op.microbatch == b.op.microbatch &&
         a.op.step == b.op.step;
}

int64_t FirstStepStart(const LoadedTrace& t) { return t.step_start_ns.empty() ? t.start_ns : t.step_start_ns.front(); }

// Where `step` starts in `t` (its first compute op); the first step's start when unknown.
int64_t StepStart(const LoadedTrace& t, int step) {
  return step >= 0 && step < static_cast<int>(t.step_start_ns.size()) ? t.step_start_ns[step] : FirstStepStart(t);
}

// match_of_predicted[p] = the measured op paired with predicted op p, or -1 (a duplicate key
// pairs only its first op).
std::vector<int> PairOps(const LoadedTrace& predicted, const LoadedTrace& measured) {
  const std::vector<Key> p = SortedKeys(predicted.trace.ops);
  const std::vector<Key> m = SortedKeys(measured.trace.ops);
  std::vector<int> pair(p.size(), -1);
  size_t j = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (i > 0 && p[i].key == p[i - 1].key) continue;
    while (j < m.size() && m[j].key < p[i].key) ++j;
    if (j < m.size() && m[j].key == p[i].key &&
        SameOp(predicted.trace.ops[p[i].op], measured.trace.ops[m[j].op])) {
      pair[p[i].op] = m[j].op;
    }
  }
  return pair;
}

}  // namespace

int64_t MatchedOp::Disagreement() const { return std::llabs(start_diff_ns) + std::llabs(duration_diff_ns); }

Overlay MatchTraces(const LoadedTrace& predicted, const LoadedTrace& measured) {
  Overlay overlay;
  if (predicted.trace.schedule != measured.trace.schedule) {
    overlay.error = fmt::format("cannot overlay: predicted is {}, measured is {}", Printable(predicted.trace.schedule),
                                Printable(measured.trace.schedule));
    return overlay;
  }
  if (predicted.ranks != measured.ranks) {
    overlay.error = fmt::format("cannot overlay: predicted has {} ranks, measured has {}", predicted.ranks,
                                measured.ranks);
    return overlay;
  }
  overlay.offset_ns = FirstStepStart(measured) - FirstStepStart(predicted);
  const std::vector<TraceOp>& p_ops = predicted.trace.ops;
  const std::vector<TraceOp>& m_ops = measured.trace.ops;
  overlay.match_of_predicted.assign(p_ops.size(), -1);
  overlay.match_of_measured.assign(m_ops.size(), -1);
  const std::vector<int> pair = PairOps(predicted, measured);
  for (size_t p = 0; p < p_ops.size(); ++p) {
    if (pair[p] < 0) continue;
    const TraceOp& a = p_ops[p];
    const TraceOp& b = m_ops[pair[p]];
    MatchedOp m;
    m.predicted = static_cast<int>(p);
    m.measured = pair[p];
    // Each start is taken from its own trace's start of the op's step, so a step-time error
    // does not pile up into every later op's disagreement.
    m.start_diff_ns = (b.start_ns - StepStart(measured, b.op.step)) - (a.start_ns - StepStart(predicted, a.op.step));
    m.duration_diff_ns = b.duration_ns - a.duration_ns;
    overlay.match_of_predicted[p] = static_cast<int>(overlay.matched.size());
    overlay.match_of_measured[pair[p]] = static_cast<int>(overlay.matched.size());
    overlay.matched.push_back(m);
  }
  const int matched = static_cast<int>(overlay.matched.size());
  overlay.unmatched_predicted = static_cast<int>(p_ops.size()) - matched;
  overlay.unmatched_measured = static_cast<int>(m_ops.size()) - matched;
  overlay.by_disagreement.resize(matched);
  std::iota(overlay.by_disagreement.begin(), overlay.by_disagreement.end(), 0);
  std::stable_sort(overlay.by_disagreement.begin(), overlay.by_disagreement.end(), [&overlay](int a, int b) {
    return overlay.matched[a].Disagreement() > overlay.matched[b].Disagreement();
  });
  return overlay;
}

}  // namespace stagecraft::viz
