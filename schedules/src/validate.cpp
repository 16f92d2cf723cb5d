// Validation of a schedule: structural checks per (stage, step, microbatch), same-rank
// order checks, version reads, SEND/RECV matching, and deadlock detection on the
// cross-rank dependency graph (Boost.Graph strong components).
#include "stagecraft/schedules/validate.h"

#include "stagecraft/schedules/all_to_all.h"

#include <fmt/format.h>

#include "stagecraft/base/stop.h"
#include "stagecraft/schedules/unit_index.h"
#include "stagecraft/schedules/weight_policy.h"
#include "validate_graph.h"

namespace stagecraft::schedules {

std::string_view DiagCodeName(DiagCode code) {
  switch (code) {
    case DiagCode::kBadShape: return "bad-shape";
    case DiagCode::kWrongRank: return "wrong-rank";
    case DiagCode::kBadIndex: return "bad-index";
    case DiagCode::kMissing: return "missing";
    case DiagCode::kDuplicate: return "duplicate";
    case DiagCode::kMixedBackward: return "mixed-backward";
    case DiagCode::kOrder: return "order";
    case DiagCode::kVersion: return "version";
    case DiagCode::kCommMismatch: return "comm-mismatch";
    case DiagCode::kDeadlock: return "deadlock";
  }
  return "?";
}

std::string SummarizeDiagnostics(const std::vector<Diagnostic>& diags, size_t shown) {
  std::string out = fmt::format("{} problem(s): ", diags.size());
  for (size_t k = 0; k < diags.size() && k < shown; ++k) {
    out += fmt::format("{}{}: {}", k > 0 ? "; " : "", DiagCodeName(diags[k].code), diags[k].message);
  }
  if (diags.size() > shown) out += fmt::format("; and {} more", diags.size() - shown);
  return out;
}

namespace {

using detail::Pos;

class Validator {
 public:
  Validator(const Schedule& s, const std::atomic<bool>* stop) : s_(s), idx_(s), check_(stop) {}

  std::vector<Diagnostic> Run() {
    if (!CheckShape()) return std::move(diags_);
    Record();
    for (int stage = 0; stage < s_.stages(); ++stage) {
      for (int step = 0; step < s_.steps; ++step) {
        for (int mb = 0; mb < s_.microbatches; ++mb) {
          check_();
          CheckUnit(stage, step, mb);
        }
      }
    }
    check_.Now();
    CheckSteps();
    CheckPairs();
    check_.Now();
    CheckComms();
    detail::CheckCopies(s_, &diags_);
    detail::CheckAllToAlls(s_, &diags_);
    detail::FindDeadlocks(s_, units_, &diags_, check_.flag());
    return std::move(diags_);
  }

 private:
  void Add(DiagCode code, std::string message) { diags_.push_back({code, std::move(message)}); }
  std::string Name(Pos p) const { return detail::OpName(s_, p); }
  std::string Unit(int stage, int step, int mb) const {
    return fmt::format("stage {} step {} microbatch {}", stage, step, mb);
  }

  bool CheckShape() {
    const Shape& sh = s_.shape;
    if (sh.ranks < 1 || sh.chunks < 1 || s_.microbatches < 1 || s_.steps < 1) {
      Add(DiagCode::kBadShape, fmt::format("ranks {}, chunks {}, microbatches {}, steps {}: each must be >= 1",
                                           sh.ranks, sh.chunks, s_.microbatches, s_.steps));
      return false;
    }
    if (static_cast<int>(s_.ops.size()) != sh.ranks) {
      Add(DiagCode::kBadShape, fmt::format("{} op lists for {} ranks", s_.ops.size(), sh.ranks));
      return false;
    }
    return true;
  }

  // Records where every op sits; reports out-of-range ops, misplaced ops and duplicates.
  void Record() {
    units_.Resize(idx_.size(), s_.stages());
    for (int r = 0; r < s_.ranks(); ++r) {
      for (int i = 0; i < static_cast<int>(s_.ops[r].size()); ++i) {
        check_();
        RecordOp({r, i});
      }
    }
  }

