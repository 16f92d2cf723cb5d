// Memory and weight versions over time (see memory_model.h).
#include "stagecraft/sim/memory_model.h"

#include <algorithm>
#include <limits>

#include "stagecraft/base/check.h"
#include "stagecraft/base/stop.h"
#include "stagecraft/schedules/lifetimes.h"
#include "stagecraft/schedules/shared_devices.h"
#include "stagecraft/schedules/tensors.h"
#include "stagecraft/schedules/weight_policy.h"

namespace stagecraft::sim {

using schedules::Op;
using schedules::RankRecord;

bool KeepsWeightVelocity(const schedules::Schedule& schedule, const CostTable& costs) {
  return costs.weight_velocity && schedules::PolicyInfo(schedule.weights).correctable;
}

MemoryModel::MemoryModel(const schedules::Schedule& schedule, const CostTable& costs, bool record_samples,
                         schedules::RunRecord* record, const std::atomic<bool>* stop,
                         const std::vector<int>& rank_devices)
    : shape_(schedule.shape), costs_(costs), record_samples_(record_samples), record_(record) {
  StopCheck check(stop);
  schedules::SharedDevices devices = schedules::FindSharedDevices(rank_devices, schedule.ranks());
  shared_of_ = std::move(devices.of_rank);
  shared_ranks_ = std::move(devices.ranks);
  shared_bytes_.assign(shared_ranks_.size(), 0);
  const int stages = schedule.stages();
  const int ranks = schedule.ranks();
  SC_CHECK(static_cast<int>(costs.stages.size()) == stages, "one cost entry per stage");
  SC_CHECK(static_cast<int>(record->ranks.size()) == ranks, "one rank record per rank");
  bytes_.assign(ranks, 0);
  readers_left_.assign(stages, {});
  live_versions_.assign(stages, 1);
  newest_.assign(stages, 0);
  // The F, B, I and W reading each version (a STEP's read of its base is StepDone's business).
  for (int r = 0; r < ranks; ++r) {
    check();
    const schedules::WeightLifetimes lifetimes(schedule, r);
    lifetimes.ForEachStage([&](int stage, const std::vector<schedules::VersionLife>& lives) {
      auto& readers = readers_left_[static_cast<size_t>(stage)];
      if (readers.size() < lives.size()) readers.resize(lives.size(), 0);
      for (size_t v = 0; v < lives.size(); ++v) readers[v] += lives[v].compute_readers;
    });
  }
  // What a spilled stage keeps on the host from the start is not on the device (tensors.h).
  std::vector<bool> weights_away(static_cast<size_t>(stages), false), optimizer_away(static_cast<size_t>(stages), false);
  for (int r = 0; r < ranks; ++r) {
    for (const schedules::TensorKey& key : schedules::StartOnHost(schedule.ops[r])) {
      if (key.stage < 0 || key.stage >= stages) continue;
      (key.tensor == schedules::Tensor::kWeights ? weights_away : optimizer_away)[static_cast<size_t>(key.stage)] = true;
    }
  }
  const bool velocity = KeepsWeightVelocity(schedule, costs);
  for (int stage = 0; stage < stages; ++stage) {
    const StageCost& c = costs.stages[stage];
    const int rank = shape_.RankOf(stage);
    if (!weights_away[static_cast<size_t>(stage)]) bytes_[rank] += Wide{c.weight_bytes} + c.grad_bytes;
    if (velocity) bytes_[rank] += c.weight_bytes;  // PipeMare's correction
    // optimizer: host keeps it in host memory (cost_models.h PlaceOptimizerOnHost).
    if (!optimizer_away[static_cast<size_t>(stage)] && !costs.optimizer_on_host) bytes_[rank] += c.optimizer_bytes;
    record->ranks[rank].peak_weight_versions = 1;
  }
  for (int r = 0; r < ranks; ++r) {
    if (shared_of_[r] < 0) continue;
    shared_bytes_[shared_of_[r]] += bytes_[r];
    record->ranks[r].device = rank_devices[static_cast<size_t>(r)];
  }
  for (int r = 0; r < ranks; ++r) Add(0, r, 0);
}

int64_t MemoryModel::Saturated(Wide bytes) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  return bytes > kMax ? kMax : bytes < kMin ? kMin : static_cast<int64_t>(bytes);
}

