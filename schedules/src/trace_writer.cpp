// Writing traces (DESIGN.md §6): a timed schedule becomes a Trace, and a Trace becomes Chrome
// trace-event JSON through RapidJSON's writer (json_writer.h), one event per line, byte for
// byte the same for the same trace. Times are exact decimal microseconds.
#include <algorithm>
#include <array>
#include <charconv>

#include <fmt/format.h>

#include "json_writer.h"
#include "metrics_json_detail.h"
#include "stagecraft/base/check.h"
#include "stagecraft/schedules/json_io.h"
#include "stagecraft/schedules/trace.h"

namespace stagecraft::schedules {
namespace {

constexpr std::string_view kThreadNames[kNumStreams] = {"compute", "send", "recv", "collective", "to host",
                                                         "to device"};

// Nanoseconds as exact decimal microseconds ("12.345"): integers only, so nothing rounds.
void WriteMicros(JsonWriter& w, int64_t ns) {
  SC_CHECK(ns >= 0, fmt::format("negative trace time {} ns", ns));
  char text[32];
  char* end = std::to_chars(text, text + 24, ns / 1000).ptr;
  const int frac = static_cast<int>(ns % 1000);
  *end++ = '.';
  *end++ = static_cast<char>('0' + frac / 100);
  *end++ = static_cast<char>('0' + frac / 10 % 10);
  *end++ = static_cast<char>('0' + frac % 10);
  WriteNumberText(w, std::string_view(text, end - text));
}

// A rank's process name: "rank 3", or "rank 3 (device 1, shared)" where its summary says it
// shares its device with other ranks (RankMetrics::device).
std::string ProcessName(const Trace& trace, int rank) {
  if (!trace.tasks.empty()) return fmt::format("device {}", rank);
  const int device = SharedDeviceOf(trace, rank);
  return device >= 0 ? fmt::format("rank {} (device {}, shared)", rank, device) : fmt::format("rank {}", rank);
}

// Ranks that have an op or a counter, ascending: each gets its process and thread names.
std::vector<int> RanksPresent(const Trace& trace) {
  std::vector<bool> present;
  auto mark = [&present](int rank) {
    SC_CHECK(rank >= 0, fmt::format("negative rank {} in trace", rank));
    if (static_cast<size_t>(rank) >= present.size()) present.resize(rank + 1, false);
    present[rank] = true;
  };
  for (const TraceOp& t : trace.ops) mark(t.rank);
  for (const TraceCounter& c : trace.counters) mark(c.rank);
  std::vector<int> ranks;
  for (size_t r = 0; r < present.size(); ++r) {
    if (present[r]) ranks.push_back(static_cast<int>(r));
  }
  return ranks;
}

// {"ph":"M","name":<what>,"pid":rank[,"tid":tid],"args":{"name":<name>}}
void WriteMetadata(JsonWriter& w, std::string_view what, int rank, int tid, std::string_view name) {
  w.StartObject();
  WriteMembers(w, {{"ph", "M"}, {"name", what}});
  WriteMembers(w, {{"pid", rank}});
  if (tid >= 0) WriteMembers(w, {{"tid", tid}});
  Key(w, "args");
  w.StartObject();
  WriteMembers(w, {{"name", name}});
  w.EndObject();
  w.EndObject();
}

// One complete event.
void WriteOp(JsonWriter& w, const TraceOp& t, int microbatches, const std::vector<std::string>& tasks) {
  const Op& op = t.op;
  const int tid = static_cast<int>(t.stream);
  SC_CHECK(tid >= 0 && tid < kNumStreams, fmt::format("bad stream {}", tid));
  const std::string_view kind = KindName(op.kind);
  const std::string* task = nullptr;
  if (!tasks.empty()) {
    SC_CHECK(op.microbatch >= 0 && op.microbatch < static_cast<int>(tasks.size()),
             fmt::format("a workload op names task {} of {}", op.microbatch, tasks.size()));
    task = &tasks[static_cast<size_t>(op.microbatch)];
  }
  w.StartObject();
  WriteMembers(w, {{"ph", "X"},
                   {"name", task != nullptr ? fmt::format("{} {}{}", *task, kind, op.stage) : ActionString(op, microbatches)},
                   {"cat", kind}});
  WriteMembers(w, {{"pid", t.rank}, {"tid", tid}});
  Key(w, "ts");
  WriteMicros(w, t.start_ns);
  Key(w, "dur");
  WriteMicros(w, t.duration_ns);
  Key(w, "args");
  w.StartObject();
  WriteMembers(w, {{"kind", kind}});
  WriteMembers(w, {{"stage", op.stage}, {"microbatch", op.microbatch}, {"step", op.step}, {"version", op.version},
                   {"peer", op.peer}, {"op_index", t.op_index}});
  if (op.tensor != Tensor::kNone) WriteMembers(w, {{"tensor", TensorName(op.tensor)}});  // copies and all-to-alls
  if (task != nullptr) WriteMembers(w, {{"task", *task}});
  w.EndObject();
  w.EndObject();
}

// {"ph":"C","name":"memory","pid":rank,"ts":..,"args":{"bytes":..}}
void WriteCounter(JsonWriter& w, const TraceCounter& c) {
  w.StartObject();
  WriteMembers(w, {{"ph", "C"}, {"name", "memory"}});
  WriteMembers(w, {{"pid", c.rank}});
  Key(w, "ts");
  WriteMicros(w, c.time_ns);
  Key(w, "args");
  w.StartObject();
  WriteMembers(w, {{"bytes", c.memory_bytes}});
  w.EndObject();
  w.EndObject();
}

// "stagecraft": {source, [costs,] scenario, schedule, microbatches, [ranks, chunks, placement,] summary}.
void WriteHeader(JsonWriter& w, const Trace& trace) {
  w.StartObject();
  WriteMembers(w, {{"source", trace.source}});
  if (!trace.costs.empty()) WriteMembers(w, {{"costs", trace.costs}});
  WriteMembers(w, {{"scenario", trace.scenario}, {"schedule", trace.schedule}});
  WriteMembers(w, {{"microbatches", trace.microbatches}});
  if (const std::optional<Shape>& shape = trace.shape) {
    WriteMembers(w, {{"ranks", shape->ranks}, {"chunks", shape->chunks}});
    WriteMembers(w, {{"placement", PlacementName(shape->placement)}});
  }
  if (!trace.tasks.empty()) {
    Key(w, "tasks");
    w.StartArray();
    for (const std::string& task : trace.tasks) WriteString(w, task);
    w.EndArray();
  }
  Key(w, "summary");
  if (trace.summary) {
    WriteScheduleMetrics(w, *trace.summary, NumberForm::kReparsed);
  } else {
    w.StartObject();
    w.EndObject();
  }
  w.EndObject();
}

}  // namespace

int SharedDeviceOf(const Trace& trace, int rank) {
  if (!trace.summary) return -1;
  for (const RankMetrics& m : trace.summary->ranks_detail) {
    if (m.rank == rank) return m.device;
  }
  return -1;
}

Trace BuildTrace(const Schedule& s, const RunRecord& result, const std::string& scenario, const std::string& source,
                 std::optional<ScheduleMetrics> summary) {
  Trace trace;
  trace.source = source;
  trace.scenario = scenario;
  trace.schedule = s.name;
  trace.microbatches = s.microbatches;
  trace.shape = s.shape;
  trace.summary = std::move(summary);
  for (int r = 0; r < s.ranks(); ++r) {
    for (size_t i = 0; i < s.ops[r].size(); ++i) {
      const Op& op = s.ops[r][i];
      const OpTiming& t = result.ranks[r].ops[i];
      if (t.start_ns < 0 || t.end_ns < t.start_ns) continue;
      TraceOp ev;
      ev.rank = r;
      ev.op = op;
      ev.op_index = static_cast<int>(i);
      ev.start_ns = t.start_ns - result.start_ns;
      ev.duration_ns = t.end_ns - t.start_ns;
      ev.stream = Info(op.kind).stream;
      trace.ops.push_back(ev);
    }
    for (const MemorySample& m : result.ranks[r].memory) {
      trace.counters.push_back({r, std::max<int64_t>(0, m.time_ns - result.start_ns), m.bytes});
    }
  }
  return trace;
}

std::string TraceToJson(const Trace& trace) {
  const std::vector<int> ranks = RanksPresent(trace);
  JsonTextStream out(1024 + ranks.size() * 320 + trace.ops.size() * 200 + trace.counters.size() * 80);
  JsonWriter w(out);
  // Compute, send and recv always have a lane; the collective and copy streams only when in use.
  std::array<bool, kNumStreams> lanes{true, true, true};
  for (const TraceOp& t : trace.ops) {
    if (const auto tid = static_cast<size_t>(t.stream); tid < lanes.size()) lanes[tid] = true;  // else WriteOp refuses it
  }
  // One event per line: greppable, and diffs line up. "stagecraft" goes last: Perfetto's JSON
  // importer stops reading at a top-level key it does not know. Perfetto and chrome://tracing
  // both read ts/dur as microseconds whatever displayTimeUnit says; "ns" only asks them to
  // display nanoseconds.
  w.StartObject();
  Key(w, "traceEvents");
  w.StartArray();
  for (const int rank : ranks) {
    out.BreakLine();
    WriteMetadata(w, "process_name", rank, -1, ProcessName(trace, rank));
    for (int tid = 0; tid < kNumStreams; ++tid) {
      if (!lanes[static_cast<size_t>(tid)]) continue;
      out.BreakLine();
      WriteMetadata(w, "thread_name", rank, tid, kThreadNames[tid]);
    }
  }
  for (const TraceOp& t : trace.ops) {
    out.BreakLine();
    WriteOp(w, t, trace.microbatches, trace.tasks);
  }
  for (const TraceCounter& c : trace.counters) {
    out.BreakLine();
    WriteCounter(w, c);
  }
  out.BreakLine();
  w.EndArray();
  out.BreakLine();
  Key(w, "displayTimeUnit");
  w.String("ns", 2);
  out.BreakLine();
  Key(w, "stagecraft");
  WriteHeader(w, trace);
  w.EndObject();
  SC_CHECK(w.IsComplete(), "trace JSON is complete");
  out.Put('\n');
  return out.Take();
}

}  // namespace stagecraft::schedules
