// Assigns weight versions and inserts STEP ops according to the schedule's weight policy
// (rules in weights.h).
#include "stagecraft/schedules/weights.h"

#include <algorithm>
#include <vector>

#include "stagecraft/schedules/lifetimes.h"
#include "stagecraft/schedules/unit_index.h"
#include "stagecraft/schedules/weight_policy.h"

namespace stagecraft::schedules {
namespace {

Op MakeStep(int stage, int step, int microbatch, int version) {
  return Op{OpKind::kStep, stage, microbatch, step, version};
}

// Position (in its rank's list) of the last backward op of each microbatch and of each
// (stage, step): the points after which a STEP may apply the gradient.
struct LastBackward {
  std::vector<int> of_unit;        // by UnitIndex
  std::vector<int> of_stage_step;  // by step * stages + stage
};

LastBackward FindLastBackward(const Schedule& s, const UnitIndex& idx) {
  LastBackward last{std::vector<int>(idx.size(), -1),
                    std::vector<int>(static_cast<size_t>(s.stages()) * s.steps, -1)};
  for (const auto& rank_ops : s.ops) {
    for (int i = 0; i < static_cast<int>(rank_ops.size()); ++i) {
      const Op& op = rank_ops[i];
      if (!IsBackward(op.kind) || !idx.InRange(op)) continue;
      last.of_unit[idx(op)] = std::max(last.of_unit[idx(op)], i);
      int& ss = last.of_stage_step[static_cast<size_t>(op.step) * s.stages() + op.stage];
      ss = std::max(ss, i);
    }
  }
  return last;
}

}  // namespace

void AssignWeights(Schedule* s) {
  for (auto& rank_ops : s->ops) {
    std::erase_if(rank_ops, [](const Op& op) { return ProducesVersion(op.kind); });
  }
  const UnitIndex idx(*s);
  const LastBackward last = FindLastBackward(*s, idx);
  const int stages = s->stages();

  const WeightPolicyInfo& policy = PolicyInfo(s->weights);
  // kStashed: the version each microbatch's F read, per stage; vertical sync uses stage 0's.
  std::vector<int> f_version(idx.size(), 0);
  std::vector<int> newest(stages, 0);
  auto stash_version = [&](const Op& op) {
    if (!s->vertical_sync || op.stage == 0) return newest[op.stage];
    return f_version[idx(0, op.step, op.microbatch)];
  };
  // Vertical sync: stage 0's reads come first; replay its rank once to record them.
  if (policy.reads == VersionRule::kStashed && s->vertical_sync && stages > 0) {
    const auto& first = s->ops[s->shape.RankOf(0)];
    int v = 0;
    for (int i = 0; i < static_cast<int>(first.size()); ++i) {
      const Op& op = first[i];
      if (op.stage != 0 || !idx.InRange(op)) continue;
      if (IsForward(op.kind)) f_version[idx(op)] = v;
      if (IsBackward(op.kind) && last.of_unit[idx(op)] == i) ++v;
    }
  }

  for (auto& rank_ops : s->ops) {
    std::vector<Op> out;
    out.reserve(rank_ops.size() + rank_ops.size() / 2);
    for (int i = 0; i < static_cast<int>(rank_ops.size()); ++i) {
      Op op = rank_ops[i];
      const bool compute = IsCompute(op.kind) && idx.InRange(op);
      if (compute) {
        if (policy.reads == VersionRule::kByStep) {
          op.version = VersionOfStep(s->weights, op.step);
        } else if (policy.reads == VersionRule::kNewest) {
          op.version = newest[op.stage];
        } else {  // kStashed
          if (IsForward(op.kind)) f_version[idx(op)] = stash_version(op);
          op.version = f_version[idx(op)];
        }
      } else if (IsComm(op.kind)) {
        op.version = 0;
      }
      out.push_back(op);
      if (!compute || !IsBackward(op.kind)) continue;
      Op step_op;
      if (policy.update_per_microbatch) {
        if (last.of_unit[idx(op)] != i) continue;
        step_op = MakeStep(op.stage, op.step, op.microbatch, ++newest[op.stage]);
      } else if (last.of_stage_step[static_cast<size_t>(op.step) * stages + op.stage] == i) {
        step_op = MakeStep(op.stage, op.step, 0, op.step + 1);  // one update per step
      } else {
        continue;
      }
      // Sends posted right after the backward go first: an optimizer step must not hold up
      // the gradient the previous stage is waiting for (Lower places STEPs the same way).
      while (i + 1 < static_cast<int>(rank_ops.size()) && IsSend(rank_ops[i + 1].kind)) {
        out.push_back(rank_ops[++i]);
      }
      out.push_back(step_op);
    }
    rank_ops = std::move(out);
  }
}

int64_t UpdateIndex(const Schedule& s, const Op& op) {
  return UpdateOf(s.weights, s.microbatches, op.step, op.microbatch);
}

int VersionRead(const Op& op) {
  if (ProducesVersion(op.kind)) return op.version - 1;  // a STEP reads the version it updates
  if ((Info(op.kind).reads & kWeights) != 0) return op.version;
  return -1;
}

std::vector<std::vector<bool>> StepsInPlace(const Schedule& s) {
  std::vector<std::vector<bool>> in_place;
  in_place.reserve(s.ops.size());
  for (size_t r = 0; r < s.ops.size(); ++r) in_place.push_back(WeightLifetimes(s, static_cast<int>(r)).StepsInPlace());
  return in_place;
}

}  // namespace stagecraft::schedules
