// Writing traces (DESIGN.md §6): Chrome trace-event JSON written by hand (fast, and byte for
// byte the same for the same trace). The reader is in trace_reader.cpp.
#include "stagecraft/schedules/trace.h"

#include <charconv>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stagecraft/base/check.h"

namespace stagecraft::schedules {
namespace {

// Keeps the summary's keys in the order they were written.
using OrderedJson = nlohmann::ordered_json;

constexpr std::string_view kThreadNames[] = {"compute", "send", "recv"};

// A JSON string literal; bytes that are not UTF-8 become U+FFFD so the file always parses.
std::string Quote(std::string_view text) {
  return OrderedJson(std::string(text)).dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

void AppendInt(std::string* out, int64_t value) {
  char buf[24];
  out->append(buf, std::to_chars(buf, buf + sizeof buf, value).ptr);
}

// Nanoseconds as exact decimal microseconds ("12.345"): integers only, so nothing rounds.
void AppendMicros(std::string* out, int64_t ns) {
  SC_CHECK(ns >= 0, fmt::format("negative trace time {} ns", ns));
  AppendInt(out, ns / 1000);
  const int frac = static_cast<int>(ns % 1000);
  const char digits[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                          static_cast<char>('0' + frac % 10)};
  out->append(digits, 4);
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

// One complete event; plain appends instead of fmt because this runs once per op.
void AppendOp(std::string* out, const TraceOp& t, int microbatches) {
  const Op& op = t.op;
  const int tid = static_cast<int>(t.stream);
  SC_CHECK(tid >= 0 && tid <= 2, fmt::format("bad stream {}", tid));
  const std::string_view kind = KindName(op.kind);
  out->append(",\n{\"ph\":\"X\",\"name\":\"").append(ActionString(op, microbatches));
  out->append("\",\"cat\":\"").append(kind).append("\",\"pid\":");
  AppendInt(out, t.rank);
  out->append(",\"tid\":");
  AppendInt(out, tid);
  out->append(",\"ts\":");
  AppendMicros(out, t.start_ns);
  out->append(",\"dur\":");
  AppendMicros(out, t.duration_ns);
  out->append(",\"args\":{\"kind\":\"").append(kind).append("\",\"stage\":");
  AppendInt(out, op.stage);
  out->append(",\"microbatch\":");
  AppendInt(out, op.microbatch);
  out->append(",\"step\":");
  AppendInt(out, op.step);
  out->append(",\"version\":");
  AppendInt(out, op.version);
  out->append(",\"peer\":");
  AppendInt(out, op.peer);
  out->append(",\"op_index\":");
  AppendInt(out, t.op_index);
  out->append("}}");
}

}  // namespace

std::string TraceToJson(const Trace& trace) {
  const OrderedJson summary = OrderedJson::parse(trace.summary_json, nullptr, /*allow_exceptions=*/false);
  SC_CHECK(summary.is_object(), "trace summary_json is not a JSON object: " + trace.summary_json);
  const std::vector<int> ranks = RanksPresent(trace);

  std::string text;
  text.reserve(256 + ranks.size() * 320 + trace.ops.size() * 200 + trace.counters.size() * 80);
  auto out = std::back_inserter(text);
  // One event per line, each after the first led by ",\n": greppable, and diffs line up.
  // Ops and counters always follow their ranks' metadata, so only metadata can come first.
  // "stagecraft" goes last: Perfetto's JSON importer stops reading at a top-level key it does
  // not know. Perfetto and chrome://tracing both read ts/dur as microseconds whatever
  // displayTimeUnit says; "ns" only asks them to display nanoseconds.
  text += "{\"traceEvents\":[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    fmt::format_to(out, "{}\n{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":\"rank {}\"}}}}",
                   i == 0 ? "" : ",", ranks[i], ranks[i]);
    for (int tid = 0; tid < 3; ++tid) {
      fmt::format_to(out, ",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":\"{}\"}}}}",
                     ranks[i], tid, kThreadNames[tid]);
    }
  }
  for (const TraceOp& t : trace.ops) AppendOp(&text, t, trace.microbatches);
  for (const TraceCounter& c : trace.counters) {
    text += ",\n{\"ph\":\"C\",\"name\":\"memory\",\"pid\":";
    AppendInt(&text, c.rank);
    text += ",\"ts\":";
    AppendMicros(&text, c.time_ns);
    text += ",\"args\":{\"bytes\":";
    AppendInt(&text, c.memory_bytes);
    text += "}}";
  }
  fmt::format_to(out,
                 "\n],\n\"displayTimeUnit\":\"ns\",\n\"stagecraft\":{{\"source\":{},\"scenario\":{},\"schedule\":{},"
                 "\"microbatches\":{},\"summary\":{}}}}}\n",
                 Quote(trace.source), Quote(trace.scenario), Quote(trace.schedule), trace.microbatches,
                 summary.dump(-1, ' ', false, OrderedJson::error_handler_t::replace));
  return text;
}

}  // namespace stagecraft::schedules
