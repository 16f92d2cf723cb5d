// Placing activation copies (see offload.h).
#include "stagecraft/schedules/offload.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "stagecraft/schedules/lifetimes.h"
#include "stagecraft/schedules/weights.h"

namespace stagecraft::schedules {
namespace {

// Copies are not placed inside overlapped pairs (ir.h Op::overlapped: an F and the B or I run
// fused with it, as dualpipe-v's), which must stay adjacent: such a schedule is refused.
void RefuseOverlapped(const Schedule& s, std::string_view what) {
  for (const auto& ops : s.ops) {
    if (std::any_of(ops.begin(), ops.end(), [](const Op& op) { return op.overlapped; })) {
      throw InputError(fmt::format("{}: {} is not placed on a schedule with overlapped F;B pairs yet", s.name, what));
    }
  }
}

void CheckOffload(const ActivationOffload& offload) {
  for (size_t stage = 0; stage < offload.fraction.size(); ++stage) {
    const double f = offload.fraction[stage];
    if (!(f >= 0 && f <= 1)) {
      throw InputError(fmt::format("activation offload: the fraction {} of stage {} is outside [0, 1]", f, stage));
    }
  }
  if (offload.lookahead < 0) {
    throw InputError(fmt::format("activation offload: lookahead {} is negative", offload.lookahead));
  }
  for (size_t stage = 0; stage < offload.stage_lookahead.size(); ++stage) {
    if (offload.stage_lookahead[stage] < 0) {
      throw InputError(fmt::format("activation offload: the lookahead {} of stage {} is negative",
                                   offload.stage_lookahead[stage], stage));
    }
  }
}

// `ops` with the copies `before[i]` and `after[i]` around op i.
std::vector<Op> Merge(const std::vector<Op>& ops, const std::vector<std::vector<Op>>& before,
                      const std::vector<std::vector<Op>>& after) {
  std::vector<Op> out;
  out.reserve(ops.size() * 2);
  for (size_t i = 0; i < ops.size(); ++i) {
    out.insert(out.end(), before[i].begin(), before[i].end());
    out.push_back(ops[i]);
    out.insert(out.end(), after[i].begin(), after[i].end());
  }
  return out;
}

// Per position i of `ops`, the compute ops before it: those strictly between positions a and b
// are at[b] - at[a + 1].
std::vector<int> ComputeBefore(const std::vector<Op>& ops) {
  std::vector<int> at(ops.size() + 1, 0);
  for (size_t i = 0; i < ops.size(); ++i) at[i + 1] = at[i] + (RunsOnCompute(ops[i].kind) ? 1 : 0);
  return at;
}

// The intervals of `lives` to offload, by stage (offload.h): of each stage's n stage-microbatches,
// floor(fraction × n), spread evenly in F order over those that hold their activations over more
// compute ops than the lookahead (a reload of the others would follow its offload at once).
std::vector<int> Chosen(const std::vector<Op>& ops, const ActivationLifetimes& lives, const ActivationOffload& offload) {
  struct Stage {
    int closed = 0;                // closed intervals not offloaded yet
    std::vector<int> worth;        // those worth a copy, in F order
  };
  std::map<int32_t, Stage> by_stage;
  const std::vector<int> before = ComputeBefore(ops);
  for (int k = 0; k < static_cast<int>(lives.Activations().size()); ++k) {
    const StashInterval& in = lives.Activations()[static_cast<size_t>(k)];
    if (in.closed_at < 0 || in.offloaded_at >= 0) continue;
    const int32_t at = ops[static_cast<size_t>(in.opened_at)].stage;
    Stage& stage = by_stage[at];
    ++stage.closed;
    const int between = before[static_cast<size_t>(in.closed_at)] - before[static_cast<size_t>(in.opened_at) + 1];
    if (between > offload.LookaheadOf(at)) stage.worth.push_back(k);
  }
  std::vector<int> chosen;
  for (auto& [stage, intervals] : by_stage) {
    const double fraction = static_cast<size_t>(stage) < offload.fraction.size() ? offload.fraction[stage] : 0.0;
    const size_t n = intervals.worth.size();
    const size_t take =
        std::min(n, static_cast<size_t>(std::floor(fraction * static_cast<double>(intervals.closed) + 1e-9)));
    std::sort(intervals.worth.begin(), intervals.worth.end(), [&](int a, int b) {
      return lives.Activations()[static_cast<size_t>(a)].opened_at < lives.Activations()[static_cast<size_t>(b)].opened_at;
    });
    // The j-th of `take` at the middle of its share of the n: (2j + 1) n / (2 take), rounded down.
    for (size_t j = 0; j < take; ++j) chosen.push_back(intervals.worth[(2 * j + 1) * n / (2 * take)]);
  }
  return chosen;
}

// Where a RELOAD of the activations `in` closes goes: before the `lookahead`-th compute op ahead
// of their B or I, but after their F.
int ReloadBefore(const std::vector<Op>& ops, const StashInterval& in, int lookahead) {
  int at = in.closed_at;
  for (int passed = 0; passed < lookahead && at - 1 > in.opened_at;) {
    --at;
    if (RunsOnCompute(ops[static_cast<size_t>(at)].kind)) ++passed;
  }
  return at;
}

std::vector<Op> WithOffloads(const std::vector<Op>& ops, const ActivationOffload& offload) {
  const ActivationLifetimes lives(ops);
  std::vector<std::vector<Op>> after(ops.size()), before(ops.size());
  for (const int k : Chosen(ops, lives, offload)) {
    const StashInterval& in = lives.Activations()[static_cast<size_t>(k)];
    const Op& f = ops[static_cast<size_t>(in.opened_at)];
    Op copy{.kind = OpKind::kOffload, .stage = f.stage, .microbatch = f.microbatch, .step = f.step,
            .tensor = Tensor::kActivations};
    after[static_cast<size_t>(in.opened_at)].push_back(copy);
    copy.kind = OpKind::kReload;
    before[static_cast<size_t>(ReloadBefore(ops, in, offload.LookaheadOf(f.stage)))].push_back(copy);
  }
  return Merge(ops, before, after);
}

// One visit: the compute ops [first, last] of a rank's list (by index) of one stage, with no
// compute op of another stage between them.
struct Visit {
  int first = 0, last = 0;
  int32_t stage = 0;
};

std::vector<Visit> Visits(const std::vector<Op>& ops) {
  std::vector<Visit> visits;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    if (!RunsOnCompute(ops[static_cast<size_t>(i)].kind)) continue;
    const int32_t stage = ops[static_cast<size_t>(i)].stage;
    if (visits.empty() || visits.back().stage != stage) {
      visits.push_back({i, i, stage});
    } else {
      visits.back().last = i;
    }
  }
  return visits;
}

std::vector<Op> WithSpill(const std::vector<Op>& ops, const WeightSpill& spill) {
  const std::vector<Visit> visits = Visits(ops);
  std::vector<std::vector<Op>> after(ops.size()), before(ops.size());
  for (size_t v = 0; v < visits.size(); ++v) {
    const Visit& visit = visits[v];
    const Op& first = ops[static_cast<size_t>(visit.first)];
    Op copy{.kind = OpKind::kReload, .stage = visit.stage, .version = VersionRead(first), .tensor = Tensor::kWeights};
    // Double buffering: over the whole visit before, when there is one (from its first op), with
    // the optimizer state its STEPs update; without, at the visit and before each STEP.
    const bool ahead = spill.double_buffer && v > 0;
    const int reload_at = ahead ? visits[v - 1].first : visit.first;
    before[static_cast<size_t>(reload_at)].push_back(copy);
    int newest = copy.version;
    for (int i = visit.first; i <= visit.last; ++i) {
      const Op& op = ops[static_cast<size_t>(i)];
      if (!ProducesVersion(op.kind)) continue;
      before[static_cast<size_t>(ahead ? reload_at : i)].push_back(
          {.kind = OpKind::kReload, .stage = op.stage, .version = op.version, .tensor = Tensor::kOptimizer});
      after[static_cast<size_t>(i)].push_back(
          {.kind = OpKind::kOffload, .stage = op.stage, .version = op.version + 1, .tensor = Tensor::kOptimizer});
      newest = op.version;
    }
    after[static_cast<size_t>(visit.last)].push_back(
        {.kind = OpKind::kOffload, .stage = visit.stage, .version = newest, .tensor = Tensor::kWeights});
  }
  return Merge(ops, before, after);
}

}  // namespace

Schedule PlaceWeightSpill(const Schedule& schedule, const WeightSpill& spill) {
  RefuseOverlapped(schedule, "weight spill");
  for (const auto& ops : schedule.ops) {
    if (std::any_of(ops.begin(), ops.end(), [](const Op& op) { return IsCopy(op.kind); })) {
      throw InputError(fmt::format("{}: weight spill is placed on a schedule without copies", schedule.name));
    }
  }
  Schedule out = schedule;
  for (auto& rank_ops : out.ops) rank_ops = WithSpill(rank_ops, spill);
  return out;
}

Schedule PlaceActivationOffloads(const Schedule& schedule, const ActivationOffload& offload) {
  CheckOffload(offload);
  if (std::any_of(offload.fraction.begin(), offload.fraction.end(), [](double f) { return f > 0; })) {
    RefuseOverlapped(schedule, "activation offload");
  }
  Schedule out = schedule;
  for (auto& rank_ops : out.ops) rank_ops = WithOffloads(rank_ops, offload);
  return out;
}

}  // namespace stagecraft::schedules
