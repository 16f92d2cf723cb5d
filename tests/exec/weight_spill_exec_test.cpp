// Spilled weights in the executor (WeightStore::Copy; schedules/offload.h PlaceWeightSpill) on one
// cpu rank: Hydra's spilled schedule, its four shards taking turns on the device, trains to exactly
// the losses and weights of the same schedule with everything resident (a copy moves bytes, it
// changes no arithmetic), times every copy on its lane, keeps what is away in the host tier, and
// fits under a device memory limit the resident run cannot.
#include <gtest/gtest.h>

#include <string>

#include "offload_runs.h"
#include "stagecraft/exec/cpu_device.h"

namespace stagecraft::exec {
namespace {

using testing::OffloadOutcome;

constexpr int kShards = testing::kSpilledShards;

TrainingConfig Config() {
  TrainingConfig c;
  c.model = MlpModel{.layers = kShards, .hidden = 64, .seed = 7};
  c.microbatch_size = 16;
  c.optimizer = "adam";
  c.lr = 0.01f;
  c.layers_per_stage.assign(kShards, 1);
  return c;
}

schedules::Schedule Spilled(bool spill, bool double_buffer = true) { return testing::SpilledShards(spill, double_buffer); }

OffloadOutcome RunShards(const schedules::Schedule& s, int64_t limit = 0) {
  return testing::RunOffloaded(MakeCpuDevice(), s, Config(), limit);
}

TEST(WeightSpillExec, SpilledShardsTrainExactlyAsResidentOnes) {
  const OffloadOutcome resident = RunShards(Spilled(false));
  ASSERT_EQ(resident.run.record.losses.size(), static_cast<size_t>(testing::kOffloadSteps));
  EXPECT_EQ(resident.run.record.peak_host_memory_bytes, -1);
  for (const bool double_buffer : {true, false}) {
    SCOPED_TRACE(double_buffer);
    const schedules::Schedule s = Spilled(true, double_buffer);
    const OffloadOutcome spilled = RunShards(s);
    EXPECT_EQ(spilled.run.record.losses, resident.run.record.losses);
    EXPECT_EQ(spilled.run.final_params, resident.run.final_params);
    int copies = 0;
    for (size_t i = 0; i < s.ops[0].size(); ++i) {
      if (!schedules::IsCopy(s.ops[0][i].kind)) continue;
      ++copies;
      const schedules::OpTiming& t = spilled.run.record.ops[i];
      EXPECT_GE(t.start_ns, 0) << i;
      EXPECT_GE(t.end_ns, t.start_ns) << i;
    }
    EXPECT_GT(copies, 0);
    // Every shard's weights (64 x 64 + 64 floats) with their gradients, and Adam's two moments,
    // start on the host: at least all four there at the start.
    const int64_t shard = (64 * 64 + 64) * 4;
    EXPECT_GE(spilled.run.record.peak_host_memory_bytes, kShards * 4 * shard);
    EXPECT_LT(spilled.run.record.peak_memory_bytes, resident.run.record.peak_memory_bytes);
  }
}

TEST(WeightSpillExec, SpillingFitsUnderALimitTheResidentRunCannot) {
  const OffloadOutcome resident = RunShards(Spilled(false));
  const OffloadOutcome spilled = RunShards(Spilled(true));
  ASSERT_LT(spilled.device_peak, resident.device_peak);
  const int64_t limit = (spilled.device_peak + resident.device_peak) / 2;
  EXPECT_THROW(RunShards(Spilled(false), limit), OutOfMemory);
  const OffloadOutcome limited = RunShards(Spilled(true), limit);
  EXPECT_LE(limited.device_peak, limit);
  EXPECT_EQ(limited.run.record.losses, resident.run.record.losses);
}

}  // namespace
}  // namespace stagecraft::exec
