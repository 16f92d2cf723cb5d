// Step graphs of pipelines (step_graphs.h), under mpirun with 4 ranks (exec_mpi_tests): each rank
// runs a flush schedule on a cpu device that records calls as CUDA stream capture does
// (capturing_device.h) over MPI through a transport that records its transfers into the capture
// as nccl's are (capturing_transport.h), once issuing every call and once with step graphs. On
// every rank the replayed run trains bit for bit as the eager one, its replayed steps issue no
// layer op and post no transfer from the host, and every op of it is timed. Each rank checks its
// own run; rank 0 gathers the verdicts and reports.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "capturing_device.h"
#include "capturing_transport.h"
#include "step_graph_runs.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/step_graphs.h"

namespace stagecraft {
namespace {

constexpr int kRanks = 4, kMicrobatches = 8, kSteps = 5;

struct Case {
  std::string schedule;
  int chunks = 1;
  bool gpt = false;
  bool captured = true;  // false: its steps differ on some rank, so the plan refuses it on every rank
};

// Two MLP layers or one GPT block a stage.
exec::TrainingConfig ConfigFor(const Case& c, int stages) {
  return testing::StepGraphConfig(c.gpt, stages, c.gpt ? 1 : 2);
}

struct GraphRun {
  exec::RankRun run;
  int64_t direct_calls = 0;
  int64_t recorded_calls = 0;
  int64_t launches = 0;
  int64_t host_posts = 0;
  int64_t graph_blocks_taken_outside = 0;
};

GraphRun RunOn(const schedules::Schedule& s, const exec::TrainingConfig& config, bool graphs) {
  testing::CapturingCpuDevice device;
  testing::CapturingTransport transport(exec::MakeMpiTransport(), device);
  const int rank = transport.rank();
  const exec::Dataset data =
      exec::MakeDataset(device, config, 3, rank == s.shape.RankOf(0), rank == s.shape.RankOf(s.stages() - 1));
  device.direct_calls = 0;  // the MLP's teacher made the targets with a GEMM
  exec::RunHooks hooks;
  hooks.keep_final_params = true;
  hooks.step_graphs = graphs;
  GraphRun out;
  out.run = exec::RunRank(s, config, data, device, transport, hooks);
  out.direct_calls = device.direct_calls;
  out.recorded_calls = device.recorded_calls;
  out.launches = device.launches;
  out.host_posts = transport.host_posts;
  out.graph_blocks_taken_outside = device.graph_blocks_taken_outside;
  return out;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += (text.empty() ? "" : "; ") + line;
  return text;
}

// What is wrong with this rank's run with graphs against its eager one (`captured`: whether the
// schedule's steps are to be captured); empty when nothing is.
std::string Verdict(const schedules::Schedule& s, int rank, bool captured, const GraphRun& eager,
                    const GraphRun& replayed) {
  std::vector<std::string> wrong;
  const auto expect = [&](bool ok, std::string what) {
    if (!ok) wrong.push_back(std::move(what));
  };
  expect(eager.run.final_params == replayed.run.final_params, "final weights differ from the eager run's");
  expect(eager.run.record.losses == replayed.run.record.losses, "losses differ from the eager run's");
  // The last stage's rank reports each step's loss, each step's its own (a replay read its own
  // step's microbatches).
  const std::vector<double>& losses = replayed.run.record.losses;
  if (rank == s.shape.RankOf(s.stages() - 1)) {
    expect(losses.size() == static_cast<size_t>(kSteps), fmt::format("{} losses", losses.size()));
    for (size_t t = 1; t < losses.size(); ++t) expect(losses[t] != losses[t - 1], "two steps had one loss");
  }
  exec::StepGraphConditions conditions;
  conditions.device_has_graphs = conditions.requested = conditions.transfers_captured = true;
  const exec::StepGraphPlan plan = exec::PlanStepGraphs(s, rank, conditions);
  expect(plan.enabled == captured, fmt::format("the plan: {}", plan.enabled ? "captured" : plan.why_not));
  expect(eager.recorded_calls == 0 && eager.launches == 0, "the eager run recorded");
  if (!captured) {  // issued call by call, as without graphs
    expect(replayed.recorded_calls == 0 && replayed.launches == 0, "a refused schedule recorded");
    expect(replayed.direct_calls == eager.direct_calls && replayed.host_posts == eager.host_posts,
           "a refused schedule issued other calls");
  }
  const int64_t calls = eager.direct_calls / kSteps, posts = eager.host_posts / kSteps;
  expect(calls * kSteps == eager.direct_calls && posts * kSteps == eager.host_posts, "eager steps differ");
  if (!captured) return Joined(wrong);
  // Step 0 issued, step 1 recorded once, steps 2-4 launched: the host posts step 0's transfers
  // alone (the connections' probes are the eager run's too: none on the cpu).
  expect(replayed.direct_calls == calls,
         fmt::format("{} layer ops issued by the host, not one step's {}", replayed.direct_calls, calls));
  expect(replayed.recorded_calls == calls,
         fmt::format("{} layer ops recorded, not {}", replayed.recorded_calls, calls));
  expect(replayed.launches == int64_t{plan.segments} * (kSteps - 1),
         fmt::format("{} launches of {} segments", replayed.launches, plan.segments));
  expect(posts > 0 && replayed.host_posts == posts,
         fmt::format("the host posted {} transfers, not step 0's {}", replayed.host_posts, posts));
  expect(replayed.graph_blocks_taken_outside == 0, "a graph's memory was given out outside a capture");
  const std::vector<schedules::Op>& ops = s.ops[static_cast<size_t>(rank)];
  for (size_t i = 0; i < ops.size(); ++i) {
    const schedules::OpTiming& t = replayed.run.record.ops[i];
    if (t.start_ns < 0 || t.end_ns < t.start_ns) {
      expect(false, fmt::format("{} (step {}) timed {}..{}", schedules::ActionString(ops[i], s.microbatches),
                                ops[i].step, t.start_ns, t.end_ns));
      break;
    }
  }
  return Joined(wrong);
}

class StepGraphsPipeline : public ::testing::TestWithParam<Case> {};

TEST_P(StepGraphsPipeline, ReplayTrainsBitForBitAsIssuingEachCall) {
  const Case& c = GetParam();
  const schedules::Schedule s = testing::StepGraphSchedule(c.schedule, kRanks, c.chunks, kMicrobatches, kSteps);
  const exec::TrainingConfig config = ConfigFor(c, s.stages());
  const GraphRun eager = RunOn(s, config, false);
  const GraphRun replayed = RunOn(s, config, true);
  auto world = exec::MakeMpiTransport();
  const int rank = world->rank();
  const std::vector<std::string> all = world->Gather(Verdict(s, rank, c.captured, eager, replayed), 0);
  if (rank != 0) return;
  for (size_t r = 0; r < all.size(); ++r) EXPECT_EQ(all[r], "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(StepGraphs, StepGraphsPipeline,
                         ::testing::Values(Case{"1f1b"}, Case{"gpipe"}, Case{"interleaved", 2}, Case{"zb-v", 2},
                                           Case{"dualpipe-v", 2}, Case{"1f1b", 1, true}, Case{"zb-v", 2, true},
                                           Case{"zb-h1", 1, false, false}, Case{"zb-h2", 1, true, false}),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return testing::StepGraphCaseName(p.param.schedule + (p.param.gpt ? "_gpt" : "_mlp") +
                                                             (p.param.captured ? "" : "_refused"));
                         });

// Over a transport that carries out each transfer on the host (MPI alone), a pipeline's rank is
// not captured: every call is issued, nothing recorded, and the plan says why.
TEST(StepGraphsPipeline, AHostTransportIsNotCaptured) {
  const schedules::Schedule s = testing::StepGraphSchedule("1f1b", kRanks, 1, kMicrobatches, kSteps);
  const exec::TrainingConfig config = ConfigFor({"1f1b"}, s.stages());
  testing::CapturingCpuDevice device;
  auto transport = exec::MakeMpiTransport();
  const int rank = transport->rank();
  const exec::Dataset data =
      exec::MakeDataset(device, config, 3, rank == s.shape.RankOf(0), rank == s.shape.RankOf(s.stages() - 1));
  exec::RunHooks hooks;
  hooks.step_graphs = true;
  (void)exec::RunRank(s, config, data, device, *transport, hooks);
  const exec::StepGraphPlan plan =
      exec::PlanStepGraphs(s, rank, {.device_has_graphs = true, .requested = true});
  const std::string mine = fmt::format("{} {} {}", device.recorded_calls, device.launches,
                                       plan.why_not.find("on the host") != std::string::npos);
  const std::vector<std::string> all = transport->Gather(mine, 0);
  if (rank != 0) return;
  for (size_t r = 0; r < all.size(); ++r) EXPECT_EQ(all[r], "0 0 true") << "rank " << r;
}

}  // namespace
}  // namespace stagecraft
