// A multi-model workload through the harness (harness/workload.h): a task's units tile its own
// simulated run, its later steps repeat its steady step (held to a run simulated with all of
// them), and the placements agree with what the tasks alone imply where the answer is known
// without the scheduler (one task; two alike on two devices; a pipeline beside a spilled task).
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "stagecraft/base/error.h"
#include "stagecraft/harness/workload.h"
#include "stagecraft/schedules/metrics_json.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::harness {
namespace {

const std::string kText =
    "name: sweep\n"
    "topology:\n"
    "  device: {name: unit, peak: 1TFLOPS, memory: 16GiB, efficiency: 0.5}\n"
    "  nodes: 1\n"
    "  devices_per_node: 3\n"
    "  host: {memory: 256GiB, bandwidth: 8GB/s, latency: 10us}\n"
    "  links: [{scope: node, bandwidth: 100GB/s, latency: 1us}]\n"
    "model:\n"
    "  mlp: {layers: 8, hidden: 2048}\n"
    "pipeline: {schedule: spilled, ranks: 1, chunks: 4, microbatches: 4, microbatch_size: 64, recompute: full}\n"
    "training: {optimizer: adam, lr: 0.001}\n"
    "tasks:\n"
    "  - {name: a, steps: 3}\n";

sim::Scenario Load(const std::vector<std::string>& sets) { return sim::LoadScenarioFromText(kText, "sweep.yaml", sets); }

int64_t Alone(const sim::WorkloadTask& task) {
  int64_t sum = 0;
  for (const sim::WorkUnit& u : task.units) sum += u.warm_ns;
  return sum;
}

TEST(WorkloadPredict, ASpilledTasksUnitsTileItsRunAndItsLaterStepsRepeatTheSteadyOne) {
  const sim::Scenario sc = Load({});
  const sim::Topology topo(sc.topology);
  const WorkloadPrediction w = PredictWorkload(sc, topo);
  ASSERT_EQ(w.tasks.size(), 1u);
  const TaskRun& run = w.tasks[0];
  EXPECT_TRUE(run.moves);
  EXPECT_EQ(run.scenario.pipeline.steps, 2);  // the task trains 3; its run simulates 2
  // A shard's forward and its backward per shard and step.
  EXPECT_EQ(run.units_per_step, 2 * 4);
  ASSERT_EQ(w.work[0].units.size(), 3u * 8);
  // Two steps' units tile the simulated run of two exactly.
  const sim::WorkloadTask two = WorkOf("a", run.prediction, topo, run.scenario.pipeline, 2, true);
  EXPECT_EQ(Alone(two), run.prediction.result.makespan_ns());
  // All three steps against a run simulated with all three (its later steps are alike).
  sim::Scenario three = sim::TaskScenario(sc, 0);
  three.pipeline.steps = 3;
  const Prediction full = Predict(three, topo, ScenarioSchedules(three, three.pipeline.schedules).at(0));
  EXPECT_NEAR(static_cast<double>(Alone(w.work[0])), static_cast<double>(full.result.makespan_ns()),
              1e-6 * static_cast<double>(full.result.makespan_ns()));
  for (const sim::WorkUnit& u : w.work[0].units) {
    EXPECT_GE(u.cold_ns, u.warm_ns);
    EXPECT_LE(u.busy_ns, u.warm_ns);
  }
  // The last shard's backward follows its forward with the shard resident (it waits for nothing
  // as it ran): moved, it waits for the shard's weights, gradients and Adam state (2 layers of
  // 2048 x 2048 + 2048, 16 bytes a parameter) sent back to the host and brought in, each 10 us +
  // bytes / 8 GB/s.
  const sim::WorkUnit& turn = w.work[0].units[4];
  EXPECT_EQ(turn.shard, 3);
  EXPECT_TRUE(turn.backward);
  const double state_ns = 10e3 + 2.0 * (2048 * 2048 + 2048) * 16 / 8e9 * 1e9;
  EXPECT_NEAR(static_cast<double>(turn.cold_ns - turn.warm_ns), 2 * state_ns, 2.0);
  // One task alone: both schedulers place it as it ran.
  EXPECT_EQ(w.lrtf.makespan_ns, Alone(w.work[0]));
  EXPECT_EQ(w.sequential.makespan_ns, Alone(w.work[0]));
}

TEST(WorkloadPredict, TwoTasksAlikeOnTwoDevicesTakeTheTimeOfOne) {
  const sim::Scenario sc = Load({"tasks=[{name: a, steps: 2}, {name: b, steps: 2}]",
                                 "topology.devices_per_node=2"});
  const WorkloadPrediction w = PredictWorkload(sc, sim::Topology(sc.topology));
  const int64_t alone = Alone(w.work[0]);
  EXPECT_EQ(Alone(w.work[1]), alone);
  EXPECT_EQ(w.lrtf.makespan_ns, alone);
  EXPECT_EQ(w.sequential.makespan_ns, 2 * alone);
  for (const sim::UnitRun& r : w.lrtf.runs) EXPECT_FALSE(r.cold);
}

TEST(WorkloadPredict, APipelineHoldsItsDevicesBesideASpilledTask) {
  const sim::Scenario sc =
      Load({"tasks=[{name: pipe, pipeline: {schedule: 1f1b, ranks: 2, chunks: 1, recompute: none}, steps: 4}, "
            "{name: spill, steps: 2}]"});
  const WorkloadPrediction w = PredictWorkload(sc, sim::Topology(sc.topology));
  EXPECT_FALSE(w.tasks[0].moves);
  EXPECT_EQ(w.work[0].devices, 2);
  ASSERT_EQ(w.work[0].units.size(), 1u);
  EXPECT_EQ(w.lrtf.makespan_ns, std::max(Alone(w.work[0]), Alone(w.work[1])));
  EXPECT_EQ(w.sequential.makespan_ns, Alone(w.work[0]) + Alone(w.work[1]));
  // The pipeline's four steps from two simulated: its first, then three of its second.
  sim::Scenario four = sim::TaskScenario(sc, 0);
  const sim::Topology topo(sc.topology);
  const Prediction full = Predict(four, topo, ScenarioSchedules(four, four.pipeline.schedules).at(0));
  EXPECT_NEAR(static_cast<double>(Alone(w.work[0])), static_cast<double>(full.result.makespan_ns()),
              1e-6 * static_cast<double>(full.result.makespan_ns()));
}

TEST(WorkloadPredict, HostMemoryForEveryTaskTogether) {
  // Each task keeps its model's state in host memory; together they must fit.
  const sim::Scenario one = Load({});
  const WorkloadPrediction w = PredictWorkload(one, sim::Topology(one.topology));
  const int64_t each = w.tasks[0].prediction.result.node_peak_host_memory_bytes.at(0);
  ASSERT_GT(each, 0);
  const std::string limit = fmt::format("topology.host.memory={}", each + each / 2);
  const sim::Scenario two = Load({"tasks=[{name: a}, {name: b}]", limit});
  try {
    PredictWorkload(two, sim::Topology(two.topology));
    FAIL() << "expected the host memory refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sweep.yaml: topology.host.memory: the tasks keep"), std::string::npos)
        << e.what();
  }
}

