// Activation copies between memory tiers (see activation_copies.h).
#include "stagecraft/exec/activation_copies.h"

#include <utility>

#include "stagecraft/base/check.h"

namespace stagecraft::exec {
namespace {

// Every buffer list of an Activations, in one order, for building a copy of the same shape.
std::vector<std::vector<Buffer>*> Lists(Activations& a) { return {&a.inputs, &a.pre, &a.dz, &a.kept}; }

// Buffers for a copy of `from` in `to_tier`, in its shape (empty buffers stay empty).
Activations ShapeOf(Device& device, Activations& from, MemoryTier to_tier) {
  Activations to;
  const std::vector<std::vector<Buffer>*> src = Lists(from), dst = Lists(to);
  for (size_t l = 0; l < src.size(); ++l) {
    for (const Buffer& b : *src[l]) {
      if (b.empty()) {
        dst[l]->emplace_back();
      } else {
        dst[l]->emplace_back(device, b.size(), to_tier);
      }
    }
  }
  return to;
}

// Queues the copy of every buffer of `from` into `to` (ShapeOf's) on `stream`.
void CopyAll(Device& device, Activations& from, Activations& to, StreamKind stream) {
  const std::vector<std::vector<Buffer>*> src = Lists(from), dst = Lists(to);
  for (size_t l = 0; l < src.size(); ++l) {
    for (size_t k = 0; k < src[l]->size(); ++k) {
      Buffer& a = (*src[l])[k];
      Buffer& b = (*dst[l])[k];
      if (!a.empty()) device.memory().CopyAsync(b.data(), b.tier(), a.data(), a.tier(), a.size(), stream);
    }
  }
}

}  // namespace

void ActivationCopies::Offload(size_t unit, Activations* saved, OpClock& clock, int op) {
  SC_CHECK(!host_.contains(unit), "a unit is offloaded once before its reload");
  device_.streams().OrderAfter(StreamKind::kToHost, StreamKind::kCompute);  // after the F that made them
  Activations host = ShapeOf(device_, *saved, MemoryTier::kHost);
  const int begin = clock.BeginOn(StreamKind::kToHost);
  CopyAll(device_, *saved, host, StreamKind::kToHost);
  clock.EndOn(op, begin, StreamKind::kToHost);
  host_.emplace(unit, std::move(host));
  leaving_.push_back(std::move(*saved));
  *saved = Activations{};
}

Activations ActivationCopies::Reload(size_t unit, OpClock& clock, int op) {
  const auto it = host_.find(unit);
  SC_CHECK(it != host_.end(), "a RELOAD follows its OFFLOAD");
  // After the host copy is complete, and after the compute queued so far, its allocations of the
  // device buffers included: they come from memory that work may have used (the pool is ordered
  // on the compute stream).
  Activations back = ShapeOf(device_, it->second, MemoryTier::kDevice);
  device_.streams().OrderAfter(StreamKind::kToDevice, StreamKind::kToHost);
  device_.streams().OrderAfter(StreamKind::kToDevice, StreamKind::kCompute);
  const int begin = clock.BeginOn(StreamKind::kToDevice);
  CopyAll(device_, it->second, back, StreamKind::kToDevice);
  clock.EndOn(op, begin, StreamKind::kToDevice);
  arriving_.push_back(std::move(it->second));
  host_.erase(it);
  return back;
}

void ActivationCopies::Wait() { device_.streams().OrderAfter(StreamKind::kCompute, StreamKind::kToDevice); }

void ActivationCopies::Release(bool all) {
  if (all) {
    device_.streams().Synchronize(StreamKind::kToHost);
    device_.streams().Synchronize(StreamKind::kToDevice);
  }
  // A stream is FIFO: once idle, every copy queued on it is done.
  if (!leaving_.empty() && device_.streams().Idle(StreamKind::kToHost)) leaving_.clear();
  if (!arriving_.empty() && device_.streams().Idle(StreamKind::kToDevice)) arriving_.clear();
}

}  // namespace stagecraft::exec