  void RecordOp(Pos p) {
    const Op& op = s_.ops[p.rank][p.index];
    if (op.stage < 0 || op.stage >= s_.stages()) {
      Add(DiagCode::kBadIndex, fmt::format("{}: stage {} out of range 0..{}", Name(p), op.stage, s_.stages() - 1));
      return;
    }
    if (s_.shape.RankOf(op.stage) != p.rank) {
      Add(DiagCode::kWrongRank,
          fmt::format("{}: stage {} lives on rank {}", Name(p), op.stage, s_.shape.RankOf(op.stage)));
    }
    if (IsCopy(op.kind)) return;  // CheckCopies
    if (IsAllToAll(op.kind)) return;  // CheckAllToAlls
    if (ReducesGradients(op.kind)) return RecordReduce(p);
    if (ProducesVersion(op.kind)) {
      auto& steps = units_.steps[op.stage];
      if (op.version < 1) {
        Add(DiagCode::kVersion, fmt::format("{}: a STEP must produce version >= 1", Name(p)));
        return;
      }
      // Versions run from 1 to the policy's STEP count; a larger one is an error, not a table size.
      if (op.version > StepsPerStage()) {
        Add(DiagCode::kVersion, fmt::format("{}: version {} is beyond the {} STEPs per stage of the {} policy",
                                            Name(p), op.version, StepsPerStage(), PolicyName(s_.weights)));
        return;
      }
      if (steps.size() <= static_cast<size_t>(op.version)) steps.resize(op.version + 1);
      if (steps[op.version].rank >= 0) {
        Add(DiagCode::kDuplicate, fmt::format("{}: version {} of stage {} already produced by {}", Name(p),
                                              op.version, op.stage, Name(steps[op.version])));
        return;
      }
      steps[op.version] = p;
      return;
    }
    if (!idx_.InRange(op)) {
      Add(DiagCode::kBadIndex, fmt::format("{}: step {} microbatch {} out of range (steps {}, microbatches {})",
                                           Name(p), op.step, op.microbatch, s_.steps, s_.microbatches));
      return;
    }
    Pos& slot = units_.Slot(op.kind, idx_(op));
    if (slot.rank >= 0) {
      Add(DiagCode::kDuplicate, fmt::format("{} duplicates {}", Name(p), Name(slot)));
      return;
    }
    slot = p;
  }

  // A REDUCE_GRAD names the version its STEP produces; one per STEP, only with replicas.
  void RecordReduce(Pos p) {
    const Op& op = At(p);
    if (s_.data_parallel <= 1) {
      Add(DiagCode::kBadShape, fmt::format("{}: a REDUCE_GRAD in a schedule of one replica (data_parallel 1)", Name(p)));
      return;
    }
    if (op.version < 1 || op.version > StepsPerStage()) {
      Add(DiagCode::kVersion, fmt::format("{}: version {} is not one a STEP of the {} policy produces (1..{})",
                                          Name(p), op.version, PolicyName(s_.weights), StepsPerStage()));
      return;
    }
    auto& reduces = units_.reduces[op.stage];
    if (reduces.size() <= static_cast<size_t>(op.version)) reduces.resize(op.version + 1);
    if (reduces[op.version].rank >= 0) {
      Add(DiagCode::kDuplicate, fmt::format("{} duplicates {}", Name(p), Name(reduces[op.version])));
      return;
    }
    reduces[op.version] = p;
  }

  // Before(a, b): both on one rank and a comes first. Different ranks are the graph's business.
  static bool Before(Pos a, Pos b) { return a.rank != b.rank || a.index < b.index; }

