// Viewer core speed on a 1,000,000-op trace (8 ranks x 125k compute ops back to back, plus
// memory counters): loading it (target under 2 s) and preparing one frame of every lane at
// 1600 px for the whole trace, 1% and 0.01% of it (target under 8 ms on one core), and
// matching it against a measured copy. Run on one core: taskset -c 0 build/tests/bench/viz_bench
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "stagecraft/schedules/trace.h"
#include "stagecraft/viz/overlay.h"
#include "stagecraft/viz/timeline.h"
#include "stagecraft/viz/trace_set.h"

namespace {

using namespace stagecraft;

constexpr int kRanks = 8;
constexpr int kOpsPerRank = 125'000;
constexpr int kMicrobatches = 1000;  // per step: 2000 ops (F and B) per rank per step
constexpr int kCounterEvery = 8;     // one memory sample per 8 ops

// Durations of 1 to 4 us that vary from op to op (a fixed hash, no generator state).
int64_t DurationNs(int rank, int k) { return 1000 + static_cast<int64_t>((k * 2654435761u + rank * 40503u) % 3000); }

schedules::Trace BigTrace(int64_t skew_ns) {
  schedules::Trace trace;
  trace.source = skew_ns == 0 ? "predicted" : "measured";
  trace.schedule = "1f1b";
  trace.microbatches = kMicrobatches;
  trace.ops.reserve(static_cast<size_t>(kRanks) * kOpsPerRank);
  for (int rank = 0; rank < kRanks; ++rank) {
    int64_t t_ns = rank * 1000 + skew_ns;
    for (int k = 0; k < kOpsPerRank; ++k) {
      schedules::TraceOp op;
      op.rank = rank;
      op.op = schedules::Op{k % 2 == 0 ? schedules::OpKind::kF : schedules::OpKind::kB, rank,
                            (k / 2) % kMicrobatches, k / (2 * kMicrobatches), 0, -1};
      op.op_index = k;
      op.start_ns = t_ns;
      op.duration_ns = DurationNs(rank, k) + (skew_ns != 0 && k % 7 == 0 ? 100 : 0);
      t_ns += op.duration_ns;
      trace.ops.push_back(op);
      if (k % kCounterEvery == 0) trace.counters.push_back({rank, t_ns, int64_t{k % 1000} << 20});
    }
  }
  return trace;
}

const std::string& BigTraceText() {
  static const std::string text = schedules::TraceToJson(BigTrace(0));
  return text;
}

const viz::LoadedTrace& BigLoaded() {
  static const viz::LoadResult r = viz::LoadTraceText(BigTraceText(), "big.json");
  return *r.trace;
}

void BM_LoadTrace(benchmark::State& state) {
  const std::string& text = BigTraceText();
  for (auto _ : state) {
    viz::LoadResult r = viz::LoadTraceText(text, "big.json");
    if (!r.trace) state.SkipWithError(r.error.c_str());
    benchmark::DoNotOptimize(r);
  }
  state.counters["ops"] = static_cast<double>(kRanks) * kOpsPerRank;
  state.counters["MB"] = static_cast<double>(text.size()) / 1e6;
}
BENCHMARK(BM_LoadTrace)->Unit(benchmark::kMillisecond)->Iterations(3);

// One frame: the draw records of every lane for a view showing 1/range(0) of the trace,
// centred in it, at 1600 px.
void BM_PrepareFrame(benchmark::State& state) {
  const viz::LoadedTrace& trace = BigLoaded();
  const int64_t span_ns = (trace.end_ns - trace.start_ns) / state.range(0);
  const int64_t mid_ns = trace.start_ns + (trace.end_ns - trace.start_ns) / 2;
  const viz::View view{mid_ns - span_ns / 2, mid_ns - span_ns / 2 + span_ns, 1600.0f};
  std::vector<std::vector<viz::DrawRecord>> records(trace.lanes.size());
  size_t drawn = 0, ops = 0;
  for (auto _ : state) {
    for (size_t k = 0; k < trace.lanes.size(); ++k) viz::PrepareLane(trace, trace.lanes[k], view, 0, &records[k]);
    benchmark::ClobberMemory();
  }
  for (const auto& lane : records) {
    drawn += lane.size();
    for (const viz::DrawRecord& r : lane) ops += r.count;
  }
  state.counters["records"] = static_cast<double>(drawn);
  state.counters["ops_shown"] = static_cast<double>(ops);
}
BENCHMARK(BM_PrepareFrame)->Arg(1)->Arg(100)->Arg(10'000)->Unit(benchmark::kMicrosecond);

void BM_MatchTraces(benchmark::State& state) {
  const viz::LoadedTrace& predicted = BigLoaded();
  static const viz::LoadResult measured =
      viz::LoadTraceText(schedules::TraceToJson(BigTrace(5'000'000)), "measured.json");
  for (auto _ : state) benchmark::DoNotOptimize(viz::MatchTraces(predicted, *measured.trace));
  state.counters["ops"] = static_cast<double>(predicted.trace.ops.size());
}
BENCHMARK(BM_MatchTraces)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
