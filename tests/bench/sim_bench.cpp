// Simulator speed: a lowered 1F1B schedule of 64 ranks x 1024 microbatches x 2 steps (~0.8M
// ops with comms) simulated on one 8-GPU-per-node topology (issue target: under 0.25 s on one
// core), and four sizes to check that cost grows no worse than n log n. Reported as ops/s.
#include <benchmark/benchmark.h>

#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/sim/engine.h"

namespace {

using namespace stagecraft;

sim::Topology Cluster(int devices) {
  sim::TopologySpec spec;
  spec.device.name = "H100";
  spec.device.peak_flops = 989e12;
  spec.device.memory_bytes = int64_t{80} << 30;
  spec.devices_per_node = 8;
  spec.nodes = (devices + 7) / 8;
  spec.links.push_back({sim::LinkScope::kNode, 450e9, 2000});
  if (spec.nodes > 1) spec.links.push_back({sim::LinkScope::kCluster, 50e9, 5000});
  return sim::Topology(spec);
}

void BM_Simulate1F1B(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const int microbatches = static_cast<int>(state.range(1));
  schedules::GeneratorParams p;
  p.ranks = ranks;
  p.microbatches = microbatches;
  p.steps = 2;
  const schedules::Schedule s = schedules::Lower(schedules::Generate("1f1b", p));
  sim::CostTable costs;
  sim::StageCost c{};
  c.forward_ns = 1'000'000;
  c.backward_input_ns = 1'000'000;
  c.backward_weight_ns = 1'000'000;
  c.activation_bytes = 1 << 26;
  c.send_bytes = 1 << 24;
  costs.stages.assign(ranks, c);
  const sim::Topology topo = Cluster(ranks);
  sim::SimConfig config;
  config.record_memory = false;
  for (auto _ : state) benchmark::DoNotOptimize(sim::Simulate(s, costs, topo, config));
  state.counters["ops"] = static_cast<double>(s.OpCount());
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(s.OpCount()), benchmark::Counter::kIsIterationInvariantRate);
  state.SetComplexityN(static_cast<int64_t>(s.OpCount()));
}
BENCHMARK(BM_Simulate1F1B)
    ->Args({8, 128})
    ->Args({16, 256})
    ->Args({32, 512})
    ->Args({64, 1024})
    ->Unit(benchmark::kMillisecond)
    ->Complexity(benchmark::oNLogN);

}  // namespace

BENCHMARK_MAIN();
