// Loading a trace file as the viewer does (a 1M-op trace given as the first argument,
// docs/benchmarks.md "Trace loading"): its text parsed (TraceFromJson) and the whole load
// (viz::LoadTraceFile: read, parse, index), 5 runs each, with the process's peak resident
// memory; one benchmark per process (--benchmark_filter). Beside them, what RapidJSON alone
// costs on the same text before any trace is built from it: its DOM (BM_RapidJsonDom, the
// least a DOM-based reader pays) and its SAX reader with a handler that does nothing
// (BM_RapidJsonSax, the least an event-based reader pays), with the flags the readers here use.
#include <sys/resource.h>

#include <cstdio>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <rapidjson/document.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include "stagecraft/base/input_file.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/viz/trace_set.h"

namespace {

using namespace stagecraft;

std::string trace_path;  // set once, by main

double PeakResidentMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024;  // Linux reports KiB
}

void BM_ParseTrace(benchmark::State& state) {
  const std::string text = ReadInputFile(trace_path, kMaxJsonBytes, "a trace");
  size_t ops = 0;
  for (auto _ : state) {
    const schedules::TraceReadResult read = schedules::TraceFromJson(text, trace_path);
    ops = read.trace.ops.size();
    benchmark::DoNotOptimize(read);
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["MB"] = static_cast<double>(text.size()) / 1e6;
  state.counters["peak_MiB"] = PeakResidentMiB();
}
BENCHMARK(BM_ParseTrace)->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(5);

void BM_LoadTraceFile(benchmark::State& state) {
  size_t ops = 0;
  for (auto _ : state) {
    const viz::LoadResult loaded = viz::LoadTraceFile(trace_path);
    if (!loaded.trace) {
      state.SkipWithError(loaded.error.c_str());
      break;
    }
    ops = loaded.trace->trace.ops.size();
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["peak_MiB"] = PeakResidentMiB();
}
BENCHMARK(BM_LoadTraceFile)->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(5);

constexpr unsigned kStrictFlags =
    rapidjson::kParseValidateEncodingFlag | rapidjson::kParseFullPrecisionFlag | rapidjson::kParseIterativeFlag;

void BM_RapidJsonDom(benchmark::State& state) {
  const std::string text = ReadInputFile(trace_path, kMaxJsonBytes, "a trace");
  for (auto _ : state) {
    rapidjson::Document document;
    document.Parse<kStrictFlags>(text.data(), text.size());
    if (document.HasParseError()) {
      state.SkipWithError("RapidJSON could not parse the trace");
      break;
    }
    state.counters["peak_MiB"] = PeakResidentMiB();  // while the document is alive
  }
}
BENCHMARK(BM_RapidJsonDom)->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(5);

void BM_RapidJsonSax(benchmark::State& state) {
  const std::string text = ReadInputFile(trace_path, kMaxJsonBytes, "a trace");
  for (auto _ : state) {
    rapidjson::BaseReaderHandler<> handler;  // accepts every event
    rapidjson::MemoryStream stream(text.data(), text.size());
    rapidjson::Reader reader;
    if (!reader.Parse<kStrictFlags>(stream, handler)) {
      state.SkipWithError("RapidJSON could not parse the trace");
      break;
    }
  }
  state.counters["peak_MiB"] = PeakResidentMiB();
}
BENCHMARK(BM_RapidJsonSax)->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(5);

}  // namespace

int main(int argc, char** argv) {
  // The trace is the first argument that is not a --benchmark flag.
  std::vector<char*> args = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (trace_path.empty() && argv[i][0] != '-') {
      trace_path = argv[i];
    } else {
      args.push_back(argv[i]);
    }
  }
  if (trace_path.empty()) {
    std::fprintf(stderr, "usage: %s TRACE.json [--benchmark_...]\n  make one with: stagecraft simulate "
                 "scenarios/uniform-costs.yaml --set pipeline.schedule=1f1b --set pipeline.ranks=8 "
                 "--set topology.devices_per_node=8 --set pipeline.microbatches=22750 --trace TRACE.json\n", argv[0]);
    return 2;
  }
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
