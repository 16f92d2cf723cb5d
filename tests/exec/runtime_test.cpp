// RunRank's walker (exec/src/runtime.cpp) on one rank without MPI: each schedule trains to the
// sequential reference's weights (reference.h) within 1e-5, its record is whole, and the units it
// calls are wired in (injected faults). Several ranks run under MPI in runtime_mpi.cpp.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fake_transport.h"
#include "reference.h"
#include "stagecraft/base/error.h"
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

// Rank `rank` of a 2-rank 1F1B alone on a fake transport (which completes a transfer when it is
// waited for, a receive with ones).
RankRun RunRankOfTwo(int rank, testing::FakeTransport& transport) {
  schedules::GeneratorParams p;
  p.ranks = 2;
  p.microbatches = kMicrobatches;
  p.steps = kSteps;
  const schedules::Schedule s = schedules::Lower(schedules::Generate("1f1b", p));
  auto device = MakeCpuDevice();
  const TrainingConfig config = Config(2);
  const Dataset data = MakeDataset(*device, config, int64_t{kMicrobatches} * kSteps, rank == 0, rank == 1);
  return RunRank(s, config, data, *device, transport);
}

// The transport prepares the run's routes once, before any transfer is posted: both directions
// between the two ranks, at the boundary tensor's size (MLP: microbatch rows x hidden).
TEST(Runtime, TheTransportPreparesTheRunsRoutesBeforeItsFirstTransfer) {
  testing::FakeTransport transport(0, 2);
  RunRankOfTwo(0, transport);
  const int64_t floats = int64_t{kRows} * kHidden;
  EXPECT_EQ(transport.prepared, (std::vector<std::vector<Route>>{{{0, 1, floats}, {1, 0, floats}}}));
  EXPECT_EQ(transport.posted_at_prepare, (std::vector<size_t>{0}));
  EXPECT_FALSE(transport.posted.empty());
}

// The transport is flushed before each step's read-back (a host-staged send still copying is
// posted there: the peer may wait for it), the last time after the run's last transfer.
TEST(Runtime, TheTransportIsFlushedAtEachReadBack) {
  testing::FakeTransport transport(0, 2);
  RunRankOfTwo(0, transport);
  ASSERT_GE(transport.posted_at_flush.size(), static_cast<size_t>(kSteps));
  EXPECT_TRUE(std::is_sorted(transport.posted_at_flush.begin(), transport.posted_at_flush.end()));
  EXPECT_GT(transport.posted_at_flush.front(), 0u) << "the first step's sends precede its read-back";
  EXPECT_EQ(transport.posted_at_flush.back(), transport.posted.size());
}

// On a transport that orders the device after each receive, the run hands every received tensor
// to its consumer without a host wait there, and still ends each RECV at its completion (the
// fake's wait, at the step's read-back, completes it): every op is timed and nothing is left.
TEST(Runtime, ReceivesOrderedOnTheDeviceAreFinishedBeforeTheStampsAreRead) {
  testing::FakeTransport transport(1, 2);
  transport.orders_on_device = true;
  const RankRun run = RunRankOfTwo(1, transport);
  int recvs = 0;
  for (const testing::FakeTransport::Posted& p : transport.posted) recvs += p.send ? 0 : 1;
  EXPECT_GT(recvs, 0);
  EXPECT_EQ(transport.ordered.size(), static_cast<size_t>(recvs)) << "every receive was handed over unwaited";
  EXPECT_EQ(transport.waits, static_cast<int>(transport.posted.size()))
      << "each transfer waited for once (the fake completes only then): a receive at a read-back or the end";
  for (const schedules::OpTiming& t : run.record.ops) {
    EXPECT_GE(t.start_ns, 0);
    EXPECT_GE(t.end_ns, t.start_ns);
  }
  EXPECT_EQ(run.record.losses.size(), static_cast<size_t>(kSteps));
}

// The executor runs copies of activations only: a schedule copying weights is refused in one
// line naming the copy, before any op runs.
// A RELOAD of weight version 0 before anything reads it: the version starts in host memory
// (schedules::StartOnHost) and comes to the device for the run, which trains as without the copy,
// its copy timed and the host memory reported.
TEST(Runtime, AWeightVersionThatStartsOnTheHostIsBroughtIn) {
  schedules::Schedule s = Make(OneRank{"gpipe"});
  const RankRun plain = RunOneRank(s, Config(s.stages()), RunHooks{});
  schedules::Op reload;
  reload.kind = schedules::OpKind::kReload;
  reload.tensor = schedules::Tensor::kWeights;
  s.ops[0].insert(s.ops[0].begin(), reload);
  const RankRun run = RunOneRank(s, Config(s.stages()), RunHooks{});
  EXPECT_EQ(run.record.losses, plain.record.losses);
  EXPECT_GE(run.record.ops[0].end_ns, run.record.ops[0].start_ns);
  EXPECT_GE(run.record.ops[0].start_ns, 0);
  EXPECT_GT(run.record.peak_host_memory_bytes, 0);
}

}  // namespace
}  // namespace stagecraft::exec
