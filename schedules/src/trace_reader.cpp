// Reading traces (DESIGN.md §6): a validating cursor (json_cursor.h) decodes only what a trace
// needs, so a million events load in well under a second; the small "stagecraft" header is
// read with nlohmann::json, its summary by the metrics codec's lenient read.
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "json_cursor.h"
#include "metrics_json_detail.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/trace.h"

namespace stagecraft::schedules {
namespace {

// Fields of one event that the reader understands; anything else is ignored.
enum Field : int {
  kPh, kName, kPid, kTid, kTs, kDur, kArgs,                              // the event object
  kKind, kStage, kMicrobatch, kStep, kVersion, kPeer, kOpIndex, kBytes,  // its args object
  kNumFields,
};
constexpr uint32_t Bit(Field f) { return uint32_t{1} << f; }
constexpr uint32_t kOpNeeds = Bit(kPid) | Bit(kTid) | Bit(kTs) | Bit(kDur) | Bit(kArgs) | Bit(kKind) |
                              Bit(kStage) | Bit(kMicrobatch) | Bit(kStep) | Bit(kOpIndex);
constexpr uint32_t kOpReads = kOpNeeds | Bit(kVersion) | Bit(kPeer);
constexpr uint32_t kCounterNeeds = Bit(kPid) | Bit(kTs) | Bit(kArgs) | Bit(kBytes);

constexpr std::string_view kFieldNames[kNumFields] = {"ph",    "name",       "pid",  "tid",     "ts",
                                                      "dur",   "args",       "kind", "stage",   "microbatch",
                                                      "step",  "version",    "peer", "op_index", "bytes"};

// The field named `key` among [first, last), or kNumFields.
Field FindField(std::string_view key, Field first, Field last) {
  for (int f = first; f <= last; ++f) {
    if (key == kFieldNames[f]) return static_cast<Field>(f);
  }
  return kNumFields;
}

// Microseconds (integer or fractional) to nanoseconds; false when negative or out of range
// (9e15 us, 285 years, keeps x * 1000 inside int64 for llround).
bool MicrosToNs(const Scalar& v, int64_t* ns) {
  constexpr int64_t kMaxMicros = 9'000'000'000'000'000;
  if (v.type == Scalar::kInt) {
    if (v.i < 0 || v.i > kMaxMicros) return false;
    *ns = v.i * 1000;
    return true;
  }
  if (v.type != Scalar::kFloat || !(v.d >= 0) || v.d > static_cast<double>(kMaxMicros)) return false;
  *ns = std::llround(v.d * 1000);
  return true;
}

// The fields read so far from one event: `have` marks fields present with a usable value,
// `bad` fields present with a wrong type or value. The last occurrence of a key wins.
struct RawEvent {
  uint32_t have = 0;
  uint32_t bad = 0;
  char ph = 0;  // 'X', 'C' or 0 for anything else
  bool named_memory = false;
  OpKind kind = OpKind::kF;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  int64_t ints[kNumFields] = {};  // pid, tid, stage, ..., bytes, indexed by Field

  void Set(Field f, const Scalar& v) {
    bool ok = false;
    if (f == kArgs) {
      // Not an object (the reader handles objects): wrong.
    } else if (f == kPh) {
      ok = v.type == Scalar::kString;
      ph = v.s == "X" ? 'X' : v.s == "C" ? 'C' : 0;
    } else if (f == kName) {
      ok = v.type == Scalar::kString;
      named_memory = ok && v.s == "memory";
    } else if (f == kTs || f == kDur) {
      ok = MicrosToNs(v, f == kTs ? &ts_ns : &dur_ns);
    } else if (f == kKind) {
      ok = v.type == Scalar::kString && ParseKind(v.s, &kind);
    } else if (f == kBytes) {
      ok = v.type == Scalar::kInt;
      ints[f] = v.i;
    } else {  // pid, tid and the op's 32-bit integers
      ok = v.type == Scalar::kInt && v.i >= std::numeric_limits<int32_t>::min() &&
           v.i <= std::numeric_limits<int32_t>::max();
      if (f == kPid) ok = ok && v.i >= 0;
      if (f == kTid) ok = ok && v.i >= 0 && v.i <= 2;
      ints[f] = v.i;
    }
    Mark(f, ok);
  }

