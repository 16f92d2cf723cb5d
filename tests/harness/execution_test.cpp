// Tests for harness/src/execution.cpp's plan of a data-parallel run (no MPI): the world must be
// pipeline.ranks × pipeline.data_parallel, and world rank w plans pipeline rank w % P of replica
// w / P (which stages it feeds and scores, which replica's slice it trains).
#include "stagecraft/harness/execution.h"

#include <gtest/gtest.h>

#include <string>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/budget.h"
#include "stagecraft/sim/scenario_checks.h"

namespace stagecraft::harness {
namespace {

sim::Scenario MlpScenario(int ranks, int replicas) {
  return sim::LoadScenario(std::string(STAGECRAFT_SOURCE_DIR) + "/scenarios/mlp-cpu.yaml",
                           {"pipeline.schedule=1f1b", "model.mlp.hidden=16", "pipeline.ranks=" + std::to_string(ranks),
                            "pipeline.data_parallel=" + std::to_string(replicas), "topology.devices_per_node=4"});
}

TEST(PlanExecution, EachWorldRankPlansItsReplicasPipelineRank) {
  const bool feeds[] = {true, false, true, false}, scores[] = {false, true, false, true};
  for (int w = 0; w < 4; ++w) {
    const ExecutionPlan plan =
        PlanExecution(MlpScenario(2, 2), exec::Backend::kCpu, 4, w, 1, schedules::kDefaultMaxOps);
    EXPECT_EQ(plan.layout.pipeline_ranks, 2);
    EXPECT_EQ(plan.layout.replicas, 2);
    EXPECT_EQ(plan.replica, w / 2) << w;
    EXPECT_EQ(plan.config.data_parallel, 2);
    EXPECT_EQ(plan.feeds, feeds[w]) << w;
    EXPECT_EQ(plan.scores, scores[w]) << w;
    ASSERT_EQ(plan.schedules.size(), 1u);
    EXPECT_EQ(plan.schedules[0].data_parallel, 2);  // its STEPs wait for a REDUCE_GRAD each
    EXPECT_EQ(plan.predicted_peak_bytes[0].size(), 2u);  // one per pipeline rank
  }
}

TEST(PlanExecution, AWorldThatIsNotRanksTimesReplicasIsRefusedNamingBoth) {
  for (const int world : {2, 3, 5}) {
    try {
      PlanExecution(MlpScenario(2, 2), exec::Backend::kCpu, world, 0, 1, schedules::kDefaultMaxOps);
      FAIL() << "world " << world << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("pipeline.ranks 2 x pipeline.data_parallel 2 = 4 but the MPI job has " +
                                           std::to_string(world) + " process(es); run it as `mpirun -np 4"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(PlanExecution, TensorParallelismIsSimulatedOnly) {
  sim::Scenario sc = sim::LoadScenario(std::string(STAGECRAFT_SOURCE_DIR) + "/scenarios/gpt-tiny-cpu.yaml",
                                       {"pipeline.tensor_parallel=2", "topology.devices_per_node=8"});
  EXPECT_THROW(PlanExecution(std::move(sc), exec::Backend::kCpu, 2, 0, 1, schedules::kDefaultMaxOps), InputError);
}

}  // namespace
}  // namespace stagecraft::harness
