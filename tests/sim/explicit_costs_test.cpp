// Tests for sim/src/explicit_costs.cpp: a rank's costs shared over its chunks to the unit, and
// kept on that rank's own stages under every placement (loop and V), checked against each
// rank's busy time counted by hand.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/engine.h"

namespace stagecraft::sim {
namespace {

using schedules::Placement;
using schedules::Shape;

ExplicitCosts PerRank(std::vector<int64_t> forward, std::vector<int64_t> input, std::vector<int64_t> weight) {
  ExplicitCosts c;
  c.activation_bytes = c.weight_bytes = std::vector<int64_t>(forward.size(), 0);
  c.forward_ns = std::move(forward);
  c.backward_input_ns = std::move(input);
  c.backward_weight_ns = std::move(weight);
  return c;
}

TEST(ExplicitCosts, SplitOverChunks) {
  Scenario s = testing::UnitScenario(2, "gpipe");
  ExplicitCosts c = PerRank({10, 7}, {3, 3}, {0, 0});
  c.activation_bytes = {1000, 1001};
  c.weight_bytes = {9, 9};
  c.p2p_latency_ns = 250;
  c.send_bytes = 4096;
  s.model.costs = c;
  CostTable t = BuildCosts(s, 2);
  EXPECT_EQ(t.source, "explicit");
  EXPECT_EQ(t.p2p_latency_ns, 250);
  EXPECT_EQ(t.stages[0].forward_ns, 10);
  EXPECT_EQ(t.stages[1].forward_ns, 7);
  EXPECT_EQ(t.stages[1].grad_bytes, 9);
  EXPECT_EQ(t.stages[1].optimizer_bytes, 0);
  EXPECT_EQ(t.stages[1].send_bytes, 4096);

  // v = 3, loop: stage s is rank s % 2, chunk s / 2; 10 = 4 + 3 + 3, 7 = 3 + 2 + 2, 1001 = 334
  // + 334 + 333.
  t = BuildCosts(s, 6);
  ASSERT_EQ(t.stages.size(), 6u);
  const int64_t forward[] = {4, 3, 3, 2, 3, 2};
  const int64_t activation[] = {334, 334, 333, 334, 333, 333};
  for (int st = 0; st < 6; ++st) {
    SCOPED_TRACE(st);
    EXPECT_EQ(t.stages[st].forward_ns, forward[st]);
    EXPECT_EQ(t.stages[st].backward_input_ns, 1);
    EXPECT_EQ(t.stages[st].backward_weight_ns, 0);
    EXPECT_EQ(t.stages[st].activation_bytes, activation[st]);
    EXPECT_EQ(t.stages[st].weight_bytes, 3);
    EXPECT_EQ(t.stages[st].send_bytes, 4096);
  }
}

// Under V, rank 0 holds stages 0 and 3, rank 1 stages 1 and 2: 10 = 5 + 5 on stages 0 and 3,
// 31 = 16 + 15 on stages 1 and 2. Under loop rank 1 holds stages 1 and 3.
TEST(ExplicitCosts, EachRanksShareSitsOnItsOwnStages) {
  Scenario s = testing::UnitScenario(2, "zb-v");
  s.model.costs = PerRank({10, 31}, {0, 0}, {0, 0});
  const auto forward = [&](Placement placement) {
    std::vector<int64_t> out;
    for (const StageCost& c : BuildCosts(s, CostQuery{Shape{2, 2, placement}}).stages) out.push_back(c.forward_ns);
    return out;
  };
  EXPECT_EQ(forward(Placement::kV), (std::vector<int64_t>{5, 16, 15, 5}));
  EXPECT_EQ(forward(Placement::kLoop), (std::vector<int64_t>{5, 16, 5, 15}));
}

// Each rank's busy time is its own costs times the units it runs, whatever the schedule and its
// placement: microbatches x steps x (forward + backward_input + backward_weight) of that rank
// (the case: 1 ms and 3 ms on 2 ranks, 4 microbatches, gave 24 / 24 ms under zb-v
// instead of 12 / 36). Odd values check that a rank's chunks add up to it exactly.
TEST(ExplicitCosts, EveryRankIsBusyForItsOwnCostsUnderEveryPlacement) {
  const std::vector<int64_t> forward = {1'000'001, 3'000'002, 2'000'000};
  const std::vector<int64_t> input = {1'000'000, 3'000'001, 500'003};
  const std::vector<int64_t> weight = {999'999, 2'999'999, 7};
  int placements_seen[2] = {0, 0};
  for (const int ranks : {2, 3}) {
    for (const int chunks : {0, 3}) {  // 0: not stated (interleaved and the V run their own 2)
      for (const schedules::GeneratorInfo& info : schedules::Generators()) {
        if (!info.in_all) continue;  // spilled: one rank
        SCOPED_TRACE(fmt::format("{} on {} ranks, pipeline.chunks {}", info.name, ranks, chunks));
        Scenario s = testing::UnitScenario(ranks, std::string(info.name));
        s.pipeline.microbatches = 6;
        s.pipeline.steps = 2;
        s.pipeline.chunks = chunks;
        s.model.costs = PerRank({forward.begin(), forward.begin() + ranks}, {input.begin(), input.begin() + ranks},
                                {weight.begin(), weight.begin() + ranks});
        const schedules::GeneratorParams params = GeneratorParamsFor(s.pipeline, info);
        if (const std::string why = schedules::CheckParams(info, params); !why.empty()) {
          EXPECT_TRUE(info.placement == Placement::kV && chunks == 3) << why;  // V runs 2 chunks only
          continue;
        }
        ++placements_seen[info.placement == Placement::kV ? 1 : 0];
        const schedules::Schedule schedule = schedules::Lower(schedules::Generate(info.name, params));
        const RunRecord run = Simulate(schedule, BuildCosts(s, schedule), testing::Node(ranks), SimConfig{});
        for (int r = 0; r < ranks; ++r) {
          int64_t busy_ns = 0;
          for (size_t i = 0; i < schedule.ops[r].size(); ++i) {
            const OpTiming& t = run.ranks[r].ops[i];
            if (schedules::IsCompute(schedule.ops[r][i].kind)) busy_ns += t.end_ns - t.start_ns;
          }
          EXPECT_EQ(busy_ns, int64_t{6} * 2 * (forward[r] + input[r] + weight[r])) << "rank " << r;
        }
      }
    }
  }
  EXPECT_GT(placements_seen[0], 0);
  EXPECT_GT(placements_seen[1], 0);
}

}  // namespace
}  // namespace stagecraft::sim
