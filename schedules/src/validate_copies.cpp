// Validation of copies (OFFLOAD / RELOAD, DESIGN.md §10): each rank's list states where every
// tensor it copies lives, and an op may read a tensor only where the list has it on the device.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "stagecraft/schedules/tensors.h"
#include "stagecraft/schedules/weight_policy.h"
#include "stagecraft/schedules/weights.h"
#include "validate_graph.h"

namespace stagecraft::schedules::detail {
namespace {

class RankCopies {
 public:
  RankCopies(const Schedule& s, int rank, std::vector<Diagnostic>* diags) : s_(s), rank_(rank), diags_(diags) {}

  void Walk() {
    const std::vector<Op>& ops = s_.ops[rank_];
    // What exists from the start and is first reloaded starts on the host (a spilled stage's).
    for (const TensorKey& key : StartOnHost(ops)) {
      if (Made(key)) offloaded_.insert({key, kOnHostFromStart});
    }
    for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
      const Op& op = ops[i];
      if (op.stage < 0 || op.stage >= s_.stages()) continue;  // Record reports it
      if (IsCopy(op.kind)) {
        Copy(i, op);
      } else if (op.tensor != Tensor::kNone) {
        Add(DiagCode::kBadIndex, fmt::format("{}: only an OFFLOAD or RELOAD names a tensor ({})", Name(i),
                                             TensorName(op.tensor)));
      } else {
        Reads(i, op);
        Produces(op);
      }
    }
  }

 private:
  std::string Name(int i) const { return OpName(s_, {rank_, i}); }
  void Add(DiagCode code, std::string message) { diags_->push_back({code, std::move(message)}); }

  // A tensor is there to copy once made: activations by their F, a weight version by its STEP
  // (version 0 from the start), optimizer state from the start.
  void Produces(const Op& op) {
    if (Info(op.kind).memory.activations > 0) made_.insert(TensorOf(Tensor::kActivations, op, 0));
    if (ProducesVersion(op.kind)) made_.insert(TensorOf(Tensor::kWeights, op, op.version));
  }
  bool Made(const TensorKey& k) const {
    if (k.tensor == Tensor::kOptimizer || (k.tensor == Tensor::kWeights && k.version == 0)) return true;
    return made_.count(k) > 0;
  }

  void Copy(int i, const Op& op) {
    if (op.tensor == Tensor::kNone) {
      return Add(DiagCode::kBadIndex, fmt::format("{}: a copy names no tensor (activations, weights or optimizer)",
                                                  Name(i)));
    }
    const int64_t versions = int64_t{s_.steps} * UpdatesPerStep(s_.weights, s_.microbatches);
    if (op.tensor == Tensor::kActivations ? (op.step < 0 || op.step >= s_.steps || op.microbatch < 0 ||
                                             op.microbatch >= s_.microbatches)
                                          : (op.version < (op.tensor == Tensor::kOptimizer ? 1 : 0) ||
                                             op.version > versions + (op.tensor == Tensor::kOptimizer ? 1 : 0))) {
      return Add(DiagCode::kBadIndex, fmt::format("{}: no such {} in this schedule", Name(i), TensorName(op.tensor)));
    }
    const TensorKey key = CopiedTensor(op);
    const bool away = offloaded_.count(key) > 0;
    if (op.kind == OpKind::kOffload) {
      if (!Made(key)) return Add(DiagCode::kOrder, fmt::format("{} offloads {} before it exists", Name(i), DescribeTensor(key)));
      if (away) return Add(DiagCode::kDuplicate, fmt::format("{} offloads {} again", Name(i), DescribeTensor(key)));
      offloaded_.insert({key, i});
    } else {
      if (!away) {
        return Add(DiagCode::kOrder, fmt::format("{} reloads {}, which is not offloaded", Name(i), DescribeTensor(key)));
      }
      offloaded_.erase(key);
    }
  }

  // What an op reads must be on the device (tensors.h).
  void Reads(int i, const Op& op) {
    for (const TensorKey& key : TensorsRead(op).view()) Resident(i, key);
  }
  // Said once per OFFLOAD: its later readers would repeat the same mistake.
  void Resident(int i, const TensorKey& key) {
    const auto it = offloaded_.find(key);
    if (it == offloaded_.end()) return;
    const std::string since =
        it->second == kOnHostFromStart ? "on the host from the start" : fmt::format("offloaded by {}", Name(it->second));
    Add(DiagCode::kOrder, fmt::format("{} reads {} while it is {}, with no RELOAD before it", Name(i),
                                      DescribeTensor(key), since));
    offloaded_.erase(it);
  }

  const Schedule& s_;
  const int rank_;
  std::vector<Diagnostic>* diags_;
  std::set<TensorKey> made_;
  static constexpr int kOnHostFromStart = -1;
  std::map<TensorKey, int> offloaded_;  // by the OFFLOAD's index, or kOnHostFromStart
};

}  // namespace

void CheckCopies(const Schedule& s, std::vector<Diagnostic>* diags) {
  for (int r = 0; r < s.ranks(); ++r) {
    const std::vector<Op>& ops = s.ops[r];
    const bool copies = std::any_of(ops.begin(), ops.end(), [](const Op& op) {
      return IsCopy(op.kind) || (op.tensor != Tensor::kNone && !IsAllToAll(op.kind));
    });
    if (copies) RankCopies(s, r, diags).Walk();  // a rank without copies holds everything on its device
  }
}

}  // namespace stagecraft::schedules::detail