TEST(WorkloadPredict, MetricsFileAndTraceReadBack) {
  const sim::Scenario sc = Load({"tasks=[{name: a, steps: 2}, {name: b, steps: 1}]"});
  const WorkloadPrediction w = PredictWorkload(sc, sim::Topology(sc.topology));
  const schedules::MetricsFile file = PredictedWorkloadFile(sc, w);
  ASSERT_TRUE(file.workload);
  EXPECT_EQ(file.schedules.size(), 2u);
  EXPECT_EQ(file.schedules[1].schedule, "b/spilled");
  EXPECT_EQ(file.workload->scheduler, "lrtf");
  EXPECT_EQ(file.workload->tasks[0].name, "a");
  EXPECT_DOUBLE_EQ(file.workload->makespan_ms, file.workload->lrtf_makespan_ms);
  const schedules::MetricsFile back =
      schedules::MetricsFileFromJson(schedules::MetricsFileToJson(file), "workload.json");
  ASSERT_TRUE(back.workload);
  EXPECT_EQ(back.workload->tasks.size(), 2u);
  EXPECT_EQ(back.workload->tasks[1].steps, 1);
  EXPECT_NEAR(back.workload->sequential_makespan_ms, file.workload->sequential_makespan_ms, 1e-6);
  const schedules::Trace trace = WorkloadTrace(sc, w);
  EXPECT_EQ(trace.tasks, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(trace.ops.size(), w.lrtf.runs.size());
  const std::string json = schedules::TraceToJson(trace);
  EXPECT_NE(json.find("\"name\":\"device 2\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"a F0\""), std::string::npos);
  const schedules::TraceReadResult read = schedules::TraceFromJson(json, "workload-trace.json");
  EXPECT_EQ(read.skipped, 0);
  EXPECT_EQ(read.trace.tasks, trace.tasks);
  EXPECT_EQ(read.trace.ops.size(), trace.ops.size());
}

}  // namespace
}  // namespace stagecraft::harness