  void Mark(Field f, bool ok) {
    have = ok ? have | Bit(f) : have & ~Bit(f);
    bad = ok ? bad & ~Bit(f) : bad | Bit(f);
  }
};

RawEvent ReadEvent(JsonCursor* in) {
  RawEvent e;
  in->Object([&](std::string_view key) {
    const Field f = FindField(key, kPh, kArgs);
    if (f == kArgs && in->Peek() == '{') {
      e.Mark(kArgs, true);
      in->Object([&](std::string_view arg) {
        const Field a = FindField(arg, kKind, kBytes);
        if (a == kNumFields) {
          in->Value();
        } else {
          e.Set(a, in->Value());
        }
      });
    } else if (f == kNumFields) {
      in->Value();
    } else {
      e.Set(f, in->Value());
    }
  });
  return e;
}

// Adds the event to the trace; false when it is an op or memory counter that lacks a field.
bool AddEvent(const RawEvent& e, Trace* trace) {
  if (e.ph == 'X') {
    if ((e.have & kOpNeeds) != kOpNeeds || (e.bad & kOpReads) != 0) return false;
    TraceOp t;
    t.rank = static_cast<int>(e.ints[kPid]);
    t.stream = static_cast<Stream>(e.ints[kTid]);
    t.op.kind = e.kind;
    t.op.stage = static_cast<int32_t>(e.ints[kStage]);
    t.op.microbatch = static_cast<int32_t>(e.ints[kMicrobatch]);
    t.op.step = static_cast<int32_t>(e.ints[kStep]);
    t.op.version = e.have & Bit(kVersion) ? static_cast<int32_t>(e.ints[kVersion]) : 0;
    t.op.peer = e.have & Bit(kPeer) ? static_cast<int32_t>(e.ints[kPeer]) : -1;
    t.op_index = static_cast<int>(e.ints[kOpIndex]);
    t.start_ns = e.ts_ns;
    t.duration_ns = e.dur_ns;
    trace->ops.push_back(t);
  } else if (e.ph == 'C' && e.named_memory) {
    if ((e.have & kCounterNeeds) != kCounterNeeds) return false;
    trace->counters.push_back(TraceCounter{static_cast<int>(e.ints[kPid]), e.ts_ns, e.ints[kBytes]});
  }
  return true;
}

// Fills the trace's header from the "stagecraft" object; absent fields keep their defaults.
void ReadHeader(std::string_view text, std::string_view source, Trace* trace) {
  auto fail = [source](std::string_view field, std::string_view expected) {
    throw InputError(fmt::format("{}: stagecraft{}: expected {}", source, field, expected));
  };
  const nlohmann::json header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) fail("", "an object");
  auto read_string = [&](const char* key, std::string* out) {
    const auto it = header.find(key);
    if (it == header.end()) return;
    if (!it->is_string()) fail(fmt::format(".{}", key), "a string");
    *out = it->get<std::string>();
  };
  read_string("source", &trace->source);
  read_string("scenario", &trace->scenario);
  read_string("schedule", &trace->schedule);
  if (const auto it = header.find("microbatches"); it != header.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 ||
        it->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      fail(".microbatches", "a positive integer");
    }
    trace->microbatches = static_cast<int>(it->get<int64_t>());
  }
  if (const auto it = header.find("summary"); it != header.end()) {
    if (!it->is_object()) fail(".summary", "an object");
    trace->summary = ScheduleMetricsFromValueLenient(*it);
  }
}

}  // namespace

TraceReadResult TraceFromJson(std::string_view text, std::string_view source) {
  TraceReadResult result;
  Trace& trace = result.trace;
  trace.source = "unknown";
  JsonCursor in(text, source);
  bool saw_events = false;
  std::string_view header;  // the raw "stagecraft" value, read once the whole text is valid
  if (in.Peek() == '{') {
    in.Object([&](std::string_view key) {
      if (key == "traceEvents" && in.Peek() == '[') {
        saw_events = true;
        in.Array([&] {
          if (in.Peek() != '{') {
            in.Value();
          } else if (!AddEvent(ReadEvent(&in), &trace)) {
            ++result.skipped;
          }
        });
      } else if (key == "stagecraft") {
        in.Peek();
        const char* start = in.pos();
        in.Value();
        header = std::string_view(start, in.pos() - start);
      } else {
        in.Value();
      }
    });
  } else {
    in.Value();
  }
  if (!in.AtEnd()) in.Fail("unexpected text after the JSON value");
  if (!saw_events) throw InputError(fmt::format("{}: not a trace (no traceEvents array)", source));
  if (!header.empty()) ReadHeader(header, source, &trace);
  return result;
}

}  // namespace stagecraft::schedules
