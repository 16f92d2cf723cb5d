// Activation offload in the executor (exec/activation_copies.h) on one cpu rank: GPipe with
// PipeOffload-placed copies trains to exactly the losses and weights of the same run without them
// (a copy moves bytes, it changes no arithmetic), times every copy, holds the offloaded
// activations in the host tier, and fits under a device memory limit the run without copies
// cannot (DeviceMemory::SetLimit: a hard limit, as a full device).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_transport.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/offload.h"

namespace stagecraft::exec {
namespace {

constexpr int kMicrobatches = 6, kSteps = 2;

schedules::Schedule Gpipe(double offloaded) {
  schedules::GeneratorParams p;
  p.ranks = 1;
  p.microbatches = kMicrobatches;
  p.steps = kSteps;
  const schedules::Schedule s = schedules::Lower(schedules::Generate("gpipe", p));
  return offloaded > 0 ? schedules::PlaceActivationOffloads(s, {.fraction = {offloaded}}) : s;
}

TrainingConfig Config() {
  TrainingConfig c;
  c.model = MlpModel{.layers = 4, .hidden = 32, .seed = 5};
  c.microbatch_size = 16;
  c.lr = 0.05f;
  c.layers_per_stage = {4};
  return c;
}

struct Outcome {
  RankRun run;
  int64_t device_peak = 0;  // the device tier's high-water mark, all allocations included
};

// One run on a fresh device with `limit` bytes of device memory (0: none).
Outcome RunGpipe(const schedules::Schedule& s, int64_t limit = 0) {
  auto device = MakeCpuDevice();
  device->memory().SetLimit(MemoryTier::kDevice, limit);
  testing::FakeTransport transport;
  const TrainingConfig config = Config();
  const Dataset data = MakeDataset(*device, config, int64_t{kMicrobatches} * kSteps, true, true);
  RunHooks hooks;
  hooks.keep_final_params = true;
  Outcome out{RunRank(s, config, data, *device, transport, hooks), 0};
  out.device_peak = device->memory().peak_bytes();
  return out;
}

TEST(ActivationCopies, OffloadChangesNothingButWhereTheActivationsWait) {
  const Outcome plain = RunGpipe(Gpipe(0));
  EXPECT_EQ(plain.run.record.peak_host_memory_bytes, -1);
  for (const double f : {0.5, 1.0}) {
    SCOPED_TRACE(f);
    const schedules::Schedule s = Gpipe(f);
    const Outcome off = RunGpipe(s);
    EXPECT_EQ(off.run.record.losses, plain.run.record.losses);
    EXPECT_EQ(off.run.final_params, plain.run.final_params);
    int copies = 0;
    for (size_t i = 0; i < s.ops[0].size(); ++i) {
      if (!schedules::IsCopy(s.ops[0][i].kind)) continue;
      ++copies;
      const schedules::OpTiming& t = off.run.record.ops[i];
      EXPECT_GE(t.start_ns, 0) << i;
      EXPECT_GE(t.end_ns, t.start_ns) << i;
    }
    EXPECT_EQ(copies, 2 * static_cast<int>(f * kMicrobatches) * kSteps);
    EXPECT_GT(off.run.record.peak_host_memory_bytes, 0);
    // Half: the longest-lived stashes go, but the reloads one op before their B bring two back
    // beside the last microbatches' (no lower peak on one rank); all: fewer at once.
    EXPECT_LE(off.run.record.peak_memory_bytes, plain.run.record.peak_memory_bytes);
    if (f == 1.0) EXPECT_LT(off.run.record.peak_memory_bytes, plain.run.record.peak_memory_bytes);
  }
}

TEST(ActivationCopies, OffloadFitsUnderADeviceLimitTheRunWithoutCannot) {
  const Outcome plain = RunGpipe(Gpipe(0));
  const Outcome off = RunGpipe(Gpipe(1));
  ASSERT_LT(off.device_peak, plain.device_peak);
  const int64_t limit = (off.device_peak + plain.device_peak) / 2;
  try {
    RunGpipe(Gpipe(0), limit);
    ADD_FAILURE() << "the run without copies fit under " << limit << " bytes";
  } catch (const OutOfMemory& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("out of memory at 0F", 0), 0u) << what;
    EXPECT_NE(what.find("device memory limit of " + std::to_string(limit) + " bytes"), std::string::npos) << what;
  }
  const Outcome limited = RunGpipe(Gpipe(1), limit);
  EXPECT_LE(limited.device_peak, limit);
  EXPECT_EQ(limited.run.record.losses, plain.run.record.losses);
}

}  // namespace
}  // namespace stagecraft::exec
