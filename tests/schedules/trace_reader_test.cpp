// Tests for schedules/src/trace_reader.cpp: located syntax errors, all of the text validated,
// header fields and the stated shape checked, events skipped and counted with the first one
// described, a hand-written foreign trace; the 200k-op case prints its timings, never asserts.
#include "stagecraft/schedules/trace.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fuzz_corpus.h"
#include "trace_cases.h"

namespace stagecraft::schedules {
namespace {

using test_cases::ErrorOf;
using test_cases::ExpectSameTrace;
using test_cases::HandMadeTrace;
using test_cases::MakeOp;
using test_cases::OneEventTrace;

TEST(TraceReadTest, TruncatedJsonNamesSourceAndOffset) {
  const std::string text = TraceToJson(HandMadeTrace());
  const std::string truncated = text.substr(0, text.size() / 2);
  const std::string what = ErrorOf([&] { TraceFromJson(truncated, "run/trace.json"); });
  EXPECT_EQ(what.rfind("run/trace.json: not valid JSON: ", 0), 0u) << what;
  EXPECT_NE(what.find("(byte "), std::string::npos) << what;
  EXPECT_NE(ErrorOf([] { TraceFromJson("", "empty.json"); }).find("empty.json: not valid JSON"), std::string::npos);
  EXPECT_NE(ErrorOf([] { TraceFromJson("{\"traceEvents\":[]} x", "tail.json"); }).find("tail.json: not valid JSON"),
            std::string::npos);
}

TEST(TraceReadTest, SyntaxErrorsGiveLineColumnAndByte) {
  EXPECT_EQ(ErrorOf([] { TraceFromJson(R"({"traceEvents":[1,]})", "x.json"); }),
            "x.json: not valid JSON: expected a value at line 1, column 19 (byte 18)");
  EXPECT_EQ(ErrorOf([] { TraceFromJson("{\n\"traceEvents\": [\n  {\"ph\": \"X\",}\n]}", "y.json"); }),
            "y.json: not valid JSON: expected a string key at line 3, column 14 (byte 32)");
  EXPECT_EQ(ErrorOf([] { TraceFromJson(R"({"traceEvents":[]})" "\n]", "z.json"); }),
            "z.json: not valid JSON: unexpected text after the JSON value at line 2, column 1 (byte 19)");
}

// The reader validates all of the text, not only the parts it decodes: RFC 8259 cases, each
// placed where the reader would otherwise skip it (an unknown field of an event).
TEST(TraceReadTest, ValidatesJsonItDoesNotNeed) {
  const std::vector<std::string> invalid = {
      "01", "1.", ".5", "-", "1e", "+1", "0x10", "NaN", "Infinity", "tru", "nul", "'x'", "[1,]", "[1 2]",
      "{\"a\" 1}", "{\"a\":1,}", "{1:2}", "\"tab\there\"", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"",
      "\"\\udc00\\ud800\"", "\"\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
      "\"\xe2\x82\"", "\"open", std::string(600, '[') + std::string(600, ']'),
  };
  for (const std::string& value : invalid) {
    const std::string text = R"({"traceEvents":[{"ph":"X","junk":)" + value + "}]}";
    const std::string what = ErrorOf([&] { TraceFromJson(text, "v.json"); });
    EXPECT_EQ(what.rfind("v.json: not valid JSON: ", 0), 0u) << value << " -> " << what;
  }
  const std::vector<std::string> valid = {
      "0", "-0", "1.5e-3", "2E+10", "-12.0", "1e999", "123456789012345678901234567890", "true", "false", "null",
      "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\u00e9\\ud83d\\ude00\"", "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"",
      "[]", "{}", " [ { \"a\" : [ 1 , { } ] } ] ", std::string(500, '[') + std::string(500, ']'),
  };
  for (const std::string& value : valid) {
    const std::string text = R"({"traceEvents":[{"ph":"X","junk":)" + value + "}]}";
    EXPECT_NO_THROW(TraceFromJson(text, "v.json")) << value;
  }
}

TEST(TraceReadTest, EscapedKeysAndOtherNumberFormsAreRead) {
  // "t\u0073" is "ts"; 1.5e3 us is 1500000 ns; -0 is an integer zero.
  const TraceReadResult read = TraceFromJson(
      R"({"traceEvents":[{"ph":"\u0058","pid":0,"tid":-0,"t\u0073":1.5e3,"dur":2E0,)"
      R"("args":{"kind":"S\u0054EP","stage":1,"microbatch":0,"step":0,"version":2,"op_index":7}}]})",
      "n.json");
  EXPECT_EQ(read.skipped, 0);
  ASSERT_EQ(read.trace.ops.size(), 1u);
  EXPECT_EQ(read.trace.ops[0].op, (Op{OpKind::kStep, 1, 0, 0, 2, -1}));
  EXPECT_EQ(read.trace.ops[0].start_ns, 1500000);
  EXPECT_EQ(read.trace.ops[0].duration_ns, 2000);
}

TEST(TraceReadTest, JsonThatIsNotATrace) {
  const std::string want = "t.json: not a trace (no traceEvents array)";
  EXPECT_EQ(ErrorOf([] { TraceFromJson(R"({"events":[]})", "t.json"); }), want);
  EXPECT_EQ(ErrorOf([] { TraceFromJson(R"({"traceEvents":{}})", "t.json"); }), want);
  EXPECT_EQ(ErrorOf([] { TraceFromJson(R"({"x":{"traceEvents":[]}})", "t.json"); }), want);
  EXPECT_EQ(ErrorOf([] { TraceFromJson(R"([{"ph":"X"}])", "t.json"); }), want);
  EXPECT_EQ(ErrorOf([] { TraceFromJson("42", "t.json"); }), want);
}

TEST(TraceReadTest, BadStagecraftHeaderNamesTheField) {
  EXPECT_EQ(ErrorOf([] { TraceFromJson(R"({"traceEvents":[],"stagecraft":{"microbatches":0}})", "h.json"); }),
            "h.json: stagecraft.microbatches: expected a positive integer");
  EXPECT_EQ(ErrorOf([] { TraceFromJson(R"({"traceEvents":[],"stagecraft":{"summary":[1]}})", "h.json"); }),
            "h.json: stagecraft.summary: expected an object");
  EXPECT_EQ(ErrorOf([] { TraceFromJson(R"({"traceEvents":[],"stagecraft":{"schedule":3}})", "h.json"); }),
            "h.json: stagecraft.schedule: expected a string");
  EXPECT_EQ(ErrorOf([] { TraceFromJson(R"({"traceEvents":[],"stagecraft":"v1"})", "h.json"); }),
            "h.json: stagecraft: expected an object");
}

TEST(TraceReadTest, BadShapeInTheHeaderNamesTheField) {
  const auto error = [](const std::string& fields) {
    return ErrorOf([&] { TraceFromJson(R"({"traceEvents":[],"stagecraft":{)" + fields + "}}", "h.json"); });
  };
  EXPECT_EQ(error(R"("ranks":0,"chunks":1,"placement":"loop")"), "h.json: stagecraft.ranks: expected a positive integer");
  EXPECT_EQ(error(R"("ranks":2,"chunks":1.0,"placement":"loop")"),
            "h.json: stagecraft.chunks: expected a positive integer");
  EXPECT_EQ(error(R"("ranks":2,"chunks":1,"placement":"zigzag")"), "h.json: stagecraft.placement: expected loop or v");
  EXPECT_EQ(error(R"("ranks":2,"chunks":1,"placement":1)"), "h.json: stagecraft.placement: expected loop or v");
  EXPECT_EQ(error(R"("ranks":2,"placement":"v")"),
            "h.json: stagecraft: expected ranks, chunks and placement together (chunks is missing)");
  EXPECT_EQ(error(R"("ranks":65536,"chunks":65536,"placement":"v")"),
            "h.json: stagecraft: expected ranks x chunks of at most 2147483647 stages");
  EXPECT_EQ(error(R"("summary":{"makespan_ms":1e999})"), "h.json: stagecraft: number overflow parsing '1e999'");
}

// Every op must run where the stated shape places its stage: a file that says otherwise is
// refused, not drawn with the wrong edges.
TEST(TraceReadTest, OpsMustFitTheStatedShape) {
  const auto error = [](int rank, int stage) {
    const std::string event = fmt::format(R"({{"ph":"X","pid":{},"tid":0,"ts":1,"dur":1,"args":{{"kind":"F",)"
                                          R"("stage":{},"microbatch":0,"step":0,"op_index":0}}}})", rank, stage);
    return ErrorOf([&] {
      TraceFromJson(R"({"traceEvents":[)" + event + R"(],"stagecraft":{"ranks":2,"chunks":2,"placement":"v"}})",
                    "s.json");
    });
  };
  // V on 2 ranks x 2 chunks: stages 0, 1 on ranks 0, 1; stages 2, 3 on ranks 1, 0.
  EXPECT_EQ(error(0, 2), "s.json: stagecraft: placement v puts stage 2 on rank 1, but an op of it ran on rank 0");
  EXPECT_EQ(error(2, 1), "s.json: stagecraft: placement v puts stage 1 on rank 1, but an op of it ran on rank 2");
  EXPECT_EQ(error(0, 4), "s.json: stagecraft: an op of stage 4 ran on rank 0, but 2 ranks x 2 chunks have 4 stages");
  EXPECT_NO_THROW(TraceFromJson(R"({"traceEvents":[{"ph":"X","pid":0,"tid":0,"ts":1,"dur":1,"args":{"kind":"F",)"
                                R"("stage":3,"microbatch":0,"step":0,"op_index":0}}],)"
                                R"("stagecraft":{"ranks":2,"chunks":2,"placement":"v"}})",
                                "s.json"));
}

TEST(TraceReadTest, WithoutHeaderSourceIsUnknown) {
  const TraceReadResult read = TraceFromJson(R"({"traceEvents":[]})", "bare.json");
  EXPECT_EQ(read.trace.source, "unknown");
  EXPECT_EQ(read.trace.scenario, "");
  EXPECT_EQ(read.trace.microbatches, 1);
  EXPECT_FALSE(read.trace.summary.has_value());
  EXPECT_FALSE(read.trace.shape.has_value());
  EXPECT_TRUE(read.trace.ops.empty());
}

TEST(TraceReadTest, UnknownFieldsAreIgnoredAndVersionPeerDefault) {
  const TraceReadResult read = TraceFromJson(
      OneEventTrace(R"({"zz":[{"a":1}],"ph":"X","pid":3,"tid":2,"ts":7,"dur":0.5,"name":"whatever",)"
                    R"("args":{"op_index":4,"kind":"RECV_B","stage":5,"microbatch":6,"step":7,"more":{"k":[1]}},"s":null})"),
      "u.json");
  EXPECT_EQ(read.skipped, 0);
  ASSERT_EQ(read.trace.ops.size(), 1u);
  const TraceOp& t = read.trace.ops[0];
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.stream, Stream::kRecv);
  EXPECT_EQ(t.op, (Op{OpKind::kRecvB, 5, 6, 7, 0, -1}));
  EXPECT_EQ(t.op_index, 4);
  EXPECT_EQ(t.start_ns, 7000);
  EXPECT_EQ(t.duration_ns, 500);
}

TEST(TraceReadTest, BrokenCompleteEventsAreSkippedAndCounted) {
  const std::string good = R"("ph":"X","pid":0,"tid":0,"dur":1,)";
  const std::string args = R"("args":{"kind":"F","stage":0,"microbatch":0,"step":0,"op_index":0})";
  const std::vector<std::string> broken = {
      "{" + good + R"("ts":"12",)" + args + "}",                                                 // ts a string
      "{" + good + R"("ts":1,"args":{"stage":0,"microbatch":0,"step":0,"op_index":0}})",          // no kind
      "{" + good + R"("ts":1,"args":{"kind":"Q","stage":0,"microbatch":0,"step":0,"op_index":0}})",  // bad kind
      "{" + good + R"("ts":1,"args":{"kind":"F","stage":0,"microbatch":0,"step":0}})",            // no op_index
      "{" + good + R"("ts":1,"args":{"kind":"F","stage":0.5,"microbatch":0,"step":0,"op_index":0}})",  // float
      "{" + good + R"("ts":1,"args":{"kind":"F","stage":0,"microbatch":0,"step":0,"op_index":0,"version":"1"}})",
      "{" + good + R"("ts":-1,)" + args + "}",                                                   // negative time
      "{" + good + R"("ts":[1],)" + args + "}",                                                  // ts an array
      "{" + good + R"("ts":1,"args":[1]})",                                                      // args not object
      "{" + good + R"("ts":1,"args":3})",                                                        // args a scalar
      R"({"ph":"X","pid":0,"tid":6,"dur":1,"ts":1,)" + args + "}",                               // tid not a stream
      R"({"ph":"X","pid":-2,"tid":0,"dur":1,"ts":1,)" + args + "}",                              // negative pid
      R"({"ph":"X","pid":4294967296,"tid":0,"dur":1,"ts":1,)" + args + "}",                      // pid too large
      R"({"ph":"C","name":"memory","pid":0,"ts":1,"args":{"bytes":1.5}})",                      // bytes not integer
  };
  std::string events = "{" + good + R"("ts":1,)" + args + "}";
  for (const std::string& e : broken) events += "," + e;
  events += ",{" + good + R"("ts":2,)" + args + "}";
  const TraceReadResult read = TraceFromJson("{\"traceEvents\":[" + events + "]}", "b.json");
  EXPECT_EQ(read.skipped, static_cast<int>(broken.size()));
  ASSERT_EQ(read.trace.ops.size(), 2u);
  EXPECT_EQ(read.trace.ops[0].start_ns, 1000);
  EXPECT_EQ(read.trace.ops[1].start_ns, 2000);
  EXPECT_TRUE(read.trace.counters.empty());
}

// Each skipped event of the fuzz corpus (tests/fuzz/corpus/trace/skip-*.json) is described as
// what is wrong with it, not as a missing field.
TEST(TraceReadTest, TheFirstSkippedEventIsNamedWithWhatIsWrong) {
  const std::pair<const char*, const char*> cases[] = {
      {"skip-dur-negative.json", "event 2: \"dur\" is negative (-5)"},
      {"skip-ts-not-a-number.json", "event 0: \"ts\" is not a number (\"12\")"},
      {"skip-ts-missing.json", "event 0: \"ts\" is missing"},
      {"skip-ts-beyond-a-double.json", "event 0: \"ts\" is out of range (a number beyond a double)"},
      {"skip-kind-unknown.json", "event 0: \"kind\" is not an op kind (\"Q\")"},
      {"skip-tid-not-a-stream.json",
       "event 0: \"tid\" is not a stream (6; 0 compute, 1 send, 2 recv, 3 collective, 4 to host, 5 to device)"},
      {"skip-stage-negative.json", "event 0: \"stage\" is negative (-1)"},
      {"skip-args-not-object.json", "event 0: \"args\" is not an object (an array)"},
      {"skip-bytes-fraction.json", "event 1: \"bytes\" is not an integer (1.5)"},
  };
  for (const auto& [name, why] : cases) {
    const TraceReadResult read = TraceFromJson(test_cases::FuzzCorpusText("trace", name), name);
    EXPECT_EQ(read.skipped, 1) << name;
    EXPECT_EQ(read.first_skipped, why) << name;
  }
}

// Only the first skipped event is described; a text value is quoted with its control bytes
// escaped and cut at 40 bytes.
TEST(TraceReadTest, OnlyTheFirstSkipIsDescribedAndTextIsEscaped) {
  const std::string args = R"("args":{"kind":"F","stage":0,"microbatch":0,"step":0,"op_index":0})";
  const std::string text = R"({"traceEvents":[{"ph":"X","pid":0,"tid":0,"dur":1,"ts":"\u001b[2J)" +
                           std::string(50, 'x') + R"(",)" + args + R"(},{"ph":"X","pid":0,"tid":0,"dur":-1,"ts":1,)" +
                           args + "}]}";
  const TraceReadResult read = TraceFromJson(text, "e.json");
  EXPECT_EQ(read.skipped, 2);
  EXPECT_EQ(read.first_skipped, "event 0: \"ts\" is not a number (\"\\x1b[2J" + std::string(36, 'x') + "...\")");
  const TraceReadResult clean =
      TraceFromJson(OneEventTrace(R"({"ph":"X","pid":0,"tid":0,"dur":1,"ts":1,)" + args + "}"), "c.json");
  EXPECT_EQ(clean.skipped, 0);
  EXPECT_EQ(clean.first_skipped, "");
}

