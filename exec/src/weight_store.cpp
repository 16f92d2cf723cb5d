// The weight store of one rank's local stages (weight_store.h).
#include "stagecraft/exec/weight_store.h"

#include <algorithm>

#include <fmt/format.h>

#include "stagecraft/exec/learning_rate.h"
#include "stagecraft/schedules/staleness.h"
#include "stagecraft/schedules/weight_policy.h"
#include "stagecraft/schedules/weights.h"

namespace stagecraft::exec {

void MoveAlongVelocity(Device& device, int64_t n, float factor, const float* velocity, float* w) {
  device.ops().linear.axpy(device.op_context(), n, factor, velocity, w);
}

void VelocityBeforeStep(Device& device, int64_t n, float decay, const float* w_old, float* velocity) {
  device.ops().linear.scal(device.op_context(), n, decay, velocity);
  device.ops().linear.axpy(device.op_context(), n, decay - 1.0f, w_old, velocity);
}

void VelocityAfterStep(Device& device, int64_t n, float decay, const float* w_new, float* velocity) {
  device.ops().linear.axpy(device.op_context(), n, 1.0f - decay, w_new, velocity);
}

WeightStore::WeightStore(const schedules::Schedule& schedule, int rank, Device& device, const TrainingConfig& config)
    : schedule_(schedule),
      rank_(rank),
      device_(device),
      config_(config),
      lifetimes_(schedule, rank),
      slot_of_stage_(static_cast<size_t>(schedule.stages()), -1),
      start_on_host_(schedules::StartOnHost(schedule.ops[static_cast<size_t>(rank)])) {
  stages_.reserve(static_cast<size_t>(schedule.shape.chunks));
  // PipeMare's techniques act on the policy whose backward reads newer weights than its forward.
  if (!schedules::PolicyInfo(schedule.weights).correctable || !config.pipemare) return;
  if (config.pipemare->correction) {
    correction_decay_ = static_cast<float>(config.pipemare->correction_decay);
    correction_spans_ = schedules::CorrectionSpans(schedule, rank);
  }
  if (config.pipemare->lr_reschedule_steps > 0) {
    for (const schedules::StageDelay& d : schedules::WeightDelays(schedule)) forward_delays_.push_back(d.forward);
  }
}

void WeightStore::AddStage(int stage, const StageModel& model) {
  SC_CHECK(stage >= 0 && stage < schedule_.stages() && slot_of_stage_[stage] < 0 &&
               schedule_.shape.RankOf(stage) == rank_,
           "each of the rank's stages joins once");
  slot_of_stage_[stage] = static_cast<int>(stages_.size());
  StageWeights& sw = stages_.emplace_back(device_, config_, stage, model.ParamFloats());
  Buffer w(device_, sw.floats);
  model.InitParams(w.data());
  sw.versions.emplace(0, std::move(w));
  sw.zeroed.push_back(ZeroedBuffer(sw.floats));
  if (correction_decay_ >= 0) sw.velocity = ZeroedBuffer(sw.floats);
  // A spilled stage's version 0 (with its gradients) and optimizer state start on the host: made
  // on the device as any other's, then moved there before the run.
  for (const schedules::TensorKey& key : start_on_host_) {
    if (key.stage != stage) continue;
    if (key.tensor == schedules::Tensor::kWeights && key.version == 0) {
      MoveToTier(device_, &sw.versions.at(0), MemoryTier::kHost, StreamKind::kToHost);
      for (Buffer& g : sw.zeroed) MoveToTier(device_, &g, MemoryTier::kHost, StreamKind::kToHost);
    } else if (key.tensor == schedules::Tensor::kOptimizer) {
      sw.optimizer.MoveState(MemoryTier::kHost, StreamKind::kToHost);
    }
  }
}

void WeightStore::Copy(int op_index, const schedules::Op& op, OpClock& clock) {
  StageWeights& sw = At(op.stage);
  const bool out = op.kind == schedules::OpKind::kOffload;
  const MemoryTier tier = out ? MemoryTier::kHost : MemoryTier::kDevice;
  const StreamKind stream = out ? StreamKind::kToHost : StreamKind::kToDevice;
  // After the compute that made or last read what moves, and a reload after what left before it.
  device_.streams().OrderAfter(stream, StreamKind::kCompute);
  if (!out) device_.streams().OrderAfter(stream, StreamKind::kToHost);
  const int begin = clock.BeginOn(stream);
  if (op.tensor == schedules::Tensor::kOptimizer) {
    sw.optimizer.MoveState(tier, stream);
  } else {
    SC_CHECK(op.tensor == schedules::Tensor::kWeights, "a weight store copies weights or optimizer state");
    const auto v = sw.versions.find(op.version);
    SC_CHECK(v != sw.versions.end(), fmt::format("stage {}: {} of weight version {}, which is not held", op.stage,
                                                 out ? "OFFLOAD" : "RELOAD", op.version));
    MoveToTier(device_, &v->second, tier, stream);
    if (op.version == sw.newest) {
      for (auto& [update, u] : sw.open) MoveToTier(device_, &u.grads, tier, stream);
      for (Buffer& g : sw.zeroed) MoveToTier(device_, &g, tier, stream);
    }
  }
  clock.EndOn(op_index, begin, stream);
}

Buffer WeightStore::ZeroedBuffer(int64_t floats) {
  Buffer b(device_, floats);
  device_.memory().Fill(b.data(), 0.0f, floats);
  return b;
}

GradTarget WeightStore::Gradients(const schedules::Op& op) {
  StageWeights& sw = At(op.stage);
  SC_CHECK(sw.zeroed.empty() || sw.zeroed.back().tier() == MemoryTier::kDevice,
           fmt::format("stage {}: a backward with its gradients in host memory", op.stage));
  auto [it, inserted] = sw.open.try_emplace(schedules::UpdateIndex(schedule_, op));
  if (inserted) {
    // An update that starts while another is still open gets one more buffer.
    if (sw.zeroed.empty()) sw.zeroed.push_back(ZeroedBuffer(sw.floats));
    it->second.grads = std::move(sw.zeroed.back());
    sw.zeroed.pop_back();
  }
  ++it->second.backwards;
  return {it->second.grads.data(), true};
}

float* WeightStore::OpenGradients(const schedules::Op& op, int64_t* floats) {
  StageWeights& sw = At(op.stage);
  const int64_t u = schedules::UpdateIndex(schedule_, op);
  auto g = sw.open.find(u);
  SC_CHECK(g != sw.open.end(),
           fmt::format("stage {} REDUCE_GRAD {}: no gradients for update {}", op.stage, op.version, u));
  *floats = sw.floats;
  return g->second.grads.data();
}

void WeightStore::Step(int op_index, const schedules::Op& op) {
  StageWeights& sw = At(op.stage);
  SC_CHECK(op.version == sw.newest + 1, "a STEP produces the next version");
  const int64_t u = schedules::UpdateIndex(schedule_, op);
  auto g = sw.open.find(u);
  SC_CHECK(g != sw.open.end(), fmt::format("stage {} STEP {}: no gradients for update {}", op.stage, op.version, u));
  // The mean over the update's microbatches and the replicas (whose sum REDUCE_GRAD left), and
  // the loss scale taken back out (exact when the counts are powers of two; one replica leaves
  // the scale bit for bit as it was).
  const float scale = 1.0f / (static_cast<float>(g->second.backwards) * static_cast<float>(schedule_.data_parallel) *
                              config_.loss_scale);
  SC_CHECK(sw.versions.at(sw.newest).tier() == MemoryTier::kDevice && g->second.grads.tier() == MemoryTier::kDevice &&
               (sw.optimizer.on_host() || sw.optimizer.state_tier() == MemoryTier::kDevice),
           fmt::format("stage {} STEP {}: its weights, gradients and optimizer state on the device", op.stage,
                       op.version));
  const float lr = RateOf(op);
  const bool velocity = !sw.velocity.empty();
  if (velocity) {
    VelocityBeforeStep(device_, sw.floats, correction_decay_, sw.versions.at(sw.newest).data(), sw.velocity.data());
  }
  Buffer w;
  if (lifetimes_.StepInPlace(op_index)) {
    w = std::move(sw.versions.at(sw.newest));
    sw.versions.erase(sw.newest);
    sw.optimizer.Step(w.data(), w.data(), g->second.grads.data(), scale, lr);
  } else {
    w = Buffer(device_, sw.floats);
    sw.optimizer.Step(sw.versions.at(sw.newest).data(), w.data(), g->second.grads.data(), scale, lr);
  }
  if (velocity) VelocityAfterStep(device_, sw.floats, correction_decay_, w.data(), sw.velocity.data());
  sw.zeroed.push_back(std::move(g->second.grads));  // the update left it zeroed
  sw.open.erase(g);
  const int old = sw.newest;
  sw.versions.emplace(op.version, std::move(w));
  sw.newest = op.version;
  Release(op_index, sw, old);
  peak_versions_ = std::max(peak_versions_, static_cast<int>(sw.versions.size()));
}

void WeightStore::Correct(int op_index, const schedules::Op& op, bool before) {
  if (correction_decay_ < 0) return;
  const int span = correction_spans_.at(static_cast<size_t>(op_index));
  if (span == 0) return;
  StageWeights& sw = At(op.stage);
  MoveAlongVelocity(device_, sw.floats, static_cast<float>(before ? -span : span), sw.velocity.data(),
                    sw.versions.at(op.version).data());
}

float WeightStore::RateOf(const schedules::Op& op) const {
  const UpdatePlace at{schedules::UpdateIndex(schedule_, op),
                       schedules::UpdatesPerStep(schedule_.weights, schedule_.microbatches), schedule_.steps};
  double rate = ScheduledRate(config_.lr, config_.lr_schedule, at);
  if (!forward_delays_.empty()) {
    const int delay = forward_delays_.at(static_cast<size_t>(op.stage));
    rate = RescheduledRate(rate, delay, config_.pipemare->lr_reschedule_steps, at);
  }
  return static_cast<float>(rate);
}

}  // namespace stagecraft::exec
