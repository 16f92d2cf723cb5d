// One stage's optimizer: its state on the device (SGD: the velocity; Adam: m and v, zeroed)
// and the update the runtime's STEP and the profiler both apply (kernels/optimizer.h math).
// With TrainingConfig::optimizer_on_host (ZeRO-Offload) the state lives in the host tier with a
// master copy of the weights and a gradient buffer: a STEP downloads the gradients (zeroing the
// device's, as the update does), updates the master copy with the host's kernel (kernels/host.h,
// the cpu backend's own, so a cpu run trains bit for bit as without) and uploads it as the new
// weights. The master copy is the newest version, taken from the device at the first update.
#pragma once

#include <cstdint>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/device_streams.h"
#include "stagecraft/exec/runtime.h"

namespace stagecraft::exec {

class Optimizer {
 public:
  // `config` gives the kind ("sgd" | "adam"), lr and momentum; `params` the floats updated.
  Optimizer(Device& device, const TrainingConfig& config, int64_t params);

  // w_out ← update(w_in, grad · grad_scale) at rate `lr` (the run's: learning_rate.h), w_out
  // being w_in for an update in place or the next version's buffer; Adam's bias correction
  // counts this update (t from 1). grad is left all zeros (the update consumes it; kernels/host.h).
  void Step(const float* w_in, float* w_out, float* grad, float grad_scale, float lr);
  // training.lr, the rate before any schedule.
  float base_lr() const { return config_.lr; }
  // The optimizer state's bytes (in the host tier when on the host: then not the device's).
  int64_t StateBytes() const { return (state_a_.size() + state_b_.size()) * static_cast<int64_t>(sizeof(float)); }
  bool on_host() const { return config_.optimizer_on_host; }
  // Spilled weights (OFFLOAD / RELOAD of the optimizer state): the state moved into `tier`, copied
  // on `stream` and waited for (the old buffers go once the copy is done). Not with the optimizer
  // on the host, whose state stays there.
  void MoveState(MemoryTier tier, StreamKind stream);
  MemoryTier state_tier() const { return state_a_.tier(); }
  // What it keeps in the host tier now: on the host, the state, the master copy and the gradient
  // buffer; spilled, the state while it is away.
  int64_t HostBytes() const {
    int64_t floats = 0;
    for (const Buffer* b : {&state_a_, &state_b_, &host_weights_, &host_grads_}) {
      if (!b->empty() && b->tier() == MemoryTier::kHost) floats += b->size();
    }
    return floats * static_cast<int64_t>(sizeof(float));
  }

 private:
  Device& device_;
  TrainingConfig config_;
  int64_t params_;
  Buffer state_a_, state_b_;  // sgd: velocity; adam: m, v
  Buffer host_weights_, host_grads_;  // on the host only: the master copy and the gradients' landing place
  bool master_ready_ = false;
  int updates_ = 0;
};

}  // namespace stagecraft::exec