  void CheckUnit(int stage, int step, int mb) {
    const size_t u = idx_(stage, step, mb);
    const Pos f = units_.At(OpKind::kF, u), b = units_.At(OpKind::kB, u), in = units_.At(OpKind::kI, u),
              w = units_.At(OpKind::kW, u);
    const auto unit = [&] { return Unit(stage, step, mb); };  // named only when something is wrong
    if (f.rank < 0) Add(DiagCode::kMissing, fmt::format("{}: no F", unit()));
    if (b.rank >= 0 && (in.rank >= 0 || w.rank >= 0)) {
      Add(DiagCode::kMixedBackward, fmt::format("{}: both B ({}) and I/W", unit(), Name(b)));
    } else if (b.rank < 0 && in.rank < 0 && w.rank < 0) {
      Add(DiagCode::kMissing, fmt::format("{}: no backward (B, or I and W)", unit()));
    } else if (b.rank < 0 && in.rank < 0) {
      Add(DiagCode::kMissing, fmt::format("{}: W ({}) without I", unit(), Name(w)));
    } else if (b.rank < 0 && w.rank < 0) {
      Add(DiagCode::kMissing, fmt::format("{}: I ({}) without W", unit(), Name(in)));
    }
    const Pos back = b.rank >= 0 ? b : in;
    if (f.rank >= 0 && back.rank >= 0 && !Before(f, back)) {
      Add(DiagCode::kOrder, fmt::format("{} runs before its F {}", Name(back), Name(f)));
    }
    if (in.rank >= 0 && w.rank >= 0 && !Before(in, w)) {
      Add(DiagCode::kOrder, fmt::format("{} runs before its I {}", Name(w), Name(in)));
    }
    CheckVersions(stage, f, {b, in, w});
  }

  void CheckVersions(int stage, Pos f, std::initializer_list<Pos> backward) {
    const bool newest = PolicyInfo(s_.weights).reads == VersionRule::kNewest;
    if (f.rank >= 0) CheckRead(stage, f);
    if (f.rank >= 0 && newest) CheckNewest(stage, f);
    for (Pos p : backward) {
      if (p.rank < 0) continue;
      CheckRead(stage, p);
      if (newest) {
        CheckNewest(stage, p);
      } else if (f.rank >= 0 && At(p).version != At(f).version) {
        Add(DiagCode::kVersion, fmt::format("{} reads version {} but its F {} read version {}", Name(p),
                                            At(p).version, Name(f), At(f).version));
      }
    }
  }

  void CheckRead(int stage, Pos p) {
    const int v = At(p).version;
    if (v == 0) return;
    const auto& steps = units_.steps[stage];
    if (v < 0 || static_cast<size_t>(v) >= steps.size() || steps[v].rank < 0) {
      Add(DiagCode::kVersion, fmt::format("{} reads version {} of stage {}, which no STEP produces", Name(p), v, stage));
    } else if (!Before(steps[v], p)) {
      Add(DiagCode::kOrder, fmt::format("{} reads version {} before {} produces it", Name(p), v, Name(steps[v])));
    }
  }

  // Without a stash an op reads the newest version where it runs: the next one is made after it.
  void CheckNewest(int stage, Pos p) {
    const int v = At(p).version;
    const auto& steps = units_.steps[stage];
    if (v >= 0 && static_cast<size_t>(v) + 1 < steps.size() && steps[v + 1].rank >= 0 && !Before(p, steps[v + 1])) {
      Add(DiagCode::kVersion, fmt::format("{} reads version {} of stage {} after {} made version {} (the {} policy "
                                          "reads the newest)",
                                          Name(p), v, stage, Name(steps[v + 1]), v + 1, PolicyName(s_.weights)));
    }
  }

  // Versions of a stage are produced in order, each after the gradients it applies.
  void CheckSteps() {
    for (int stage = 0; stage < s_.stages(); ++stage) {
      const auto& steps = units_.steps[stage];
      for (size_t v = 1; v < steps.size(); ++v) {
        if (steps[v].rank < 0) {
          Add(DiagCode::kMissing, fmt::format("stage {}: no STEP produces version {}", stage, v));
          continue;
        }
        if (v >= 2 && steps[v - 1].rank >= 0 && !Before(steps[v - 1], steps[v])) {
          Add(DiagCode::kOrder, fmt::format("{} runs before {}", Name(steps[v]), Name(steps[v - 1])));
        }
        CheckStepAfterGradients(stage, steps[v]);
        CheckReduceOf(stage, static_cast<int>(v));
      }
      CheckStepCount(stage, steps.empty() ? 0 : static_cast<int>(steps.size()) - 1);
      const auto& reduces = units_.reduces[stage];
      for (size_t v = 1; v < reduces.size(); ++v) {
        if (reduces[v].rank >= 0 && (v >= steps.size() || steps[v].rank < 0)) {
          Add(DiagCode::kMissing, fmt::format("{}: no STEP of version {} reads it", Name(reduces[v]), v));
        }
      }
    }
  }

