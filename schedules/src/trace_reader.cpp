// Reading traces (DESIGN.md §6): a validating cursor (json_cursor.h) decodes only what the
// events need, so a million load in well under a second; the small "stagecraft" header is read
// from RapidJSON's DOM (json_reader.h), its summary by the metrics codec's lenient read.
#include <cmath>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "json_cursor.h"
#include "json_reader.h"
#include "metrics_json_detail.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/schedules/json_io.h"
#include "stagecraft/schedules/trace.h"

namespace stagecraft::schedules {
namespace {

// Fields of one event that the reader understands; anything else is ignored.
enum Field : int {
  kPh, kName, kPid, kTid, kTs, kDur, kArgs,                              // the event object
  kKind, kStage, kMicrobatch, kStep, kVersion, kPeer, kOpIndex, kBytes,  // its args object
  kTensor,                                                               // a copy's only
  kNumFields,
};
constexpr uint32_t Bit(Field f) { return uint32_t{1} << f; }
constexpr uint32_t kOpNeeds = Bit(kPid) | Bit(kTid) | Bit(kTs) | Bit(kDur) | Bit(kArgs) | Bit(kKind) |
                              Bit(kStage) | Bit(kMicrobatch) | Bit(kStep) | Bit(kOpIndex);
constexpr uint32_t kOpReads = kOpNeeds | Bit(kVersion) | Bit(kPeer) | Bit(kTensor);
constexpr uint32_t kCounterNeeds = Bit(kPid) | Bit(kTs) | Bit(kArgs) | Bit(kBytes);

constexpr std::string_view kFieldNames[kNumFields] = {"ph",    "name",       "pid",  "tid",     "ts",
                                                      "dur",   "args",       "kind", "stage",   "microbatch",
                                                      "step",  "version",    "peer", "op_index", "bytes",
                                                      "tensor"};

// The field named `key` among [first, last), or kNumFields.
Field FindField(std::string_view key, Field first, Field last) {
  for (int f = first; f <= last; ++f) {
    if (key == kFieldNames[f]) return static_cast<Field>(f);
  }
  return kNumFields;
}

// Microseconds (integer or fractional) to nanoseconds; false when negative or out of range
// (9e15 us, 285 years, keeps x * 1000 inside int64 for llround).
constexpr int64_t kMaxMicros = 9'000'000'000'000'000;
bool MicrosToNs(const Scalar& v, int64_t* ns) {
  if (v.type == Scalar::kInt) {
    if (v.i < 0 || v.i > kMaxMicros) return false;
    *ns = v.i * 1000;
    return true;
  }
  if (v.type != Scalar::kFloat || !(v.d >= 0) || v.d > static_cast<double>(kMaxMicros)) return false;
  *ns = std::llround(v.d * 1000);
  return true;
}

// A value as a message shows it: the number, a string quoted (at most 40 bytes of it,
// Printable), or what it is. `first` is its first character in the text.
std::string Shown(const Scalar& v, char first) {
  constexpr size_t kShownBytes = 40;
  switch (v.type) {
    case Scalar::kInt: return fmt::format("{}", v.i);
    case Scalar::kFloat: return fmt::format("{}", v.d);
    case Scalar::kString:
      return fmt::format("\"{}{}\"", Printable(v.s.substr(0, kShownBytes)), v.s.size() > kShownBytes ? "..." : "");
    case Scalar::kOther: break;
  }
  if (first == '-' || (first >= '0' && first <= '9')) return "a number beyond a double";
  if (first == '[') return "an array";
  if (first == '{') return "an object";
  return first == 'n' ? "null" : "a boolean";
}

// Why the value of field `f` is not usable; "" when it is. The rules of RawEvent::Set.
std::string Problem(Field f, const Scalar& v, char first) {
  const auto is = [&](std::string_view what) { return fmt::format("is {} ({})", what, Shown(v, first)); };
  const bool number = v.type == Scalar::kInt || v.type == Scalar::kFloat;
  switch (f) {
    case kArgs: return is("not an object");
    case kPh:
    case kName: return v.type == Scalar::kString ? "" : is("not a string");
    case kTs:
    case kDur:
      if (!number) return is(first == '-' || (first >= '0' && first <= '9') ? "out of range" : "not a number");
      if (v.type == Scalar::kInt ? v.i < 0 : !(v.d >= 0)) return is("negative");
      return (v.type == Scalar::kInt ? v.i > kMaxMicros : v.d > static_cast<double>(kMaxMicros)) ? is("out of range")
                                                                                                    : "";
    case kKind: {
      OpKind kind;
      if (v.type != Scalar::kString) return is("not a string");
      return ParseKind(v.s, &kind) ? "" : is("not an op kind");
    }
    case kTensor: {
      Tensor tensor;
      if (v.type != Scalar::kString) return is("not a string");
      return ParseTensor(v.s, &tensor) ? "" : is("not activations, weights, optimizer or gradients");
    }
    default: break;
  }
  // The integers: bytes (int64), pid, tid and the op's fields (int32).
  if (v.type != Scalar::kInt) return is(v.type == Scalar::kFloat ? "not an integer" : "not a number");
  if (f == kTid && (v.i < 0 || v.i >= kNumStreams)) {
    return fmt::format("is not a stream ({}; 0 compute, 1 send, 2 recv, 3 collective, 4 to host, 5 to device)", v.i);
  }
  if (f == kPeer && v.i < -1) return is("below -1");
  if (f != kPeer && v.i < 0) return is("negative");
  if (f != kBytes && v.i > std::numeric_limits<int32_t>::max()) return is("out of range");
  return "";
}

// An integer field's rules (Problem words them): bytes any int64 >= 0; pid, stage, microbatch,
// step, version and op_index in 0..INT32_MAX; tid a stream (0 to 5); peer -1 (none) or a rank.
bool IntOk(Field f, const Scalar& v) {
  if (v.type != Scalar::kInt || v.i < (f == kPeer ? -1 : 0)) return false;
  if (f == kTid) return v.i < kNumStreams;
  return f == kBytes || v.i <= std::numeric_limits<int32_t>::max();
}

// The fields read so far from one event: `have` marks fields present with a usable value,
// `bad` fields present with a wrong type or value. The last occurrence of a key wins. When
// `why` is set (explaining a skipped event), why[f] says what is wrong with a bad field.
struct RawEvent {
  uint32_t have = 0;
  uint32_t bad = 0;
  char ph = 0;  // 'X', 'C' or 0 for anything else
  bool named_memory = false;
  OpKind kind = OpKind::kF;
  Tensor tensor = Tensor::kNone;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  int64_t ints[kNumFields] = {};  // pid, tid, stage, ..., bytes, indexed by Field
  std::string* why = nullptr;     // kNumFields entries, or null

