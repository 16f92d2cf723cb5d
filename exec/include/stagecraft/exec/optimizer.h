// One stage's optimizer: its state on the device (SGD: the velocity; Adam: m and v, zeroed)
// and the update the runtime's STEP and the profiler both apply (kernels/optimizer.h math).
#pragma once

#include <cstdint>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/runtime.h"

namespace stagecraft::exec {

class Optimizer {
 public:
  // `config` gives the kind ("sgd" | "adam"), lr and momentum; `params` the floats updated.
  Optimizer(Device& device, const TrainingConfig& config, int64_t params);

  // w_out ← update(w_in, grad · grad_scale), w_out being w_in for an update in place or the
  // next version's buffer; Adam's bias correction counts this update (t from 1). grad is left
  // all zeros (the update consumes it; kernels/host.h).
  void Step(const float* w_in, float* w_out, float* grad, float grad_scale);
  int64_t StateBytes() const { return (state_a_.size() + state_b_.size()) * static_cast<int64_t>(sizeof(float)); }

 private:
  Device& device_;
  TrainingConfig config_;
  int64_t params_;
  Buffer state_a_, state_b_;  // sgd: velocity; adam: m, v
  int updates_ = 0;
};

}  // namespace stagecraft::exec
