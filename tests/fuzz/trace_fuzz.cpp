// Fuzz harness: a trace file as the viewer opens it (viz::LoadTraceText: the schedules trace
// reader, its summary read leniently, then the indexing for drawing). Loading never throws:
// a bad file must come back as one error line, a good one with lanes sorted by start.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_input.h"
#include "stagecraft/viz/trace_set.h"

namespace {

[[noreturn]] void Broken(const char* what) {
  std::fprintf(stderr, "trace_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stagecraft;
  const viz::LoadResult loaded = viz::LoadTraceText(fuzz::AsText(data, size), "fuzz-trace.json");
  if (!loaded.trace) {
    if (loaded.error.empty() || loaded.error.find('\n') != std::string::npos) Broken("an error that is not one line");
    return 0;
  }
  const schedules::Trace& trace = loaded.trace->trace;
  for (const viz::Lane& lane : loaded.trace->lanes) {
    if (lane.ops.empty() || lane.max_end_ns.size() != lane.ops.size()) Broken("a lane without its prefix maxima");
    for (size_t i = 1; i < lane.ops.size(); ++i) {
      if (trace.ops[lane.ops[i - 1]].start_ns > trace.ops[lane.ops[i]].start_ns) Broken("a lane out of order");
    }
  }
  return 0;
}