  void Set(Field f, const Scalar& v, char first) {
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
    } else if (f == kTensor) {
      ok = v.type == Scalar::kString && ParseTensor(v.s, &tensor);
    } else {  // bytes, pid, tid and the op's 32-bit integers
      ok = IntOk(f, v);
      ints[f] = v.i;
    }
    Mark(f, ok);
    if (why != nullptr) why[f] = ok ? "" : Problem(f, v, first);
  }

  void Mark(Field f, bool ok) {
    have = ok ? have | Bit(f) : have & ~Bit(f);
    bad = ok ? bad & ~Bit(f) : bad | Bit(f);
  }
};

void ReadEvent(JsonCursor* in, RawEvent* e) {
  in->Object([&](std::string_view key) {
    const Field f = FindField(key, kPh, kArgs);
    if (f == kArgs && in->Peek() == '{') {
      e->Mark(kArgs, true);
      in->Object([&](std::string_view arg) {
        const Field a = FindField(arg, kKind, kTensor);
        if (a == kNumFields) {
          in->Value();
        } else {
          const char first = in->Peek();
          e->Set(a, in->Value(), first);
        }
      });
    } else if (f == kNumFields) {
      in->Value();
    } else {
      const char first = in->Peek();
      e->Set(f, in->Value(), first);
    }
  });
}

// The fields an event of its kind needs, and those it reads when present.
uint32_t Needs(const RawEvent& e) { return e.ph == 'X' ? kOpNeeds : kCounterNeeds; }
uint32_t Reads(const RawEvent& e) { return e.ph == 'X' ? kOpReads : kCounterNeeds; }

// Adds the event to the trace; false when it is an op or memory counter that lacks a field.
bool AddEvent(const RawEvent& e, Trace* trace) {
  if (e.ph == 'X') {
    if ((e.have & kOpNeeds) != kOpNeeds || (e.bad & kOpReads) != 0) return false;
    // A copy or an all-to-all names its tensor, no other op does.
    if (NamesTensor(e.kind) != ((e.have & Bit(kTensor)) != 0)) return false;
    TraceOp t;
    t.rank = static_cast<int>(e.ints[kPid]);
    t.stream = static_cast<Stream>(e.ints[kTid]);
    t.op.kind = e.kind;
    t.op.stage = static_cast<int32_t>(e.ints[kStage]);
    t.op.microbatch = static_cast<int32_t>(e.ints[kMicrobatch]);
    t.op.step = static_cast<int32_t>(e.ints[kStep]);
    t.op.version = e.have & Bit(kVersion) ? static_cast<int32_t>(e.ints[kVersion]) : 0;
    t.op.peer = e.have & Bit(kPeer) ? static_cast<int32_t>(e.ints[kPeer]) : -1;
    t.op.tensor = e.tensor;
    t.op_index = static_cast<int>(e.ints[kOpIndex]);
    t.start_ns = e.ts_ns;
    t.duration_ns = e.dur_ns;
    trace->ops.push_back(t);
  } else if (e.ph == 'C' && e.named_memory) {
    if ((e.have & kCounterNeeds) != kCounterNeeds || (e.bad & kCounterNeeds) != 0) return false;
    trace->counters.push_back(TraceCounter{static_cast<int>(e.ints[kPid]), e.ts_ns, e.ints[kBytes]});
  }
  return true;
}

// Why AddEvent skipped the event whose text is `text` (already read once, so valid JSON): its
// first field, in the order of kFieldNames, that is missing or unusable.
std::string ExplainSkipped(std::string_view text, std::string_view source) {
  std::string why[kNumFields];
  RawEvent e;
  e.why = why;
  JsonCursor in(text, source);
  ReadEvent(&in, &e);
  for (int f = 0; f < kNumFields; ++f) {
    const uint32_t bit = Bit(static_cast<Field>(f));
    if ((e.bad & Reads(e) & bit) != 0) return fmt::format("\"{}\" {}", kFieldNames[f], why[f]);
    if ((Needs(e) & bit) != 0 && (e.have & bit) == 0) return fmt::format("\"{}\" is missing", kFieldNames[f]);
  }
  if (e.ph == 'X' && NamesTensor(e.kind)) {
    return "\"tensor\" is missing (an OFFLOAD or RELOAD names what it copies, an ALL_TO_ALL its pass)";
  }
  if (e.ph == 'X') {
    return fmt::format("\"tensor\" on a {} (only an OFFLOAD, RELOAD or ALL_TO_ALL names one)", KindName(e.kind));
  }
  return "unusable";  // not reached: AddEvent skips only for a reason found above
}

// Reads the "stagecraft" object (`text`, which the cursor has validated) into the trace;
// absent fields keep their defaults. Errors name the field: "t.json: stagecraft.microbatches:
// expected a positive integer".
class HeaderReader {
 public:
  HeaderReader(std::string_view text, std::string_view source) : source_(source) {
    if (JsonSyntaxError error; !ParseJson(text, &header_, &error)) {
      // All RapidJSON refuses of valid JSON: a number beyond a double.
      throw InputError(fmt::format("{}: stagecraft: {}", source_, error.Located()));
    }
    if (!header_.IsObject()) Fail("", "an object");
  }

