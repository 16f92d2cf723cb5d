// The optimizer on the host (TrainingConfig::optimizer_on_host, ZeRO-Offload; exec/optimizer.h)
// on one cpu rank: GPipe trains to exactly the losses and weights of the run with the optimizer on
// the device, for Adam and SGD (the same host kernel updates the same numbers, only elsewhere), the
// device tier holds no optimizer state (its peak drops by exactly the state's bytes), the host
// tier holds the state, the master weights and the gradients, and the run fits under a device
// limit the one with the state on the device cannot.
#include <gtest/gtest.h>

#include <string>

#include "offload_runs.h"
#include "stagecraft/exec/cpu_device.h"

namespace stagecraft::exec {
namespace {

using testing::OffloadedGpipe;
using testing::OffloadOutcome;

constexpr int kLayers = 4, kHidden = 32;

TrainingConfig Config(const std::string& optimizer, bool on_host) {
  TrainingConfig c;
  c.model = MlpModel{.layers = kLayers, .hidden = kHidden, .seed = 5};
  c.microbatch_size = 16;
  c.optimizer = optimizer;
  c.lr = optimizer == "adam" ? 0.01f : 0.05f;
  c.layers_per_stage = {kLayers};
  c.optimizer_on_host = on_host;
  return c;
}

OffloadOutcome RunGpipe(const TrainingConfig& c, int64_t limit = 0) {
  return testing::RunOffloaded(MakeCpuDevice(), OffloadedGpipe(0), c, limit);
}

TEST(HostOptimizer, TrainsExactlyAsOnTheDeviceWithTheStateOffIt) {
  const int64_t params = int64_t{kLayers} * (kHidden * kHidden + kHidden);
  for (const std::string optimizer : {"adam", "sgd"}) {
    SCOPED_TRACE(optimizer);
    const OffloadOutcome device = RunGpipe(Config(optimizer, false));
    const OffloadOutcome host = RunGpipe(Config(optimizer, true));
    ASSERT_EQ(device.run.record.losses.size(), static_cast<size_t>(testing::kOffloadSteps));
    EXPECT_EQ(host.run.record.losses, device.run.record.losses);
    EXPECT_EQ(host.run.final_params, device.run.final_params);
    const int64_t state = (optimizer == "adam" ? 2 : 1) * params * 4;
    EXPECT_EQ(device.run.record.peak_memory_bytes - host.run.record.peak_memory_bytes, state);
    EXPECT_EQ(device.run.record.peak_host_memory_bytes, -1);
    // The state, the master weights and the gradients' landing place.
    EXPECT_EQ(host.run.record.peak_host_memory_bytes, state + 2 * params * 4);
  }
}

TEST(HostOptimizer, FitsUnderADeviceLimitTheStateOnTheDeviceDoesNot) {
  const OffloadOutcome device = RunGpipe(Config("adam", false));
  const OffloadOutcome host = RunGpipe(Config("adam", true));
  ASSERT_LT(host.device_peak, device.device_peak);
  const int64_t limit = (host.device_peak + device.device_peak) / 2;
  EXPECT_THROW(RunGpipe(Config("adam", false), limit), OutOfMemory);
  const OffloadOutcome limited = RunGpipe(Config("adam", true), limit);
  EXPECT_LE(limited.device_peak, limit);
  EXPECT_EQ(limited.run.record.losses, device.run.record.losses);
}

}  // namespace
}  // namespace stagecraft::exec
