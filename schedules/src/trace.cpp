// Trace files (DESIGN.md §6): Chrome trace-event JSON written by hand (fast, and byte for
// byte the same for the same trace) and read by a small validating recursive-descent reader
// that decodes only what a trace needs, so a million events load in well under a second.
#include "stagecraft/schedules/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"

namespace stagecraft::schedules {
namespace {

// Keeps the summary's keys in the order they were written.
using OrderedJson = nlohmann::ordered_json;

constexpr std::string_view kThreadNames[] = {"compute", "send", "recv"};

// ---- Writing -------------------------------------------------------------------------------

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

// ---- Reading: JSON -------------------------------------------------------------------------

// One scalar value; containers, booleans and null read as kOther (no trace field takes them).
struct Scalar {
  enum Type { kOther, kInt, kFloat, kString } type = kOther;
  int64_t i = 0;
  double d = 0;
  std::string_view s;
};

// Walks JSON text, validating all of it (RFC 8259, UTF-8 in strings included). Errors name
// the source, line, column and byte offset.
class JsonCursor {
 public:
  JsonCursor(std::string_view text, std::string_view source)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()), source_(source) {}

  [[noreturn]] void Fail(std::string_view what) const {
    const char* line_start = p_;
    while (line_start > begin_ && line_start[-1] != '\n') --line_start;
    throw InputError(fmt::format("{}: not valid JSON: {} at line {}, column {} (byte {})", source_, what,
                                 1 + std::count(begin_, p_, '\n'), p_ - line_start + 1, p_ - begin_));
  }

  // Skips whitespace; the next character, or '\0' at the end.
  char Peek() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
    return p_ < end_ ? *p_ : '\0';
  }
  bool AtEnd() { return Peek() == '\0' && p_ == end_; }
  const char* pos() const { return p_; }

  // Calls member(key) for each member of the object at the cursor; member reads the value.
  // The key may live in scratch space that the value overwrites: use it before reading.
  template <typename Member>
  void Object(Member&& member) {
    Enter('{');
    if (Peek() == '}') return Leave();
    while (true) {
      if (Peek() != '"') Fail(p_ == end_ ? "unexpected end of input" : "expected a string key");
      const std::string_view key = String(&key_scratch_);
      if (Peek() != ':') Fail("expected ':' after an object key");
      ++p_;
      member(key);
      const char c = Peek();
      if (c == '}') return Leave();
      if (c != ',') Fail(p_ == end_ ? "unexpected end of input" : "expected ',' or '}' after an object member");
      ++p_;
    }
  }

  template <typename Element>
  void Array(Element&& element) {
    Enter('[');
    if (Peek() == ']') return Leave();
    while (true) {
      element();
      const char c = Peek();
      if (c == ']') return Leave();
      if (c != ',') Fail(p_ == end_ ? "unexpected end of input" : "expected ',' or ']' after an array element");
      ++p_;
    }
  }

  // Reads any value; containers are checked and skipped.
  Scalar Value() {
    const char c = Peek();
    if (c == '"') return Scalar{Scalar::kString, 0, 0, String(&value_scratch_)};
    if (c == '-' || (c >= '0' && c <= '9')) return Number();
    if (c == '{') Object([this](std::string_view) { Value(); });
    else if (c == '[') Array([this] { Value(); });
    else if (!Literal("true") && !Literal("false") && !Literal("null")) {
      Fail(p_ == end_ ? "unexpected end of input" : "expected a value");
    }
    return Scalar{};
  }

 private:
  static constexpr int kMaxDepth = 512;

  void Enter(char open) {
    if (++depth_ > kMaxDepth) Fail("nested deeper than 512 levels");
    SC_CHECK(*p_ == open, "container expected at cursor");
    ++p_;
  }
  void Leave() {
    --depth_;
    ++p_;
  }

