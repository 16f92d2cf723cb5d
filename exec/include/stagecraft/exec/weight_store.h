// The weights of one rank's local stages as the IR names them (schedules/weights.h): versions
// (flush: one, in place; PipeDream: a stash; 2BW: two) freed after their last reader, the zeroed
// gradient buffer each open update adds into, reused, and the optimizer a STEP applies.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "stagecraft/base/check.h"
#include "stagecraft/exec/device.h"
#include "stagecraft/exec/op_clock.h"
#include "stagecraft/exec/optimizer.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/stage.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/lifetimes.h"
#include "stagecraft/schedules/tensors.h"

namespace stagecraft::exec {

// PipeMare's correction as the weight store runs it and the profiler times it, one BLAS call per
// pass over the weights (LinearOps): w ← w + factor·δ (a backward's weights moved back by c
// updates, factor −c, and forward again, +c); and the velocity δ ← γδ + (1 − γ)(w_new − w_old) in
// its two halves around an update, δ ← γδ − (1 − γ)·w_old before it and δ += (1 − γ)·w_new after.
void MoveAlongVelocity(Device& device, int64_t n, float factor, const float* velocity, float* w);
void VelocityBeforeStep(Device& device, int64_t n, float decay, const float* w_old, float* velocity);
void VelocityAfterStep(Device& device, int64_t n, float decay, const float* w_new, float* velocity);

class WeightStore {
 public:
  // For `rank`'s op list of `schedule`: which op reads each version last and which STEPs update
  // in place. Stages join with AddStage. Keeps references to `schedule` and `device`.
  WeightStore(const schedules::Schedule& schedule, int rank, Device& device, const TrainingConfig& config);

  // Local stage `stage` of `model`'s size: its optimizer state, version 0 (model.InitParams) and
  // one zeroed gradient buffer, made before the run (the simulator holds a stage's gradients
  // throughout, DESIGN.md §4).
  void AddStage(int stage, const StageModel& model);

  // What the store keeps in the host tier now, bytes: its optimizers' (on the host, or spilled),
  // and spilled weight versions and gradient buffers.
  int64_t HostBytes() const {
    int64_t bytes = 0;
    const auto add = [&bytes](const Buffer& b) {
      if (!b.empty() && b.tier() == MemoryTier::kHost) bytes += b.size() * static_cast<int64_t>(sizeof(float));
    };
    for (const StageWeights& sw : stages_) {
      bytes += sw.optimizer.HostBytes();
      for (const auto& [version, w] : sw.versions) add(w);
      for (const auto& [update, u] : sw.open) add(u.grads);
      for (const Buffer& g : sw.zeroed) add(g);
    }
    return bytes;
  }

  // OFFLOAD or RELOAD `op` (op `op_index`) of a weight version or of the optimizer state
  // (schedules/offload.h PlaceWeightSpill): the version's buffer, with the stage's gradient
  // buffers when it is the newest (they travel together, as the simulator moves them:
  // sim::CopyBytes), or the optimizer's state, copied into the other tier on its copy stream and
  // timed there by `clock`; the copy is waited for before the old buffers go. What starts on the
  // host (schedules::StartOnHost) is put there by AddStage.
  void Copy(int op_index, const schedules::Op& op, OpClock& clock);

