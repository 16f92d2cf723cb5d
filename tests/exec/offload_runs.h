// What the cpu and cuda tests of copies to host memory share (tests/exec/activation_copies_test.cpp,
// weight_spill_exec_test.cpp, host_optimizer_test.cpp, tests/exec_gpu/host_copies_gpu_test.cpp):
// GPipe on one rank with a share of its stashes offloaded, the spilled schedule with or without
// its weights spilled, and one run on a fresh device under a device memory limit.
#pragma once

#include <cstdint>
#include <memory>

#include <gtest/gtest.h>

#include "fake_transport.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/offload.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::testing {

inline constexpr int kOffloadMicrobatches = 6, kOffloadSteps = 2;

// GPipe on one rank, lowered, with `offloaded` of its stashes offloaded (PipeOffload's placement).
inline schedules::Schedule OffloadedGpipe(double offloaded) {
  schedules::GeneratorParams p;
  p.ranks = 1;
  p.microbatches = kOffloadMicrobatches;
  p.steps = kOffloadSteps;
  const schedules::Schedule s = schedules::Lower(schedules::Generate("gpipe", p));
  return offloaded > 0 ? schedules::PlaceActivationOffloads(s, {.fraction = {offloaded}}) : s;
}

inline constexpr int kSpilledShards = 4;

// Hydra's spilled schedule on one rank (kSpilledShards shards, kOffloadMicrobatches, kOffloadSteps),
// lowered; its weights spilled (PlaceWeightSpill) or, `spill` false, resident throughout.
inline schedules::Schedule SpilledShards(bool spill, bool double_buffer = true) {
  schedules::GeneratorParams p;
  p.ranks = 1;
  p.chunks = kSpilledShards;
  p.microbatches = kOffloadMicrobatches;
  p.steps = kOffloadSteps;
  const schedules::Schedule s = schedules::Lower(schedules::Generate("spilled", p));
  if (!spill) return s;
  schedules::Schedule spilled = schedules::PlaceWeightSpill(s, {.double_buffer = double_buffer});
  EXPECT_TRUE(schedules::Validate(spilled).empty());
  return spilled;
}

struct OffloadOutcome {
  exec::RankRun run;
  int64_t device_peak = 0;  // the device tier's high-water mark, all allocations included
};

// One run of `s` with `config` on `device` (fresh) with `limit` bytes of device memory (0: none).
inline OffloadOutcome RunOffloaded(std::unique_ptr<exec::Device> device, const schedules::Schedule& s,
                                   const exec::TrainingConfig& config, int64_t limit) {
  device->memory().SetLimit(exec::MemoryTier::kDevice, limit);
  FakeTransport transport;
  const exec::Dataset data =
      exec::MakeDataset(*device, config, int64_t{kOffloadMicrobatches} * kOffloadSteps, true, true);
  exec::RunHooks hooks;
  hooks.keep_final_params = true;
  OffloadOutcome out{exec::RunRank(s, config, data, *device, transport, hooks), 0};
  out.device_peak = device->memory().peak_bytes();
  return out;
}

}  // namespace stagecraft::testing
