// Loading a trace for the viewer: parse it (schedules' trace reader), then index it for drawing:
// lanes per (rank, stream) sorted by start with a prefix maximum of end times, memory counters
// per rank by time, and the start of every step. Errors come back as one line, never thrown.
#include "stagecraft/viz/trace_set.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"

namespace stagecraft::viz {
namespace {

using schedules::Stream;
using schedules::TraceCounter;
using schedules::TraceOp;

constexpr int kStreams = schedules::kNumStreams;
// Ranks index dense per-rank arrays; a trace naming a larger pid (a foreign file, a corrupt
// one) is refused rather than allocated for.
constexpr int kMaxRanks = 1 << 20;
// Steps index step_start_ns; compute ops of a later step are left out of it.
constexpr int kMaxSteps = 1 << 22;

int64_t EndOf(const TraceOp& t) { return t.start_ns + t.duration_ns; }

// Per (rank, stream): the op indices sorted by start (ties keep file order), and the prefix
// maximum of their end times.
std::vector<Lane> BuildLanes(const std::vector<TraceOp>& ops, int ranks) {
  std::vector<Lane> by_key(static_cast<size_t>(ranks) * kStreams);
  std::vector<int> counts(by_key.size(), 0);
  for (const TraceOp& t : ops) ++counts[t.rank * kStreams + static_cast<int>(t.stream)];
  for (size_t k = 0; k < by_key.size(); ++k) by_key[k].ops.reserve(counts[k]);
  for (size_t i = 0; i < ops.size(); ++i) {
    by_key[ops[i].rank * kStreams + static_cast<int>(ops[i].stream)].ops.push_back(static_cast<int>(i));
  }
  std::vector<Lane> lanes;
  for (size_t k = 0; k < by_key.size(); ++k) {
    Lane& lane = by_key[k];
    if (lane.ops.empty()) continue;
    lane.rank = static_cast<int>(k / kStreams);
    lane.stream = static_cast<Stream>(k % kStreams);
    auto by_start = [&ops](int a, int b) { return ops[a].start_ns < ops[b].start_ns; };
    // Writers emit ops in order, so the common case costs one pass.
    if (!std::is_sorted(lane.ops.begin(), lane.ops.end(), by_start)) {
      std::stable_sort(lane.ops.begin(), lane.ops.end(), by_start);
    }
    lane.max_end_ns.resize(lane.ops.size());
    int64_t max_end = std::numeric_limits<int64_t>::min();
    for (size_t i = 0; i < lane.ops.size(); ++i) {
      max_end = std::max(max_end, EndOf(ops[lane.ops[i]]));
      lane.max_end_ns[i] = max_end;
    }
    lanes.push_back(std::move(lane));
  }
  return lanes;
}

std::vector<std::vector<TraceCounter>> MemoryByRank(const std::vector<TraceCounter>& counters, int ranks) {
  std::vector<std::vector<TraceCounter>> memory(ranks);
  for (const TraceCounter& c : counters) memory[c.rank].push_back(c);
  for (auto& rank : memory) {
    std::stable_sort(rank.begin(), rank.end(),
                     [](const TraceCounter& a, const TraceCounter& b) { return a.time_ns < b.time_ns; });
  }
  return memory;
}

// step_start_ns[t] = the earliest start of a compute op (F/B/I/W) of step t. A step with no
// compute op takes the start of the next step that has one, so the first entry is always the
// first step the trace shows.
std::vector<int64_t> StepStarts(const std::vector<TraceOp>& ops) {
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> starts;
  for (const TraceOp& t : ops) {
    if (!schedules::IsCompute(t.op.kind) || t.op.step < 0 || t.op.step >= kMaxSteps) continue;
    if (static_cast<size_t>(t.op.step) >= starts.size()) starts.resize(t.op.step + 1, kNone);
    starts[t.op.step] = std::min(starts[t.op.step], t.start_ns);
  }
  for (size_t t = starts.size(); t-- > 1;) {
    if (starts[t - 1] == kNone) starts[t - 1] = starts[t];
  }
  return starts;
}

// The whole error on one line: the window shows it in a single row.
std::string OneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\r', ' ');
  return text;
}

// Indexes a parsed trace; an error text when it cannot be indexed.
std::string Index(LoadedTrace* loaded) {
  const schedules::Trace& trace = loaded->trace;
  int max_rank = -1;
  for (const TraceOp& t : trace.ops) max_rank = std::max(max_rank, t.rank);
  for (const TraceCounter& c : trace.counters) max_rank = std::max(max_rank, c.rank);
  if (max_rank >= kMaxRanks) {
    return fmt::format("{}: rank {} is out of range (at most {} ranks)", loaded->path, max_rank, kMaxRanks);
  }
  loaded->ranks = max_rank + 1;
  loaded->lanes = BuildLanes(trace.ops, loaded->ranks);
  loaded->memory = MemoryByRank(trace.counters, loaded->ranks);
  loaded->step_start_ns = StepStarts(trace.ops);
  loaded->shape = schedules::TraceShape(trace);
  loaded->split = schedules::SplitBubbles(trace, true);
  loaded->split.resize(loaded->ranks);  // ranks with only memory counters have no ops
  if (!trace.ops.empty()) {
    loaded->start_ns = std::numeric_limits<int64_t>::max();
    loaded->end_ns = std::numeric_limits<int64_t>::min();
    for (const TraceOp& t : trace.ops) {
      loaded->start_ns = std::min(loaded->start_ns, t.start_ns);
      loaded->end_ns = std::max(loaded->end_ns, EndOf(t));
    }
  }
  return "";
}

}  // namespace

bool HasLane(const LoadedTrace& trace, schedules::Stream stream) {
  return std::any_of(trace.lanes.begin(), trace.lanes.end(), [stream](const Lane& l) { return l.stream == stream; });
}

LoadResult LoadTraceText(std::string_view text, const std::string& path) {
  auto loaded = std::make_shared<LoadedTrace>();
  loaded->path = path;
  try {
    schedules::TraceReadResult read = schedules::TraceFromJson(text, path);
    loaded->trace = std::move(read.trace);
    loaded->skipped = read.skipped;
    loaded->first_skipped = std::move(read.first_skipped);
  } catch (const stagecraft::InputError& e) {
    return LoadResult{nullptr, OneLine(e.what())};
  }
  if (std::string error = Index(loaded.get()); !error.empty()) return LoadResult{nullptr, OneLine(error)};
  return LoadResult{std::move(loaded), ""};
}

LoadResult LoadTraceFile(const std::string& path) {
  std::string text;
  try {
    text = ReadInputFile(path, kMaxJsonBytes, "a trace");
  } catch (const stagecraft::InputError& e) {
    return LoadResult{nullptr, OneLine(e.what())};
  }
  return LoadTraceText(text, path);
}

}  // namespace stagecraft::viz