  // The version an F, B, I or W reads (its `version`).
  const float* Read(const schedules::Op& op) {
    const Buffer& w = At(op.stage).versions.at(op.version);
    SC_CHECK(w.tier() == MemoryTier::kDevice, "an op reads weights on the device (a RELOAD brought them)");
    return w.data();
  }
  // The newest version of `stage`.
  float* Newest(int stage) {
    StageWeights& sw = At(stage);
    return sw.versions.at(sw.newest).data();
  }
  // The gradient buffer of the update `op` (a B or W) feeds, which every backward of the update
  // adds into: it starts as zeros, so the first one needs no BLAS pass that clears it. Counts
  // `op` among the update's backwards, whose mean the STEP applies.
  GradTarget Gradients(const schedules::Op& op);
  // The gradient buffer of the open update a REDUCE_GRAD `op` names (every backward of it has
  // run), which the replicas sum in place; `*floats` gets its size.
  float* OpenGradients(const schedules::Op& op, int64_t* floats);
  // STEP `op`, op `op_index` of the rank: the mean of its update's gradients (the loss scale
  // taken back out; with D replicas the sum of theirs divided by D, each replica's loss being
  // the mean over its b of the D·b samples) applied by the stage's optimizer, in place when no later op reads the old
  // version, else into a buffer of its own; the gradient buffer, left zeroed by the update, waits
  // for the next update, and the old version is freed if this STEP was its last reader. The rate
  // is RateOf's; with the correction the stage's velocity follows the weights' change.
  void Step(int op_index, const schedules::Op& op);
  // PipeMare's discrepancy correction (training.pipemare.correction, a schedule of the no-stash
  // policy): around B or I `op` (op `op_index`), the weights it reads are moved back towards its
  // forward's, w ← w − c·δ before (`before`) and w ← w + c·δ after, c being the updates its stage
  // made between the two (schedules::CorrectionSpans) and δ the stage's weight velocity, the
  // moving average δ ← γδ + (1 − γ)(w_new − w_old) each STEP keeps. Nothing otherwise.
  void Correct(int op_index, const schedules::Op& op, bool before);
  // The rate of STEP `op`: training.lr_schedule's, rescheduled per stage by PipeMare's delay.
  float RateOf(const schedules::Op& op) const;
  // After F, B, I or W `op`, op `op_index` of the rank: frees the version it read when it was
  // that version's last reader and the version is not the newest.
  void Release(int op_index, const schedules::Op& op) { Release(op_index, At(op.stage), op.version); }

  int newest(int stage) { return At(stage).newest; }
  // Where the newest version of `stage` is (spilled: the host, after its last OFFLOAD).
  MemoryTier newest_tier(int stage) {
    StageWeights& sw = At(stage);
    return sw.versions.at(sw.newest).tier();
  }
  int versions(int stage) { return static_cast<int>(At(stage).versions.size()); }
  // Gradient buffers of `stage` that hold zeros and wait for an update.
  int zeroed_gradients(int stage) { return static_cast<int>(At(stage).zeroed.size()); }
  // The most versions one local stage held after any STEP (at least 1).
  int peak_versions() const { return peak_versions_; }

 private:
  struct Update {
    Buffer grads;
    int backwards = 0;  // B and W ops that added into it
  };
  struct StageWeights {
    StageWeights(Device& device, const TrainingConfig& config, int stage, int64_t floats)
        : optimizer(device, config, floats), stage(stage), floats(floats) {}
    Optimizer optimizer;
    int stage = 0;
    int64_t floats = 0;
    std::map<int, Buffer> versions;
    int newest = 0;
    std::map<int64_t, Update> open;  // by update index (schedules::UpdateIndex)
    std::vector<Buffer> zeroed;      // gradient buffers of no open update, all zeros
    Buffer velocity;                 // PipeMare's δ, with the correction only
  };

  StageWeights& At(int stage) {
    const int slot = stage >= 0 && stage < static_cast<int>(slot_of_stage_.size()) ? slot_of_stage_[stage] : -1;
    SC_CHECK(slot >= 0, "an op of a stage this rank holds");
    return stages_[static_cast<size_t>(slot)];
  }
  void Release(int op_index, StageWeights& sw, int version) {
    if (version != sw.newest && lifetimes_.Of(sw.stage).at(static_cast<size_t>(version)).last_read_at == op_index) {
      sw.versions.erase(version);
    }
  }
  Buffer ZeroedBuffer(int64_t floats);

  const schedules::Schedule& schedule_;
  const int rank_;
  Device& device_;
  const TrainingConfig& config_;
  const schedules::WeightLifetimes lifetimes_;  // of the rank's ops: last readers, STEPs in place
  std::vector<int> slot_of_stage_;          // stage -> index in stages_, -1 when not local
  std::vector<StageWeights> stages_;
  std::vector<schedules::TensorKey> start_on_host_;  // of the rank's list (schedules::StartOnHost)
  // PipeMare: the γ of the correction (< 0: no correction), the updates each of the rank's ops
  // spans (schedules::CorrectionSpans), and each stage's forward delay for the rescheduling.
  float correction_decay_ = -1.0f;
  std::vector<int> correction_spans_;
  std::vector<int> forward_delays_;
  int peak_versions_ = 1;
};

}  // namespace stagecraft::exec