void MemoryModel::Add(int64_t now_ns, int rank, int64_t delta) {
  bytes_[rank] += delta;
  const int64_t now_bytes = Saturated(bytes_[rank]);
  RankRecord& rr = record_->ranks[rank];
  rr.peak_memory_bytes = std::max(rr.peak_memory_bytes, now_bytes);
  if (const int d = shared_of_[rank]; d >= 0) {
    shared_bytes_[d] += delta;
    const int64_t device_bytes = Saturated(shared_bytes_[d]);
    for (int r : shared_ranks_[d]) {
      int64_t& peak = record_->ranks[r].device_peak_memory_bytes;
      peak = std::max(peak, device_bytes);
    }
  }
  if (!record_samples_) return;
  auto& samples = rr.memory;
  if (!samples.empty() && samples.back().time_ns == now_ns) {
    samples.back().bytes = now_bytes;
  } else {
    samples.push_back({now_ns, now_bytes});
  }
}

namespace {

// What a compute op holds only while it runs.
int64_t Workspace(const StageCost& c, const Op& op) {
  switch (schedules::Info(op.kind).memory.workspace) {
    case schedules::Workspace::kForward: return c.workspace_bytes;
    case schedules::Workspace::kBackward: return c.BackwardWorkspace();
    case schedules::Workspace::kNone: return 0;
  }
  return 0;
}

}  // namespace

void MemoryModel::ComputeStarted(int64_t now_ns, int rank, const Op& op) {
  const StageCost& c = costs_.stages[op.stage];
  const schedules::MemoryEffect& effect = schedules::Info(op.kind).memory;
  const int64_t held = (effect.recompute ? c.recompute_bytes : 0) + Workspace(c, op);
  if (held != 0) Add(now_ns, rank, held);
  if (effect.activations <= 0) return;
  Add(now_ns, rank, costs_.stages[op.stage].activation_bytes);
}

void MemoryModel::ComputeFinished(int64_t now_ns, int rank, const Op& op) {
  const StageCost& c = costs_.stages[op.stage];
  if (const int64_t workspace = Workspace(c, op); workspace != 0) Add(now_ns, rank, -workspace);
  if (schedules::ProducesVersion(op.kind)) return StepDone(now_ns, op);  // in place unless F/B/I/W still read the base
  const schedules::MemoryEffect& effect = schedules::Info(op.kind).memory;
  if (effect.activations < 0 || effect.w_stash != 0) {
    // B frees the activations (and the recomputed forward), I swaps them for the W stash, W frees that.
    const int64_t freed = effect.activations < 0 ? -c.activation_bytes - c.recompute_bytes : 0;
    Add(now_ns, rank, (effect.w_stash > 0 ? c.w_stash_bytes : 0) + freed - (effect.w_stash < 0 ? c.w_stash_bytes : 0));
  }
  ReadDone(now_ns, op);
}

void MemoryModel::ReadDone(int64_t now_ns, const Op& op) {
  auto& left = readers_left_[op.stage][op.version];
  if (--left == 0 && op.version != newest_[op.stage]) {
    --live_versions_[op.stage];
    Add(now_ns, shape_.RankOf(op.stage), -costs_.stages[op.stage].weight_bytes);
  }
}

void MemoryModel::StepDone(int64_t now_ns, const Op& step) {
  const int stage = step.stage;
  const int old = newest_[stage];
  newest_[stage] = std::max(newest_[stage], step.version);
  const auto& readers = readers_left_[stage];
  const bool old_freed = old >= static_cast<int>(readers.size()) || readers[old] == 0;
  const int rank = shape_.RankOf(stage);
  if (!old_freed) {
    ++live_versions_[stage];
    Add(now_ns, rank, costs_.stages[stage].weight_bytes);
  }
  RankRecord& rr = record_->ranks[rank];
  rr.peak_weight_versions = std::max(rr.peak_weight_versions, live_versions_[stage]);
}

}  // namespace stagecraft::sim
