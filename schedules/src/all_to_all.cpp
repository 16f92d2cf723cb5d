// The ALL_TO_ALLs of expert parallelism (all_to_all.h).
#include "stagecraft/schedules/all_to_all.h"

#include <fmt/format.h>

#include <set>
#include <tuple>

#include "validate_graph.h"

namespace stagecraft::schedules {

Op AllToAllOf(const Op& op) {
  return Op{.kind = OpKind::kAllToAll,
            .stage = op.stage,
            .microbatch = op.microbatch,
            .step = op.step,
            .tensor = IsForward(op.kind) ? Tensor::kActivations : Tensor::kGradients};
}

namespace {

bool Marked(const std::vector<bool>& stages, int stage) {
  return stage >= 0 && stage < static_cast<int>(stages.size()) && stages[static_cast<size_t>(stage)];
}

// Whether op `i` of `ops` is the first of an overlapped pair (the next op is its partner).
bool StartsPair(const std::vector<Op>& ops, size_t i) {
  return IsForward(ops[i].kind) && i + 1 < ops.size() && ops[i + 1].overlapped && IsCompute(ops[i + 1].kind);
}

}  // namespace

Schedule PlaceAllToAlls(const Schedule& schedule, const std::vector<bool>& expert_stages) {
  Schedule out = schedule;
  for (std::vector<Op>& ops : out.ops) {
    std::vector<Op> in;
    for (const Op& op : ops) {
      if (!IsAllToAll(op.kind)) in.push_back(op);
    }
    ops.clear();
    for (size_t i = 0; i < in.size(); ++i) {
      ops.push_back(in[i]);
      if (!IsCompute(in[i].kind)) continue;
      const bool pair = StartsPair(in, i);
      if (pair) ops.push_back(in[++i]);
      const size_t first = pair ? i - 1 : i;
      for (size_t j = first; j <= i; ++j) {
        if (HasAllToAll(in[j]) && Marked(expert_stages, in[j].stage)) ops.push_back(AllToAllOf(in[j]));
      }
    }
  }
  return out;
}

std::vector<int> PairedAllToAlls(const Schedule& schedule, int rank) {
  const std::vector<Op>& ops = schedule.ops[static_cast<size_t>(rank)];
  std::vector<int> posted_by(ops.size(), -1);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!StartsPair(ops, i)) continue;
    for (size_t j = i + 2; j < ops.size() && IsAllToAll(ops[j].kind); ++j) posted_by[j] = static_cast<int>(i);
  }
  return posted_by;
}

namespace detail {

void CheckAllToAlls(const Schedule& s, std::vector<Diagnostic>* diags) {
  for (int r = 0; r < s.ranks(); ++r) {
    const std::vector<Op>& ops = s.ops[static_cast<size_t>(r)];
    std::set<std::tuple<int, int, int, Tensor>> seen;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& a2a = ops[i];
      if (!IsAllToAll(a2a.kind)) continue;
      const std::string name = OpName(s, Pos{r, static_cast<int>(i)});
      if (a2a.tensor != Tensor::kActivations && a2a.tensor != Tensor::kGradients) {
        diags->push_back({DiagCode::kBadIndex, fmt::format("{}: an ALL_TO_ALL moves activations or gradients", name)});
        continue;
      }
      if (!seen.insert({a2a.stage, a2a.step, a2a.microbatch, a2a.tensor}).second) {
        diags->push_back({DiagCode::kDuplicate, fmt::format("{}: a second ALL_TO_ALL of one op", name)});
        continue;
      }
      // Back over the ALL_TO_ALLs and the pair's partner to the op it follows.
      bool found = false;
      for (size_t j = i; j-- > 0;) {
        const Op& op = ops[j];
        if (IsAllToAll(op.kind)) continue;
        if (IsCompute(op.kind) && HasAllToAll(op) && AllToAllOf(op) == a2a) {
          found = true;
          break;
        }
        const bool partner = op.overlapped && j > 0 && IsCompute(op.kind);
        if (!partner) break;
      }
      if (!found) {
        diags->push_back({DiagCode::kOrder, fmt::format("{}: an ALL_TO_ALL comes right after its F, B or I (or the "
                                                        "overlapped pair it is in)",
                                                        name)});
      }
    }
  }
}

}  // namespace detail
}  // namespace stagecraft::schedules
