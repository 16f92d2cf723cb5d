// Copies to host memory on the cuda device, into page-locked host memory on the device's to-host
// stream and back on its to-device stream. Activation offload (exec/activation_copies.h): GPipe
// with every stash (and half of them) offloaded trains to the losses and weights of the run
// without copies (within 1e-6: the same kernels on the same data), times every copy on its stream,
// and fits under a device limit the run without copies cannot. Spilled weights (WeightStore::Copy):
// the spilled schedule trains as with its shards resident and fits where they do not. The
// optimizer on the host (exec/optimizer.h): the host's Adam trains as the device's (within 1e-6)
// with no optimizer state on the device. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../exec/offload_runs.h"
#include "exec_gpu_test_util.h"
#include "stagecraft/exec/cuda_device.h"

namespace stagecraft::exec {
namespace {

using testing::OffloadedGpipe;
using testing::OffloadOutcome;

TrainingConfig GpuConfig(int stages) {
  TrainingConfig config;
  config.model = MlpModel{.layers = 4, .hidden = 256, .seed = 5};
  config.microbatch_size = 64;
  config.optimizer = "adam";
  config.lr = 0.01f;
  config.layers_per_stage.assign(static_cast<size_t>(stages), 4 / stages);
  return config;
}

OffloadOutcome RunOnGpu(const schedules::Schedule& s, int64_t limit = 0, bool optimizer_on_host = false) {
  TrainingConfig config = GpuConfig(s.stages());
  config.optimizer_on_host = optimizer_on_host;
  return testing::RunOffloaded(MakeCudaDevice(0, GemmPrecision::kFp32), s, config, limit);
}

void ExpectSameTraining(const RankRun& got, const RankRun& want) {
  ASSERT_EQ(got.record.losses.size(), want.record.losses.size());
  for (size_t t = 0; t < want.record.losses.size(); ++t) {
    EXPECT_NEAR(got.record.losses[t], want.record.losses[t], 1e-6 * std::abs(want.record.losses[t])) << "step " << t;
  }
  ASSERT_EQ(got.final_params.size(), want.final_params.size());
  for (size_t k = 0; k < want.final_params.size(); ++k) {
    double diff2 = 0, ref2 = 0;
    for (size_t i = 0; i < want.final_params[k].size(); ++i) {
      const double d = got.final_params[k][i] - want.final_params[k][i];
      diff2 += d * d;
      ref2 += static_cast<double>(want.final_params[k][i]) * want.final_params[k][i];
    }
    EXPECT_LE(std::sqrt(diff2 / ref2), 1e-6) << "stage " << k;
  }
}

TEST(ActivationCopiesGpu, OffloadTrainsAsTheRunWithoutAndTimesEveryCopy) {
  SKIP_WITHOUT_GPU();
  const OffloadOutcome plain = RunOnGpu(OffloadedGpipe(0));
  for (const double f : {0.5, 1.0}) {
    SCOPED_TRACE(f);
    const schedules::Schedule s = OffloadedGpipe(f);
    const OffloadOutcome off = RunOnGpu(s);
    ExpectSameTraining(off.run, plain.run);
    for (size_t i = 0; i < s.ops[0].size(); ++i) {
      if (!schedules::IsCopy(s.ops[0][i].kind)) continue;
      const schedules::OpTiming& t = off.run.record.ops[i];
      EXPECT_GE(t.start_ns, 0) << i;
      EXPECT_GE(t.end_ns, t.start_ns) << i;
    }
    EXPECT_GT(off.run.record.peak_host_memory_bytes, 0);
  }
}

TEST(ActivationCopiesGpu, OffloadFitsUnderADeviceLimitTheRunWithoutCannot) {
  SKIP_WITHOUT_GPU();
  const OffloadOutcome plain = RunOnGpu(OffloadedGpipe(0));
  const OffloadOutcome off = RunOnGpu(OffloadedGpipe(1));
  ASSERT_LT(off.device_peak, plain.device_peak);
  const int64_t limit = (off.device_peak + plain.device_peak) / 2;
  EXPECT_THROW(RunOnGpu(OffloadedGpipe(0), limit), OutOfMemory);
  const OffloadOutcome limited = RunOnGpu(OffloadedGpipe(1), limit);
  EXPECT_LE(limited.device_peak, limit);
  ExpectSameTraining(limited.run, plain.run);
}

TEST(WeightSpillGpu, SpilledShardsTrainAsResidentOnesAndFitWhereTheyDoNot) {
  SKIP_WITHOUT_GPU();
  const OffloadOutcome resident = RunOnGpu(testing::SpilledShards(false));
  const OffloadOutcome spilled = RunOnGpu(testing::SpilledShards(true));
  ExpectSameTraining(spilled.run, resident.run);
  EXPECT_GT(spilled.run.record.peak_host_memory_bytes, 0);
  ASSERT_LT(spilled.device_peak, resident.device_peak);
  const int64_t limit = (spilled.device_peak + resident.device_peak) / 2;
  EXPECT_THROW(RunOnGpu(testing::SpilledShards(false), limit), OutOfMemory);
  const OffloadOutcome limited = RunOnGpu(testing::SpilledShards(true), limit);
  EXPECT_LE(limited.device_peak, limit);
  ExpectSameTraining(limited.run, resident.run);
}

TEST(HostOptimizerGpu, TheHostsAdamTrainsAsTheDevicesWithTheStateOffIt) {
  SKIP_WITHOUT_GPU();
  const OffloadOutcome device = RunOnGpu(OffloadedGpipe(0));
  const OffloadOutcome host = RunOnGpu(OffloadedGpipe(0), 0, true);
  ExpectSameTraining(host.run, device.run);
  const int64_t state = 2 * int64_t{4} * (256 * 256 + 256) * 4;  // Adam's two moments of 4 layers
  EXPECT_EQ(device.run.record.peak_memory_bytes - host.run.record.peak_memory_bytes, state);
  EXPECT_GT(host.run.record.peak_host_memory_bytes, state);
}

}  // namespace
}  // namespace stagecraft::exec