  bool Literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) return false;
    p_ += word.size();
    return true;
  }

  bool Digits() {
    const char* start = p_;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    return p_ > start;
  }

  Scalar Number() {
    const char* start = p_;
    if (*p_ == '-') ++p_;
    if (p_ < end_ && *p_ == '0') {
      ++p_;
    } else if (!Digits()) {
      Fail("expected a digit");
    }
    bool integral = true;
    if (p_ < end_ && *p_ == '.') {
      ++p_;
      integral = false;
      if (!Digits()) Fail("expected a digit after '.'");
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      integral = false;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!Digits()) Fail("expected a digit in the exponent");
    }
    Scalar v;
    if (integral && std::from_chars(start, p_, v.i).ec == std::errc()) {
      v.type = Scalar::kInt;
    } else if (std::from_chars(start, p_, v.d).ec == std::errc()) {
      v.type = Scalar::kFloat;  // out-of-range integers too, as in most JSON readers
    }
    return v;
  }

  // The string at the cursor, unescaped: a view into the text when it has nothing to decode.
  std::string_view String(std::string* scratch) {
    const char* start = ++p_;
    while (p_ < end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') return std::string_view(start, p_++ - start);
      if (c == '\\' || c < 0x20 || c >= 0x80) break;
      ++p_;
    }
    scratch->assign(start, p_);
    while (true) {
      if (p_ == end_) Fail("unexpected end of input in a string");
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return *scratch;
      }
      if (c < 0x20) Fail("control character in a string (it must be escaped)");
      if (c == '\\') {
        Escape(scratch);
      } else if (c >= 0x80) {
        Utf8(scratch);
      } else {
        scratch->push_back(*p_++);
      }
    }
  }

  void Escape(std::string* out) {
    if (end_ - p_ < 2) Fail("unexpected end of input in a string");
    const char c = p_[1];
    constexpr std::string_view kFrom = "\"\\/bfnrt", kTo = "\"\\/\b\f\n\r\t";
    if (const size_t k = kFrom.find(c); k != std::string_view::npos) {
      out->push_back(kTo[k]);
      p_ += 2;
      return;
    }
    if (c != 'u') Fail("invalid escape in a string");
    uint32_t code = Hex4();
    if (code >= 0xDC00 && code <= 0xDFFF) Fail("unpaired UTF-16 surrogate in a string");
    if (code >= 0xD800 && code <= 0xDBFF) {
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') Fail("unpaired UTF-16 surrogate in a string");
      const uint32_t low = Hex4();
      if (low < 0xDC00 || low > 0xDFFF) Fail("unpaired UTF-16 surrogate in a string");
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    char utf8[4];
    int n = 0;
    if (code < 0x80) {
      utf8[n++] = static_cast<char>(code);
    } else if (code < 0x800) {
      utf8[n++] = static_cast<char>(0xC0 | code >> 6);
    } else if (code < 0x10000) {
      utf8[n++] = static_cast<char>(0xE0 | code >> 12);
      utf8[n++] = static_cast<char>(0x80 | (code >> 6 & 0x3F));
    } else {
      utf8[n++] = static_cast<char>(0xF0 | code >> 18);
      utf8[n++] = static_cast<char>(0x80 | (code >> 12 & 0x3F));
      utf8[n++] = static_cast<char>(0x80 | (code >> 6 & 0x3F));
    }
    if (code >= 0x80) utf8[n++] = static_cast<char>(0x80 | (code & 0x3F));
    out->append(utf8, n);
  }

  // "\uXXXX" at the cursor.
  uint32_t Hex4() {
    uint32_t code = 0;
    const char* hex = p_ + 2;
    if (end_ - hex < 4 || std::from_chars(hex, hex + 4, code, 16).ptr != hex + 4) Fail("expected 4 hex digits after \\u");
    p_ = hex + 4;
    return code;
  }

  // One multi-byte UTF-8 sequence, checked against the well-formed ranges of Unicode
  // Table 3-7 (no overlong forms, no surrogates, nothing past U+10FFFF).
  void Utf8(std::string* out) {
    const auto c = static_cast<unsigned char>(*p_);
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      lo = c == 0xE0 ? 0xA0 : 0x80;
      hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      lo = c == 0xF0 ? 0x90 : 0x80;
      hi = c == 0xF4 ? 0x8F : 0xBF;
    }
    bool ok = len > 0 && end_ - p_ >= len;
    for (int k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(p_[k]);
      ok = b >= (k == 1 ? lo : 0x80) && b <= (k == 1 ? hi : 0xBF);
    }
    if (!ok) Fail("invalid UTF-8 in a string");
    out->append(p_, len);
    p_ += len;
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  std::string_view source_;
  int depth_ = 0;
  std::string key_scratch_;
  std::string value_scratch_;
};

// ---- Reading: events -----------------------------------------------------------------------

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
  const OrderedJson header = OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
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
    trace->summary_json = it->dump();
  }
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
