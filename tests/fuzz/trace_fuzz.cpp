// Fuzz harness: a trace file as the viewer opens it (viz::LoadTraceText: the schedules trace
// reader, its summary read leniently, then the indexing for drawing), and as replay and compare
// --trace use it: read in full, held against the schedule its header names (generated at the
// trace's shape, when small), then made a run record and split into bubbles as a replay does.
// Neither may throw anything but one-line InputErrors; a good file's lanes are sorted by start.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "fuzz_input.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/bubble_split.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/schedules/trace_check.h"
#include "stagecraft/viz/trace_set.h"

namespace {

using namespace stagecraft;

[[noreturn]] void Broken(const char* what) {
  std::fprintf(stderr, "trace_fuzz: %s\n", what);
  std::abort();
}

void Viewer(std::string_view text) {
  const viz::LoadResult loaded = viz::LoadTraceText(text, "fuzz-trace.json");
  if (!loaded.trace) {
    if (loaded.error.empty() || loaded.error.find('\n') != std::string::npos) Broken("an error that is not one line");
    return;
  }
  const schedules::Trace& trace = loaded.trace->trace;
  for (const viz::Lane& lane : loaded.trace->lanes) {
    if (lane.ops.empty() || lane.max_end_ns.size() != lane.ops.size()) Broken("a lane without its prefix maxima");
    for (size_t i = 1; i < lane.ops.size(); ++i) {
      if (trace.ops[lane.ops[i - 1]].start_ns > trace.ops[lane.ops[i]].start_ns) Broken("a lane out of order");
    }
  }
}

// The schedule the trace's header names, at the trace's shape and steps, lowered as execute
// lowers by default; none for a name that is no generator, one that schedules by costs, or a
// shape past a few thousand ops (the fuzzer's time goes to the check, not to generating).
std::optional<schedules::Schedule> ScheduleOf(const schedules::Trace& trace) {
  const schedules::GeneratorInfo* info = schedules::FindGenerator(trace.schedule);
  const std::optional<schedules::Shape> shape = schedules::TraceShape(trace);
  if (info == nullptr || info->uses_costs || !shape) return std::nullopt;
  schedules::GeneratorParams p;
  p.ranks = shape->ranks;
  p.chunks = shape->chunks;
  p.microbatches = trace.microbatches;
  for (const schedules::TraceOp& op : trace.ops) p.steps = std::max(p.steps, op.op.step + 1);
  if (p.ranks > 16 || p.chunks > 4 || p.microbatches > 32 || p.steps > 4) return std::nullopt;
  if (!schedules::CheckParams(*info, p).empty()) return std::nullopt;
  return schedules::Lower(schedules::Generate(trace.schedule, p), schedules::P2p::kAhead);
}

// As replay reads a trace (harness RecordOf): in full, against its schedule, then its record
// finished and its gaps split.
void Replay(std::string_view text) {
  const schedules::Trace trace = schedules::TraceFromJsonInFull(text, "fuzz-trace.json");
  const std::optional<schedules::Schedule> schedule = ScheduleOf(trace);
  if (!schedule) return;
  schedules::CheckTraceOfSchedule(*schedule, trace, "fuzz-trace.json");
  schedules::RunRecord record;
  record.ranks.resize(schedule->ops.size());
  for (size_t r = 0; r < schedule->ops.size(); ++r) record.ranks[r].ops.resize(schedule->ops[r].size());
  for (const schedules::TraceOp& op : trace.ops) {
    if (op.stream == schedules::Stream::kCollective) continue;
    record.ranks[op.rank].ops[op.op_index] = {op.start_ns, op.start_ns + op.duration_ns};
  }
  schedules::FinishRunRecord(*schedule, 0, &record);
  schedules::SplitBubbles(*schedule, record, true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::AsText(data, size);
  Viewer(text);
  try {
    Replay(text);
  } catch (const InputError& e) {
    if (std::string(e.what()).find('\n') != std::string::npos) Broken("a replay error that is not one line");
  }
  return 0;
}