  void Read(Trace* trace) const {
    String("source", &trace->source);
    String("costs", &trace->costs);
    String("scenario", &trace->scenario);
    String("schedule", &trace->schedule);
    if (const int microbatches = Positive("microbatches"); microbatches > 0) trace->microbatches = microbatches;
    trace->shape = ReadShape();
    if (const JsonValue* tasks = FindMember(header_, "tasks")) {
      if (!tasks->IsArray()) Fail(".tasks", "a list of task names");
      for (rapidjson::SizeType i = 0; i < tasks->Size(); ++i) {
        if (!(*tasks)[i].IsString()) Fail(fmt::format(".tasks[{}]", i), "a task name");
        trace->tasks.emplace_back(StringOf((*tasks)[i]));
      }
      for (const TraceOp& op : trace->ops) {
        if (op.op.microbatch >= static_cast<int>(trace->tasks.size())) {
          Fail(".tasks", fmt::format("a name for every task its ops run (an op on device {} runs task {})", op.rank,
                                     op.op.microbatch));
        }
      }
    }
    if (const JsonValue* summary = FindMember(header_, "summary")) {
      if (!summary->IsObject()) Fail(".summary", "an object");
      trace->summary = ScheduleMetricsFromValueLenient(*summary);
    }
  }

 private:
  [[noreturn]] void Fail(std::string_view field, std::string_view expected) const {
    throw InputError(fmt::format("{}: stagecraft{}: expected {}", source_, field, expected));
  }
  void String(const char* key, std::string* out) const {
    const JsonValue* value = FindMember(header_, key);
    if (value == nullptr) return;
    if (!value->IsString()) Fail(fmt::format(".{}", key), "a string");
    *out = StringOf(*value);
  }
  // A positive 32-bit integer, or 0 when absent.
  int Positive(const char* key) const {
    const JsonValue* value = FindMember(header_, key);
    if (value == nullptr) return 0;
    if (!value->IsInt() || value->GetInt() < 1) Fail(fmt::format(".{}", key), "a positive integer");
    return value->GetInt();
  }
  // "ranks", "chunks" and "placement" come together, or not at all (a trace written before them).
  std::optional<Shape> ReadShape() const {
    const JsonValue* placement = FindMember(header_, "placement");
    const int ranks = Positive("ranks"), chunks = Positive("chunks");
    if (ranks == 0 && chunks == 0 && placement == nullptr) return std::nullopt;
    for (const auto& [name, absent] : {std::pair{"ranks", ranks == 0}, {"chunks", chunks == 0},
                                       {"placement", placement == nullptr}}) {
      if (absent) Fail("", fmt::format("ranks, chunks and placement together ({} is missing)", name));
    }
    Shape shape{ranks, chunks, Placement::kLoop};
    if (!placement->IsString() || !ParsePlacement(StringOf(*placement), &shape.placement)) {
      Fail(".placement", "loop or v");
    }
    if (int64_t{ranks} * chunks > std::numeric_limits<int32_t>::max()) {
      Fail("", "ranks x chunks of at most 2147483647 stages");
    }
    return shape;
  }

