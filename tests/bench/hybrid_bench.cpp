// Simulator speed at cluster scale with hybrid parallelism: Megatron-LM's 1T GPT
// (scenarios/gpt-1t-3072xa100.yaml) as pipeline 16 x data 64 x tensor 8 = 8,192 A100s, 512
// microbatches, every schedule the shape allows, from the scenario to the metrics as `simulate`
// does it (issue target: under 2 s on one core: `taskset -c 0 build/tests/bench/hybrid_bench`).
// And a mixture-of-experts model of DeepSeek-V3's shape (scenarios/deepseek-v3-2048xh800.yaml:
// 671B parameters, pipeline 16 x data 128 with 64-way expert parallelism = 2,048 GPUs, 128
// microbatches) with every generator, the cost-aware ones included, ALL_TO_ALLs as flows (issue
// 56 target: under 5 s).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "stagecraft/harness/predict.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"

namespace {

using namespace stagecraft;

void BM_SimulateEverySchedule8192Gpus(benchmark::State& state) {
  const sim::Scenario sc = sim::LoadScenario(STAGECRAFT_SOURCE_DIR "/scenarios/gpt-1t-3072xa100.yaml",
                                             {"pipeline.ranks=16", "pipeline.data_parallel=64", "topology.nodes=1024",
                                              "pipeline.schedule=all"});
  int schedules = 0;
  for (auto _ : state) {
    const std::vector<std::string> names = harness::ScenarioScheduleNames(sc, false);
    const sim::Topology topo(sc.topology);
    schedules = 0;
    for (schedules::Schedule& s : harness::ScenarioSchedules(sc.pipeline, names)) {
      benchmark::DoNotOptimize(harness::Predict(sc, topo, std::move(s)));
      ++schedules;
    }
  }
  state.counters["gpus"] = static_cast<double>(sc.pipeline.world());
  state.counters["schedules"] = schedules;
}
BENCHMARK(BM_SimulateEverySchedule8192Gpus)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_SimulateEveryScheduleDeepSeekV3(benchmark::State& state) {
  const sim::Scenario sc = sim::LoadScenario(
      STAGECRAFT_SOURCE_DIR "/scenarios/deepseek-v3-2048xh800.yaml",
      {"pipeline.microbatches=128", "pipeline.schedule=[gpipe, 1f1b, interleaved, pipedream, 2bw, pipemare, zb-h1, "
                                    "zb-h2, zb-v, dualpipe-v, zb-1p, zb-2p, zb-auto]"});
  int schedules = 0;
  for (auto _ : state) {
    const sim::Topology topo(sc.topology);
    schedules = 0;
    for (schedules::Schedule& s : harness::ScenarioSchedules(sc, sc.pipeline.schedules)) {
      benchmark::DoNotOptimize(harness::Predict(sc, topo, std::move(s)));
      ++schedules;
    }
  }
  state.counters["gpus"] = static_cast<double>(sc.pipeline.world());
  state.counters["schedules"] = schedules;
}
BENCHMARK(BM_SimulateEveryScheduleDeepSeekV3)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
