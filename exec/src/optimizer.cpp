// Optimizer state and update of one stage (see optimizer.h).
#include "stagecraft/exec/optimizer.h"

#include <algorithm>
#include <cmath>

#include "stagecraft/base/check.h"
#include "stagecraft/kernels/host.h"

namespace stagecraft::exec {

Optimizer::Optimizer(Device& device, const TrainingConfig& config, int64_t params)
    : device_(device), config_(config), params_(params) {
  const MemoryTier tier = config_.optimizer_on_host ? MemoryTier::kHost : MemoryTier::kDevice;
  // Zeroed where it lives: the device's fill for its tier, the host's own for the host tier.
  const auto zeroed = [&](Buffer* b) {
    *b = Buffer(device, params, tier);
    if (tier == MemoryTier::kDevice) {
      device_.memory().Fill(b->data(), 0.0f, params);
    } else {
      std::fill_n(b->data(), params, 0.0f);
    }
  };
  zeroed(&state_a_);
  if (config_.optimizer == "adam") zeroed(&state_b_);
  if (config_.optimizer_on_host) {
    host_weights_ = Buffer(device, params, MemoryTier::kHost);
    zeroed(&host_grads_);
  }
}

void Optimizer::MoveState(MemoryTier tier, StreamKind stream) {
  SC_CHECK(!config_.optimizer_on_host, "the optimizer on the host keeps its state there");
  MoveToTier(device_, &state_a_, tier, stream);
  MoveToTier(device_, &state_b_, tier, stream);
}

void Optimizer::Step(const float* w_in, float* w_out, float* grad, float grad_scale, float lr) {
  ++updates_;
  kernels::AdamParams p;
  if (config_.optimizer == "adam") {
    p.lr = lr;
    p.bias1 = 1.0f - std::pow(p.beta1, static_cast<float>(updates_));
    p.bias2 = 1.0f - std::pow(p.beta2, static_cast<float>(updates_));
  }
  if (config_.optimizer_on_host) {
    DeviceMemory& memory = device_.memory();
    if (!master_ready_) {
      memory.Download(host_weights_.data(), w_in, params_);
      master_ready_ = true;
    }
    memory.Download(host_grads_.data(), grad, params_);
    memory.Fill(grad, 0.0f, params_);  // consumed, as the update on the device leaves it
    float* w = host_weights_.data();
    if (config_.optimizer == "adam") {
      kernels::Adam(params_, w, w, state_a_.data(), state_b_.data(), host_grads_.data(), grad_scale, p);
    } else {
      kernels::SgdMomentum(params_, w, w, state_a_.data(), host_grads_.data(), grad_scale, lr,
                           config_.momentum);
    }
    memory.Upload(w_out, w, params_);
    return;
  }
  if (config_.optimizer == "adam") {
    device_.ops().optimizer.adam(device_.op_context(), params_, w_in, w_out, state_a_.data(), state_b_.data(), grad,
                                 grad_scale, p);
  } else {
    device_.ops().optimizer.sgd_momentum(device_.op_context(), params_, w_in, w_out, state_a_.data(), grad, grad_scale,
                                         lr, config_.momentum);
  }
}

}  // namespace stagecraft::exec
