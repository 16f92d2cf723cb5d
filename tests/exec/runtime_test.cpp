// RunRank's walker (exec/src/runtime.cpp) on one rank without MPI: each schedule trains to the
// sequential reference's weights (reference.h) within 1e-5, its record is whole, and the units it
// calls are wired in (injected faults). Several ranks run under MPI in runtime_mpi.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fake_transport.h"
#include "reference.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"

namespace stagecraft::exec {
namespace {

constexpr int kLayers = 4, kHidden = 8, kRows = 3, kMicrobatches = 4, kSteps = 3;

struct OneRank {
  std::string schedule;
  int chunks = 1;
  testing::Staleness staleness = testing::Staleness::kFlush;
};

void PrintTo(const OneRank& c, std::ostream* os) { *os << c.schedule << " (" << c.chunks << " chunks)"; }

schedules::Schedule Make(const OneRank& c) {
  schedules::GeneratorParams p;
  p.ranks = 1;
  p.chunks = c.chunks;
  p.microbatches = kMicrobatches;
  p.steps = kSteps;
  return schedules::Lower(schedules::Generate(c.schedule, p));
}

TrainingConfig Config(int stages) {
  TrainingConfig c;
  c.model = MlpModel{.layers = kLayers, .hidden = kHidden, .seed = 11};
  c.microbatch_size = kRows;
  c.lr = 0.05f;
  c.layers_per_stage.assign(static_cast<size_t>(stages), kLayers / stages);
  return c;
}

RankRun RunOneRank(const schedules::Schedule& s, const TrainingConfig& config, const RunHooks& hooks) {
  auto device = MakeCpuDevice();
  testing::FakeTransport transport;
  const Dataset data = MakeDataset(*device, config, int64_t{kMicrobatches} * kSteps, true, true);
  return RunRank(s, config, data, *device, transport, hooks);
}

class OneRankSchedules : public ::testing::TestWithParam<OneRank> {};

TEST_P(OneRankSchedules, TrainToTheSequentialReference) {
  const schedules::Schedule s = Make(GetParam());
  const TrainingConfig config = Config(s.stages());
  std::vector<StepProgress> heard;
  RunHooks hooks;
  hooks.keep_final_params = true;
  hooks.on_step = [&](const StepProgress& p) { heard.push_back(p); };
  const RankRun run = RunOneRank(s, config, hooks);

  testing::ReferenceConfig rc;
  rc.model = config.model;
  rc.microbatch_size = kRows;
  rc.microbatches = kMicrobatches;
  rc.steps = kSteps;
  rc.lr = config.lr;
  rc.momentum = config.momentum;
  rc.staleness = GetParam().staleness;
  rc.layers_per_stage = config.layers_per_stage;
  const testing::ReferenceResult want = testing::TrainReference(rc);
  const int64_t layer_floats = int64_t{kHidden} * kHidden + kHidden;
  ASSERT_EQ(run.final_params.size(), static_cast<size_t>(s.stages()));
  for (int l = 0; l < kLayers; ++l) {
    const int per_stage = kLayers / s.stages();
    const float* got = run.final_params[l / per_stage].data() + (l % per_stage) * layer_floats;
    double diff2 = 0, ref2 = 0;
    for (int64_t i = 0; i < layer_floats; ++i) {
      const double ref = i < kHidden * kHidden ? want.weights[l][i] : want.biases[l][i - kHidden * kHidden];
      diff2 += (got[i] - ref) * (got[i] - ref);
      ref2 += ref * ref;
    }
    EXPECT_LE(std::sqrt(diff2 / ref2), 1e-5) << "layer " << l;
  }

  // One loss per step, heard in order as each step ended, and every op timed.
  ASSERT_EQ(run.record.losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(heard.size(), static_cast<size_t>(kSteps));
  for (int t = 0; t < kSteps; ++t) {
    EXPECT_NEAR(run.record.losses[t], want.losses[t], 1e-5 * want.losses[t]) << "step " << t;
    EXPECT_EQ(heard[t].step, t);
    EXPECT_EQ(heard[t].loss, run.record.losses[t]);
    if (t > 0) {
      EXPECT_GE(heard[t].end_ns, heard[t - 1].end_ns);
    }
  }
  EXPECT_LT(run.record.losses.back(), run.record.losses.front()) << "the loss falls";
  ASSERT_EQ(run.record.ops.size(), s.ops[0].size());
  for (const schedules::OpTiming& t : run.record.ops) {
    EXPECT_GE(t.start_ns, 0);
    EXPECT_GE(t.end_ns, t.start_ns);
  }
  // The last step ended at the last stage's last STEP (with chunks, stage 0's STEP may follow it).
  int last_step = -1;
  for (int i = 0; i < static_cast<int>(s.ops[0].size()); ++i) {
    if (s.ops[0][i].kind == schedules::OpKind::kStep && s.ops[0][i].stage == s.stages() - 1) last_step = i;
  }
  ASSERT_GE(last_step, 0);
  EXPECT_EQ(heard.back().end_ns, run.record.ops[last_step].end_ns);
  schedules::RunRecord whole;  // what the timings imply, as the harness derives it
  whole.ranks = {run.record};
  schedules::FinishRunRecord(s, 0, &whole);
  EXPECT_LE(heard.back().end_ns, whole.ranks[0].last_compute_end_ns);
  EXPECT_GT(whole.ranks[0].busy_ns, 0);
  EXPECT_EQ(whole.ranks[0].first_f_start_ns, run.record.ops[0].start_ns);
  // One version (PipeDream keeps n − s = 1 on its only stage), but two under 2BW.
  EXPECT_EQ(run.record.peak_weight_versions, GetParam().staleness == testing::Staleness::kTwoBW ? 2 : 1);
  EXPECT_FALSE(run.record.memory.empty());
  EXPECT_GT(run.record.peak_memory_bytes, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Runtime, OneRankSchedules,
    ::testing::Values(OneRank{"gpipe"}, OneRank{"1f1b"}, OneRank{"zb-h1"}, OneRank{"interleaved", 2},
                      OneRank{"2bw", 1, testing::Staleness::kTwoBW},
                      OneRank{"pipedream", 1, testing::Staleness::kPipeDream}),
    [](const ::testing::TestParamInfo<OneRank>& p) {
      std::string name = p.param.schedule;
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

RunHooks FaultAt(int step, RunHooks::Fault fault) {
  RunHooks hooks;
  hooks.fault_rank = 0;
  hooks.fault_step = step;
  hooks.fault = fault;
  return hooks;
}

TEST(Runtime, AnInjectedNanEndsTheRunAtItsStepsReport) {
  const schedules::Schedule s = Make({"1f1b"});
  RunHooks hooks = FaultAt(1, RunHooks::Fault::kNan);
  int steps_heard = 0;
  hooks.on_step = [&](const StepProgress&) { ++steps_heard; };
  try {
    RunOneRank(s, Config(1), hooks);
    FAIL() << "the run diverges";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("step 1 microbatch 0: loss is nan", 0), 0u) << e.what();
  }
  EXPECT_EQ(steps_heard, 1) << "step 0 was reported before";
}

TEST(Runtime, AnInjectedAllocationFailureNamesItsOp) {
  try {
    RunOneRank(Make({"gpipe"}), Config(1), FaultAt(2, RunHooks::Fault::kOom));
    FAIL() << "the allocation fails";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(std::string(e.what()).rfind("out of memory at 0F8 (step 2)", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace stagecraft::exec
