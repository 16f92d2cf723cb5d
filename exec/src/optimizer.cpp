// Optimizer state and update of one stage (see optimizer.h).
#include "stagecraft/exec/optimizer.h"

#include <cmath>

namespace stagecraft::exec {

Optimizer::Optimizer(Device& device, const TrainingConfig& config, int64_t params)
    : device_(device), config_(config), params_(params), state_a_(device, params) {
  device_.memory().Fill(state_a_.data(), 0.0f, params);
  if (config_.optimizer == "adam") {
    state_b_ = Buffer(device, params);
    device_.memory().Fill(state_b_.data(), 0.0f, params);
  }
}

void Optimizer::Step(const float* w_in, float* w_out, float* grad, float grad_scale) {
  ++updates_;
  if (config_.optimizer == "adam") {
    kernels::AdamParams p;
    p.lr = config_.lr;
    p.bias1 = 1.0f - std::pow(p.beta1, static_cast<float>(updates_));
    p.bias2 = 1.0f - std::pow(p.beta2, static_cast<float>(updates_));
    device_.ops().optimizer.adam(device_.op_context(), params_, w_in, w_out, state_a_.data(), state_b_.data(), grad,
                                 grad_scale, p);
  } else {
    device_.ops().optimizer.sgd_momentum(device_.op_context(), params_, w_in, w_out, state_a_.data(), grad, grad_scale,
                                         config_.lr, config_.momentum);
  }
}

}  // namespace stagecraft::exec