TEST(TraceReadTest, HandWrittenForeignTrace) {
  std::ifstream in(std::string(STAGECRAFT_TEST_DATA) + "/traces/foreign.json", std::ios::binary);
  ASSERT_TRUE(in) << "missing fixture";
  std::stringstream text;
  text << in.rdbuf();
  const TraceReadResult read = TraceFromJson(text.str(), "foreign.json");
  // kernel (tid 7, no kind), "no kind", "bad kind" and the memory counter with text bytes.
  EXPECT_EQ(read.skipped, 4);
  Trace want;
  want.source = "measured";
  want.scenario = "fixture";
  want.schedule = "gpipe";
  want.microbatches = 4;
  // Its summary has no field a schedule's metrics know.
  want.ops = {MakeOp(0, Stream::kCompute, Op{OpKind::kF, 0, 0, 0, 0, -1}, 0, 2500, 10000),
              MakeOp(1, Stream::kSend, Op{OpKind::kSendF, 1, 1, 0, 0, 2}, 5, 20000, 1)};
  want.counters = {{1, 20125, 1048576}};
  ExpectSameTrace(read.trace, want);
}


// A 200k-op trace written and read back; the times are printed for the record, not checked.
TEST(TraceScaleTest, TwoHundredThousandOpsRoundTrip) {
  constexpr int kRanks = 8;
  constexpr int kOpsPerRank = 25000;
  Trace t;
  t.source = "predicted";
  t.scenario = "scale";
  t.schedule = "1f1b";
  t.microbatches = 64;
  t.ops.reserve(kRanks * kOpsPerRank);
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < kOpsPerRank; ++i) {
      const OpKind kind = static_cast<OpKind>(i % kNumOpKinds);
      Op op{kind, r, i % 64, i / 64, i / 64, IsComm(kind) ? r + 1 : -1};
      if (NamesTensor(kind)) op.tensor = Tensor::kActivations;
      t.ops.push_back(MakeOp(r, Info(kind).stream, op, i, int64_t{i} * 1234567 + r, 1000 + i % 977));
      if (i % 10 == 0) t.counters.push_back({r, int64_t{i} * 1234567, int64_t{i} << 20});
    }
  }
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const std::string text = TraceToJson(t);
  const auto t1 = Clock::now();
  const TraceReadResult read = TraceFromJson(text, "scale.json");
  const auto t2 = Clock::now();
  const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("[ trace    ] %zu ops + %zu counters, %.1f MB: serialize %.1f ms, parse %.1f ms\n", t.ops.size(),
              t.counters.size(), text.size() / 1e6, ms(t1 - t0), ms(t2 - t1));
  EXPECT_EQ(read.skipped, 0);
  ExpectSameTrace(read.trace, t);
}

}  // namespace
}  // namespace stagecraft::schedules