  std::string_view source_;
  rapidjson::Document header_;
};

// Every op must run where the stated shape puts its stage.
void CheckShape(const Trace& trace, std::string_view source) {
  const Shape& s = *trace.shape;
  for (const TraceOp& t : trace.ops) {
    if (t.op.stage >= s.stages()) {
      throw InputError(fmt::format("{}: stagecraft: an op of stage {} ran on rank {}, but {} ranks x {} chunks have {} "
                                   "stages", source, t.op.stage, t.rank, s.ranks, s.chunks, s.stages()));
    }
    if (const int rank = s.RankOf(t.op.stage); rank != t.rank) {
      throw InputError(fmt::format("{}: stagecraft: placement {} puts stage {} on rank {}, but an op of it ran on "
                                   "rank {}", source, PlacementName(s.placement), t.op.stage, rank, t.rank));
    }
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
        int64_t index = 0;
        in.Array([&] {
          if (in.Peek() != '{') {
            in.Value();
          } else {
            const char* start = in.pos();
            RawEvent e;
            ReadEvent(&in, &e);
            if (!AddEvent(e, &trace)) {
              if (result.skipped++ == 0) {
                result.first_skipped = fmt::format(
                    "event {}: {}", index, ExplainSkipped(std::string_view(start, in.pos() - start), source));
              }
            }
          }
          ++index;
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
  if (!header.empty()) HeaderReader(header, source).Read(&trace);
  if (trace.shape) CheckShape(trace, source);
  return result;
}

}  // namespace stagecraft::schedules