  // A STEP applies gradients: those of its microbatch (stash) or of its whole step.
  void CheckStepAfterGradients(int stage, Pos step_pos) {
    const Op& op = At(step_pos);
    if (op.step < 0 || op.step >= s_.steps || op.microbatch < 0 || op.microbatch >= s_.microbatches) {
      Add(DiagCode::kBadIndex, fmt::format("{}: step {} microbatch {} out of range", Name(step_pos), op.step,
                                           op.microbatch));
      return;
    }
    const bool per_microbatch = PolicyInfo(s_.weights).update_per_microbatch;
    const int first = per_microbatch ? op.microbatch : 0;
    const int last = per_microbatch ? op.microbatch : s_.microbatches - 1;
    for (int mb = first; mb <= last; ++mb) {
      const size_t u = idx_(stage, op.step, mb);
      for (const OpKindInfo& row : kOpKinds) {
        const Pos p = IsBackward(row.kind) ? units_.At(row.kind, u) : Pos{};
        if (p.rank >= 0 && !Before(p, step_pos)) {
          Add(DiagCode::kOrder, fmt::format("{} applies gradients before {} computes them", Name(step_pos), Name(p)));
        }
      }
    }
  }

  // With replicas, the STEP producing version v reads its stage's REDUCE_GRAD of v, which comes
  // after the update's gradients (the same check as the STEP's, lowering places it so).
  void CheckReduceOf(int stage, int v) {
    if (s_.data_parallel <= 1) return;
    const auto& reduces = units_.reduces[stage];
    const Pos step = units_.steps[stage][v];
    if (static_cast<size_t>(v) >= reduces.size() || reduces[v].rank < 0) {
      Add(DiagCode::kMissing, fmt::format("{}: no REDUCE_GRAD of its gradients over the {} replicas", Name(step),
                                          s_.data_parallel));
      return;
    }
    const Pos reduce = reduces[v];
    if (reduce.rank != step.rank || reduce.index > step.index) {
      Add(DiagCode::kOrder, fmt::format("{} does not come before {} on its rank", Name(reduce), Name(step)));
      return;
    }
    CheckStepAfterGradients(stage, reduce);
  }

  // How many STEPs each stage makes: the policy's updates per step, every step.
  int64_t StepsPerStage() const { return int64_t{s_.steps} * UpdatesPerStep(s_.weights, s_.microbatches); }

  void CheckStepCount(int stage, int produced) {
    const int64_t want = StepsPerStage();
    if (produced < want) {
      Add(DiagCode::kMissing, fmt::format("stage {}: {} STEPs, the {} policy needs {}", stage, produced,
                                          PolicyName(s_.weights), want));
    }
  }

  // An overlapped pair (Op::overlapped) is an F directly followed by a B or I of another unit.
  // (A backward that needs its partner through other ranks is a cycle FindDeadlocks reports.)
  void CheckPairs() {
    for (int r = 0; r < s_.ranks(); ++r) {
      const auto& ops = s_.ops[r];
      for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
        const Op& op = ops[i];
        if (!op.overlapped) continue;
        if (i == 0 || !IsForward(ops[i - 1].kind) || Info(op.kind).phase != Phase::kInputBackward) {
          Add(DiagCode::kOrder, fmt::format("{} is marked overlapped, but an overlapped pair is an F directly "
                                            "followed by a B or an I", Name({r, i})));
        } else if (ops[i - 1].stage == op.stage && ops[i - 1].step == op.step &&
                   ops[i - 1].microbatch == op.microbatch) {
          Add(DiagCode::kOrder, fmt::format("{} overlaps its own forward {}; a pair cannot run fused when one half "
                                            "needs the other", Name({r, i}), Name({r, i - 1})));
        }
      }
    }
  }

  void CheckComms() { detail::CheckComms(s_, units_, &diags_, check_.flag()); }

  const Op& At(Pos p) const { return s_.ops[p.rank][p.index]; }

  const Schedule& s_;
  UnitIndex idx_;
  detail::Units units_;
  std::vector<Diagnostic> diags_;
  StopCheck check_;
};

}  // namespace

std::vector<Diagnostic> Validate(const Schedule& schedule, const std::atomic<bool>* stop) {
  return Validator(schedule, stop).Run();
}

}  // namespace stagecraft::schedules
