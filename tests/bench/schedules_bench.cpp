// Speed of the schedule passes: generate + lower + validate a 64-rank x 1024-microbatch 1F1B
// and ZB-V schedule (issue targets: under 1 s on one core). Reported as ops/s.
#include <benchmark/benchmark.h>

#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"

namespace {

using namespace stagecraft::schedules;

GeneratorParams Params(int ranks, int microbatches) {
  GeneratorParams p;
  p.ranks = ranks;
  p.microbatches = microbatches;
  return p;
}

// Generate + lower + validate `schedule` on state.range(0) ranks x state.range(1) microbatches.
void GenerateLowerValidate(benchmark::State& state, const char* schedule, int chunks) {
  GeneratorParams p = Params(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  p.chunks = chunks;
  size_t ops = 0;
  for (auto _ : state) {
    const Schedule lowered = Lower(Generate(schedule, p));
    const auto diags = Validate(lowered);
    if (!diags.empty()) state.SkipWithError(diags.front().message.c_str());
    ops = lowered.OpCount();
    benchmark::DoNotOptimize(diags);
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops_per_s"] = benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_GenerateLowerValidate1F1B(benchmark::State& state) { GenerateLowerValidate(state, "1f1b", 1); }
BENCHMARK(BM_GenerateLowerValidate1F1B)->Args({8, 64})->Args({16, 256})->Args({64, 1024})->Unit(benchmark::kMillisecond);

// ZB-V: two stages per rank in a V, I and W apart (3x the ops of 1F1B's F and B over twice the
// stages); issue target: under 1 s at 64 ranks x 1024 microbatches.
void BM_GenerateLowerValidateZbV(benchmark::State& state) { GenerateLowerValidate(state, "zb-v", 2); }
BENCHMARK(BM_GenerateLowerValidateZbV)->Args({8, 64})->Args({64, 1024})->Unit(benchmark::kMillisecond);

// DualPipe-V: the same V with overlapped pairs, which lowering places as one.
void BM_GenerateLowerValidateDualPipeV(benchmark::State& state) { GenerateLowerValidate(state, "dualpipe-v", 2); }
BENCHMARK(BM_GenerateLowerValidateDualPipeV)->Args({8, 64})->Args({64, 1024})->Unit(benchmark::kMillisecond);

void BM_Generate(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Generate("1f1b", Params(64, 1024)));
}
BENCHMARK(BM_Generate)->Unit(benchmark::kMillisecond);

void BM_Lower(benchmark::State& state) {
  const Schedule s = Generate("1f1b", Params(64, 1024));
  for (auto _ : state) benchmark::DoNotOptimize(Lower(s));
}
BENCHMARK(BM_Lower)->Unit(benchmark::kMillisecond);

void BM_Validate(benchmark::State& state) {
  const Schedule s = Lower(Generate("1f1b", Params(64, 1024)));
  for (auto _ : state) benchmark::DoNotOptimize(Validate(s));
}
BENCHMARK(BM_Validate)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
