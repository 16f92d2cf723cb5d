// Activation offload in the executor (exec/activation_copies.h) on one cpu rank: GPipe with
// PipeOffload-placed copies trains to exactly the losses and weights of the same run without them
// (a copy moves bytes, it changes no arithmetic), times every copy, holds the offloaded
// activations in the host tier, and fits under a device memory limit the run without copies
// cannot (DeviceMemory::SetLimit: a hard limit, as a full device).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "offload_runs.h"
#include "stagecraft/exec/cpu_device.h"

namespace stagecraft::exec {
namespace {

using testing::OffloadedGpipe;
using testing::OffloadOutcome;

TrainingConfig Config() {
  TrainingConfig c;
  c.model = MlpModel{.layers = 4, .hidden = 32, .seed = 5};
  c.microbatch_size = 16;
  c.lr = 0.05f;
  c.layers_per_stage = {4};
  return c;
}

// One run on a fresh cpu device with `limit` bytes of device memory (0: none).
OffloadOutcome RunGpipe(const schedules::Schedule& s, int64_t limit = 0) {
  return testing::RunOffloaded(MakeCpuDevice(), s, Config(), limit);
}

TEST(ActivationCopies, OffloadChangesNothingButWhereTheActivationsWait) {
  const OffloadOutcome plain = RunGpipe(OffloadedGpipe(0));
  EXPECT_EQ(plain.run.record.peak_host_memory_bytes, -1);
  for (const double f : {0.5, 1.0}) {
    SCOPED_TRACE(f);
    const schedules::Schedule s = OffloadedGpipe(f);
    const OffloadOutcome off = RunGpipe(s);
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
    EXPECT_EQ(copies, 2 * static_cast<int>(f * testing::kOffloadMicrobatches) * testing::kOffloadSteps);
    EXPECT_GT(off.run.record.peak_host_memory_bytes, 0);
    // Half: the longest-lived stashes go, but the reloads one op before their B bring two back
    // beside the last microbatches' (no lower peak on one rank); all: fewer at once.
    EXPECT_LE(off.run.record.peak_memory_bytes, plain.run.record.peak_memory_bytes);
    if (f == 1.0) {
      EXPECT_LT(off.run.record.peak_memory_bytes, plain.run.record.peak_memory_bytes);
    }
  }
}

TEST(ActivationCopies, OffloadFitsUnderADeviceLimitTheRunWithoutCannot) {
  const OffloadOutcome plain = RunGpipe(OffloadedGpipe(0));
  const OffloadOutcome off = RunGpipe(OffloadedGpipe(1));
  ASSERT_LT(off.device_peak, plain.device_peak);
  const int64_t limit = (off.device_peak + plain.device_peak) / 2;
  try {
    RunGpipe(OffloadedGpipe(0), limit);
    ADD_FAILURE() << "the run without copies fit under " << limit << " bytes";
  } catch (const OutOfMemory& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("out of memory at 0F", 0), 0u) << what;
    EXPECT_NE(what.find("device memory limit of " + std::to_string(limit) + " bytes"), std::string::npos) << what;
  }
  const OffloadOutcome limited = RunGpipe(OffloadedGpipe(1), limit);
  EXPECT_LE(limited.device_peak, limit);
  EXPECT_EQ(limited.run.record.losses, plain.run.record.losses);
}

}  // namespace
}  // namespace stagecraft::exec
