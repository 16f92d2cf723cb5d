// Names, placement and action strings of the schedule IR.
#include "stagecraft/schedules/ir.h"

#include <fmt/format.h>

#include "stagecraft/schedules/weight_policy.h"

namespace stagecraft::schedules {

std::string_view PolicyName(WeightPolicy policy) {
  return static_cast<size_t>(policy) < kWeightPolicies.size() ? PolicyInfo(policy).name : "?";
}

std::string PolicyChoices() {
  std::string text;
  for (size_t i = 0; i < kWeightPolicies.size(); ++i) {
    if (i > 0) text += i + 1 == kWeightPolicies.size() ? " or " : ", ";
    text += kWeightPolicies[i].name;
  }
  return text;
}

bool ParsePolicy(std::string_view text, WeightPolicy* policy) {
  for (const WeightPolicyInfo& row : kWeightPolicies) {
    if (row.name == text) {
      *policy = row.policy;
      return true;
    }
  }
  return false;
}

int Shape::RankOf(int stage) const {
  const int chunk = stage / ranks;
  const int pos = stage % ranks;
  if (placement == Placement::kV && chunk % 2 == 1) return ranks - 1 - pos;
  return pos;
}

int Shape::StageOf(int rank, int chunk) const {
  if (placement == Placement::kV && chunk % 2 == 1) return chunk * ranks + (ranks - 1 - rank);
  return chunk * ranks + rank;
}

size_t Schedule::OpCount() const {
  size_t n = 0;
  for (const auto& rank_ops : ops) n += rank_ops.size();
  return n;
}

std::string ActionString(const Op& op, int microbatches_per_step) {
  const ActionNumber number = Info(op.kind).number;
  const long global = static_cast<long>(op.step) * microbatches_per_step + op.microbatch;
  if (number == ActionNumber::kTensor) {
    const std::string_view code = kTensorNames[static_cast<size_t>(op.tensor)].code;
    return fmt::format("{}{}_{}{}", op.stage, KindName(op.kind), code, op.tensor == Tensor::kActivations || op.tensor == Tensor::kGradients ? global : op.version);
  }
  return fmt::format("{}{}{}", op.stage, KindName(op.kind), number == ActionNumber::kVersion ? op.version : global);
}

std::string FirstCopy(const Schedule& s) {
  for (size_t r = 0; r < s.ops.size(); ++r) {
    for (size_t i = 0; i < s.ops[r].size(); ++i) {
      if (IsCopy(s.ops[r][i].kind)) return fmt::format("rank {} #{} ({})", r, i, ActionString(s.ops[r][i], s.microbatches));
    }
  }
  return "";
}

}  // namespace stagecraft::schedules
