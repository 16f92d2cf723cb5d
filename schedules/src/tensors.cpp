// Tensors read and copied (see tensors.h).
#include "stagecraft/schedules/tensors.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "stagecraft/schedules/weights.h"

namespace stagecraft::schedules {
TensorKey TensorOf(Tensor tensor, const Op& op, int version) {
  if (tensor == Tensor::kActivations) return {tensor, op.stage, op.step, op.microbatch, 0};
  return {tensor, op.stage, 0, 0, version};
}

TensorReads TensorsRead(const Op& op) {
  TensorReads reads;
  if (IsCopy(op.kind) || IsComm(op.kind) || IsCollective(op.kind)) return reads;
  if (Info(op.kind).memory.activations < 0) reads.keys[reads.count++] = TensorOf(Tensor::kActivations, op, 0);
  if (const int v = VersionRead(op); v >= 0) reads.keys[reads.count++] = TensorOf(Tensor::kWeights, op, v);
  if (ProducesVersion(op.kind)) reads.keys[reads.count++] = TensorOf(Tensor::kOptimizer, op, op.version);
  return reads;
}

std::string DescribeTensor(const TensorKey& k) {
  if (k.tensor == Tensor::kActivations) {
    return fmt::format("the activations of stage {} step {} microbatch {}", k.stage, k.step, k.microbatch);
  }
  if (k.tensor == Tensor::kWeights) return fmt::format("version {} of stage {}'s weights", k.version, k.stage);
  return fmt::format("stage {}'s optimizer state (the update to version {})", k.stage, k.version);
}

std::vector<TensorKey> StartOnHost(std::span<const Op> ops) {
  std::map<TensorKey, bool> first_is_reload;
  for (const Op& op : ops) {
    if (IsCopy(op.kind) && op.tensor != Tensor::kActivations) {
      first_is_reload.emplace(CopiedTensor(op), op.kind == OpKind::kReload);
    }
  }
  std::vector<TensorKey> out;
  for (const auto& [key, reload] : first_is_reload) {
    if (reload) out.push_back(key);
  }
  return out;
}

std::vector<std::vector<int32_t>> CopyWaits(std::span<const Op> ops) {
  if (std::none_of(ops.begin(), ops.end(), [](const Op& op) { return IsCopy(op.kind); })) return {};
  std::vector<std::vector<int32_t>> waits(ops.size());
  std::map<TensorKey, int32_t> last_copy;  // by tensor: the index of its latest OFFLOAD or RELOAD
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (IsCopy(op.kind)) {
      const TensorKey key = CopiedTensor(op);
      const auto it = last_copy.find(key);
      if (op.kind == OpKind::kReload && it != last_copy.end() && ops[it->second].kind == OpKind::kOffload) {
        waits[i].push_back(it->second);
      }
      last_copy[key] = static_cast<int32_t>(i);
      continue;
    }
    for (const TensorKey& key : TensorsRead(op).view()) {
      const auto it = last_copy.find(key);
      if (it != last_copy.end() && ops[it->second].kind == OpKind::kReload) waits[i].push_back(it->second);
    }
  }
  return waits;
}

}  // namespace stagecraft::schedules
