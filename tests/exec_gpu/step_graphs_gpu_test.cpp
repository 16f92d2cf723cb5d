// Step graphs on the cuda device (exec/cuda/cuda_graphs.cpp): a one-rank run with the steady
// step captured into CUDA Graphs and replayed trains as the same run issued call by call.
// Not bit for bit: under capture cuBLAS works in the cuBLASLt workspace the device lends it,
// which may pick another algorithm, so losses and weights agree to a tolerance that scales with
// the GEMM precision. Every op is timed (its events recorded inside the graph), and a second
// run on the same device (the graphs released, their memory returned) agrees with the first.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../exec/step_graph_runs.h"
#include "exec_gpu_test_util.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/device_graphs.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/step_graphs.h"

namespace stagecraft::exec {
namespace {

constexpr int kMicrobatches = 4, kSteps = 5;

schedules::Schedule Make(const std::string& name, int chunks) {
  return testing::StepGraphSchedule(name, 1, chunks, kMicrobatches, kSteps);
}

TrainingConfig Gpt(int stages) {
  TrainingConfig c;
  c.gpt = GptModel{.layers = 2, .hidden = 64, .heads = 4, .seq = 32, .vocab = 128, .seed = 5};
  c.microbatch_size = 4;
  c.optimizer = "adam";
  c.lr = 1e-3f;
  c.layers_per_stage.assign(static_cast<size_t>(stages), 2 / stages);
  return c;
}

TrainingConfig Mlp(int stages) {
  TrainingConfig c;
  c.model = MlpModel{.layers = 4, .hidden = 128, .seed = 11};
  c.microbatch_size = 16;
  c.lr = 0.05f;
  c.layers_per_stage.assign(static_cast<size_t>(stages), 4 / stages);
  return c;
}

RankRun RunOn(Device& device, const schedules::Schedule& s, const TrainingConfig& config, bool graphs) {
  return testing::RunStepGraphs(device, s, config, graphs);
}

struct Case {
  std::string schedule;
  int chunks = 1;
  bool gpt = true;
  GemmPrecision precision = GemmPrecision::kFp32;
  double tolerance = 1e-4;  // relative, on losses and on each weight against the largest
};

class StepGraphsGpu : public ::testing::TestWithParam<Case> {};

TEST_P(StepGraphsGpu, ReplayedStepsTrainAsTheCallsIssuedOneByOne) {
  SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  const schedules::Schedule s = Make(c.schedule, c.chunks);
  const TrainingConfig config = c.gpt ? Gpt(s.stages()) : Mlp(s.stages());
  const std::unique_ptr<Device> device = MakeCudaDevice(0, c.precision);
  ASSERT_NE(device->graphs(), nullptr) << "the cuda device captures graphs";
  const StepGraphPlan plan = PlanStepGraphs(s, 0, StepGraphConditions{.device_has_graphs = true, .requested = true});
  ASSERT_TRUE(plan.enabled) << plan.why_not;

  const RankRun eager = RunOn(*device, s, config, false);
  const RankRun replayed = RunOn(*device, s, config, true);
  const RankRun again = RunOn(*device, s, config, true);

  ASSERT_EQ(replayed.record.losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(eager.record.losses.size(), replayed.record.losses.size());
  for (int t = 0; t < kSteps; ++t) {
    const double e = eager.record.losses[t], r = replayed.record.losses[t];
    ASSERT_TRUE(std::isfinite(r)) << "step " << t;
    EXPECT_NEAR(r, e, c.tolerance * std::max(1.0, std::abs(e))) << "step " << t;
    // A second run with graphs on the same device (the first's released, their memory returned):
    // its step 0 runs cuBLAS in the cuBLASLt workspace the first capture lent it, so it may
    // pick other algorithms than the first run's step 0.
    EXPECT_NEAR(again.record.losses[t], r, c.tolerance * std::max(1.0, std::abs(r))) << "again, step " << t;
    // Each replayed step read its own microbatches: losses move from step to step.
    if (t > 0) {
      EXPECT_NE(r, replayed.record.losses[t - 1]) << "step " << t;
    }
  }
  ASSERT_EQ(eager.final_params.size(), replayed.final_params.size());
  for (size_t chunk = 0; chunk < eager.final_params.size(); ++chunk) {
    const std::vector<float>& e = eager.final_params[chunk];
    const std::vector<float>& r = replayed.final_params[chunk];
    ASSERT_EQ(e.size(), r.size());
    double largest = 0, worst = 0;
    for (size_t i = 0; i < e.size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(e[i])));
      worst = std::max(worst, std::abs(static_cast<double>(e[i]) - r[i]));
    }
    EXPECT_LE(worst, c.tolerance * std::max(1.0, largest)) << "chunk " << chunk;
    double again_worst = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      again_worst = std::max(again_worst, std::abs(static_cast<double>(again.final_params[chunk][i]) - r[i]));
    }
    EXPECT_LE(again_worst, c.tolerance * std::max(1.0, largest)) << "again, chunk " << chunk;
  }
  // Every op has its time, in order on the rank's one stream, the replayed steps included.
  testing::ExpectOpsTimedInOrder(s, replayed);
}

INSTANTIATE_TEST_SUITE_P(
    StepGraphs, StepGraphsGpu,
    ::testing::Values(Case{"1f1b"}, Case{"zb-h1"}, Case{"interleaved", 2, false},
                      Case{"1f1b", 1, true, GemmPrecision::kBf16, 2e-2}),
    [](const ::testing::TestParamInfo<Case>& p) {
      return testing::StepGraphCaseName(p.param.schedule + (p.param.gpt ? "_gpt" : "_mlp") +
                                        (p.param.precision == GemmPrecision::kBf16 ? "_bf16" : "_fp32"));
    });

}  // namespace
}  // namespace stagecraft::exec
